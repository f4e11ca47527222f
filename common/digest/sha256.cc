#include "common/digest/sha256.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <ostream>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace forge {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

// Longer inputs are cut in error messages; a corrupt multi-megabyte string helps nobody.
constexpr std::size_t kMaxQuotedInput = 80;

std::string QuoteForError(absl::string_view input) {
  if (input.size() <= kMaxQuotedInput) return absl::StrCat("\"", absl::CHexEscape(input), "\"");
  return absl::StrCat("\"", absl::CHexEscape(input.substr(0, kMaxQuotedInput)), "...\" (",
                      input.size(), " characters)");
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The SHA-256 implementation, fetched from libcrypto's default provider once rather than looked up
// again at every init (as EVP_sha256() is).
const EVP_MD* Sha256Algorithm() {
  static const EVP_MD* const algorithm = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return algorithm;
}

// Aborts with libcrypto's error queue when `ok` is false (see sha256.h for why not a Status).
void CheckLibcrypto(bool ok, const char* call) {
  if (ok) return;
  std::fprintf(stderr, "forge: SHA-256: %s failed in OpenSSL's libcrypto:", call);
  for (unsigned long error = ERR_get_error(); error != 0; error = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(error, text, sizeof(text));
    std::fprintf(stderr, " %s", text);
  }
  std::fprintf(stderr, "\n");
  std::abort();
}

// Decodes an even number of hex digits into hex.size() / 2 bytes at `out`. `what` names the input
// in the error ("hex", "digest").
absl::Status DecodeHexDigits(absl::string_view hex, absl::string_view what, std::uint8_t* out) {
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int high = HexValue(hex[i]);
    const int low = HexValue(hex[i + 1]);
    if (high < 0 || low < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", QuoteForError(hex),
                                                     " has a non-hex character at position ",
                                                     high < 0 ? i : i + 1));
    }
    out[i / 2] = static_cast<std::uint8_t>((high << 4) | low);
  }
  return absl::OkStatus();
}

}  // namespace

std::string HexEncode(absl::string_view bytes) {
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    hex.push_back(kHexDigits[byte >> 4]);
    hex.push_back(kHexDigits[byte & 0xf]);
  }
  return hex;
}

absl::StatusOr<std::string> HexDecode(absl::string_view hex) {
  if (hex.size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hex ", QuoteForError(hex), " has an odd number of digits (", hex.size(), ")"));
  }
  std::string bytes(hex.size() / 2, '\0');
  FORGE_RETURN_IF_ERROR(DecodeHexDigits(hex, "hex", reinterpret_cast<std::uint8_t*>(bytes.data())));
  return bytes;
}

absl::StatusOr<Digest> Digest::FromHex(absl::string_view hex) {
  if (hex.size() != 2 * kSize) {
    return absl::InvalidArgumentError(absl::StrCat("digest ", QuoteForError(hex), " is not ",
                                                   2 * kSize, " hex digits (it has ", hex.size(),
                                                   ")"));
  }
  Bytes bytes;
  FORGE_RETURN_IF_ERROR(DecodeHexDigits(hex, "digest", bytes.data()));
  return Digest(bytes);
}

std::string Digest::ToHex() const {
  return HexEncode(absl::string_view(reinterpret_cast<const char*>(bytes_.data()), bytes_.size()));
}

std::ostream& operator<<(std::ostream& out, const Digest& digest) { return out << digest.ToHex(); }

void Sha256::ContextDeleter::operator()(evp_md_ctx_st* context) const { EVP_MD_CTX_free(context); }

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  CheckLibcrypto(context_ != nullptr, "EVP_MD_CTX_new");
  CheckLibcrypto(Sha256Algorithm() != nullptr, "EVP_MD_fetch(SHA256)");
  CheckLibcrypto(EVP_DigestInit_ex(context_.get(), Sha256Algorithm(), nullptr) == 1,
                 "EVP_DigestInit_ex");
}

Sha256::Sha256(const Sha256& other) : context_(EVP_MD_CTX_new()) {
  CheckLibcrypto(context_ != nullptr, "EVP_MD_CTX_new");
  CheckLibcrypto(EVP_MD_CTX_copy_ex(context_.get(), other.context_.get()) == 1,
                 "EVP_MD_CTX_copy_ex");
}

Sha256& Sha256::operator=(const Sha256& other) {
  if (this != &other) *this = Sha256(other);
  return *this;
}

void Sha256::Update(absl::string_view bytes) {
  CheckLibcrypto(EVP_DigestUpdate(context_.get(), bytes.data(), bytes.size()) == 1,
                 "EVP_DigestUpdate");
}

Digest Sha256::Finish() {
  Digest::Bytes bytes;
  unsigned int size = 0;
  CheckLibcrypto(
      EVP_DigestFinal_ex(context_.get(), bytes.data(), &size) == 1 && size == Digest::kSize,
      "EVP_DigestFinal_ex");
  CheckLibcrypto(EVP_DigestInit_ex(context_.get(), Sha256Algorithm(), nullptr) == 1,
                 "EVP_DigestInit_ex");
  return Digest(bytes);
}

Digest Sha256Digest(absl::string_view bytes) {
  Sha256 hasher;
  hasher.Update(bytes);
  return hasher.Finish();
}

std::string Sha256Hex(absl::string_view bytes) { return Sha256Digest(bytes).ToHex(); }

}  // namespace forge
