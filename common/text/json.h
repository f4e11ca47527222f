// JSON string literals, for the writers of JSON lines and reports that build JSON by hand.
#ifndef FORGE_COMMON_TEXT_JSON_H_
#define FORGE_COMMON_TEXT_JSON_H_

#include <string>

#include "absl/strings/string_view.h"

namespace forge {

// `text` as a JSON string literal, quotes included: quotes, backslashes and control characters
// escaped, every other byte copied as it is.
std::string JsonString(absl::string_view text);

}  // namespace forge

#endif  // FORGE_COMMON_TEXT_JSON_H_
