// SHA-256 (FIPS 180-4), computed by OpenSSL's libcrypto, and Digest, the 32-byte value that names
// content in Forge (weights by digest, task and candidate digests, results-cache keys).
//
// libcrypto is the implementation because it is faster (it uses the CPU's SHA extensions where
// there are any: benchmarks/digest measures it) and already linked by gRPC. A libcrypto failure
// (out of memory, no default provider) aborts the process with libcrypto's error: a digest has no
// meaningful fallback and every caller would only pass the error on.
#ifndef FORGE_COMMON_DIGEST_SHA256_H_
#define FORGE_COMMON_DIGEST_SHA256_H_

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header

namespace forge {

// Lower-case hex of arbitrary bytes: two digits per byte.
std::string HexEncode(absl::string_view bytes);

// The bytes spelled by `hex` (an even number of digits, either case). InvalidArgument names the
// input and the first bad character.
absl::StatusOr<std::string> HexDecode(absl::string_view hex);

// A SHA-256 digest. Ordered and hashable, so it can key std::map and absl containers.
class Digest {
 public:
  static constexpr std::size_t kSize = 32;
  using Bytes = std::array<std::uint8_t, kSize>;

  Digest() = default;  // all zero bytes
  explicit Digest(const Bytes& bytes) : bytes_(bytes) {}

  // Parses exactly 64 hex digits, either case.
  static absl::StatusOr<Digest> FromHex(absl::string_view hex);

  const Bytes& bytes() const { return bytes_; }
  // 64 lower-case hex digits.
  std::string ToHex() const;

  friend bool operator==(const Digest&, const Digest&) = default;
  friend std::strong_ordering operator<=>(const Digest&, const Digest&) = default;

  template <typename H>
  friend H AbslHashValue(H state, const Digest& digest) {
    return H::combine(std::move(state), digest.bytes_);
  }

 private:
  Bytes bytes_{};
};

// Writes the hex form, so test failures and logs show digests readably.
std::ostream& operator<<(std::ostream& out, const Digest& digest);

// Streaming SHA-256: Update() with the input in pieces of any size, then Finish(). A copy carries
// on from the same input so far, independently of the original; a moved-from one may only be
// assigned to or destroyed.
class Sha256 {
 public:
  Sha256();
  Sha256(const Sha256& other);
  Sha256& operator=(const Sha256& other);
  Sha256(Sha256&&) noexcept = default;
  Sha256& operator=(Sha256&&) noexcept = default;
  ~Sha256() = default;

  void Update(absl::string_view bytes);
  // Returns the digest of everything passed to Update() and starts over with empty input.
  Digest Finish();

 private:
  struct ContextDeleter {
    void operator()(evp_md_ctx_st* context) const;
  };
  std::unique_ptr<evp_md_ctx_st, ContextDeleter> context_;
};

// The digest of `bytes` in one call.
Digest Sha256Digest(absl::string_view bytes);
// Its hex form: the same 64 digits `sha256sum` prints.
std::string Sha256Hex(absl::string_view bytes);

}  // namespace forge

#endif  // FORGE_COMMON_DIGEST_SHA256_H_
