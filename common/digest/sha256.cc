#include "common/digest/sha256.h"

#include <algorithm>
#include <cstring>
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

// FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of the cube roots of the
// first 64 primes.
constexpr std::array<std::uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

// FIPS 180-4 section 5.3.3: the first 32 bits of the fractional parts of the square roots of the
// first 8 primes.
constexpr std::array<std::uint32_t, 8> kInitialState = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

constexpr std::uint32_t RotateRight(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

// The functions of FIPS 180-4 section 4.1.2.
constexpr std::uint32_t Choose(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  return (x & y) ^ (~x & z);
}
constexpr std::uint32_t Majority(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  return (x & y) ^ (x & z) ^ (y & z);
}
constexpr std::uint32_t BigSigma0(std::uint32_t x) {
  return RotateRight(x, 2) ^ RotateRight(x, 13) ^ RotateRight(x, 22);
}
constexpr std::uint32_t BigSigma1(std::uint32_t x) {
  return RotateRight(x, 6) ^ RotateRight(x, 11) ^ RotateRight(x, 25);
}
constexpr std::uint32_t SmallSigma0(std::uint32_t x) {
  return RotateRight(x, 7) ^ RotateRight(x, 18) ^ (x >> 3);
}
constexpr std::uint32_t SmallSigma1(std::uint32_t x) {
  return RotateRight(x, 17) ^ RotateRight(x, 19) ^ (x >> 10);
}

std::uint32_t LoadBigEndian32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
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

Sha256::Sha256() { Reset(); }

void Sha256::Reset() {
  state_ = kInitialState;
  pending_size_ = 0;
  total_bytes_ = 0;
}

void Sha256::CompressBlock(const std::uint8_t* block) {
  // FIPS 180-4 section 6.2.2.
  std::array<std::uint32_t, 64> schedule;
  for (int t = 0; t < 16; ++t) schedule[t] = LoadBigEndian32(block + 4 * t);
  for (int t = 16; t < 64; ++t) {
    schedule[t] = SmallSigma1(schedule[t - 2]) + schedule[t - 7] + SmallSigma0(schedule[t - 15]) +
                  schedule[t - 16];
  }
  std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  std::uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (int t = 0; t < 64; ++t) {
    const std::uint32_t t1 = h + BigSigma1(e) + Choose(e, f, g) + kRoundConstants[t] + schedule[t];
    const std::uint32_t t2 = BigSigma0(a) + Majority(a, b, c);
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
}

void Sha256::Update(absl::string_view bytes) {
  const auto* input = reinterpret_cast<const std::uint8_t*>(bytes.data());
  std::size_t remaining = bytes.size();
  total_bytes_ += remaining;
  if (pending_size_ > 0) {
    const std::size_t take = std::min(remaining, pending_.size() - pending_size_);
    std::memcpy(pending_.data() + pending_size_, input, take);
    pending_size_ += take;
    input += take;
    remaining -= take;
    if (pending_size_ < pending_.size()) return;
    CompressBlock(pending_.data());
    pending_size_ = 0;
  }
  // Whole blocks straight from the input, without copying them through pending_.
  for (; remaining >= pending_.size(); remaining -= pending_.size(), input += pending_.size()) {
    CompressBlock(input);
  }
  std::memcpy(pending_.data(), input, remaining);
  pending_size_ = remaining;
}

Digest Sha256::Finish() {
  // FIPS 180-4 section 5.1.1: a 1 bit, zeros up to 56 bytes into the last block, then the
  // message length in bits as a 64-bit big-endian number.
  const std::uint64_t total_bits = total_bytes_ * 8;
  pending_[pending_size_++] = 0x80;
  if (pending_size_ > 56) {
    std::fill(pending_.begin() + pending_size_, pending_.end(), 0);
    CompressBlock(pending_.data());
    pending_size_ = 0;
  }
  std::fill(pending_.begin() + pending_size_, pending_.begin() + 56, 0);
  for (int i = 0; i < 8; ++i)
    pending_[56 + i] = static_cast<std::uint8_t>(total_bits >> (56 - 8 * i));
  CompressBlock(pending_.data());

  Digest::Bytes bytes;
  for (int i = 0; i < 8; ++i) {
    bytes[4 * i] = static_cast<std::uint8_t>(state_[i] >> 24);
    bytes[4 * i + 1] = static_cast<std::uint8_t>(state_[i] >> 16);
    bytes[4 * i + 2] = static_cast<std::uint8_t>(state_[i] >> 8);
    bytes[4 * i + 3] = static_cast<std::uint8_t>(state_[i]);
  }
  Reset();
  return Digest(bytes);
}

Digest Sha256Digest(absl::string_view bytes) {
  Sha256 hasher;
  hasher.Update(bytes);
  return hasher.Finish();
}

std::string Sha256Hex(absl::string_view bytes) { return Sha256Digest(bytes).ToHex(); }

}  // namespace forge
