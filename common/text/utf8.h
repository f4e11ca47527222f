// UTF-8 well-formedness, for writers of text formats (JSON logs, Prometheus exposition) that must
// replace ill-formed bytes instead of emitting them.
#ifndef FORGE_COMMON_TEXT_UTF8_H_
#define FORGE_COMMON_TEXT_UTF8_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace forge {

// U+FFFD REPLACEMENT CHARACTER, encoded.
inline constexpr absl::string_view kUtf8ReplacementCharacter = "\xEF\xBF\xBD";

// The length of the well-formed UTF-8 sequence that `text` starts with (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF): 1 for ASCII, 2 to 4 otherwise, and 0 when `text`
// is empty or starts ill-formed.
std::size_t Utf8SequenceLength(absl::string_view text);

}  // namespace forge

#endif  // FORGE_COMMON_TEXT_UTF8_H_
