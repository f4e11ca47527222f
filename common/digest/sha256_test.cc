#include "common/digest/sha256.h"

#include <sstream>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge {
namespace {

using ::testing::HasSubstr;

// FIPS 180-2 appendix B / NIST CAVP example vectors.
TEST(Sha256Test, NistVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      Sha256Hex(
          "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklm"
          "nopqrlmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(Sha256Hex(std::string(1'000'000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Bytes (7 * i + 3) mod 256: every byte value appears, including those >= 0x80.
std::string PatternBytes(std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((7 * i + 3) % 256);
  return bytes;
}

// Lengths around the padding boundaries: 55 bytes is the most that fits with the length field in
// one block, 56..63 push the length into a second block. Expected values from Python's hashlib.
TEST(Sha256Test, PaddingBoundaryLengths) {
  const std::pair<std::size_t, absl::string_view> cases[] = {
      {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
      {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
      {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
      {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
      {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
      {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
      {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
      {127, "a8d23e75d936f303d248888d9b165ee543f4cbafcad3c9dd2a79bd84faa11d07"},
      {128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"},
  };
  for (const auto& [size, expected] : cases) {
    EXPECT_EQ(Sha256Hex(PatternBytes(size)), expected) << "length " << size;
  }
}

TEST(Sha256Test, StreamingInOddChunksMatchesOneShot) {
  const std::string input = PatternBytes(1000);
  const Digest expected = Sha256Digest(input);
  for (std::size_t chunk : {1, 3, 7, 31, 55, 63, 64, 65, 127, 999}) {
    Sha256 hasher;
    for (std::size_t offset = 0; offset < input.size(); offset += chunk) {
      hasher.Update(absl::string_view(input).substr(offset, chunk));
    }
    EXPECT_EQ(hasher.Finish(), expected) << "chunk size " << chunk;
  }
}

TEST(Sha256Test, EverySplitPointMatchesOneShot) {
  const std::string input = PatternBytes(200);
  const Digest expected = Sha256Digest(input);
  for (std::size_t split = 0; split <= input.size(); ++split) {
    Sha256 hasher;
    hasher.Update(absl::string_view(input).substr(0, split));
    hasher.Update(absl::string_view(input).substr(split));
    EXPECT_EQ(hasher.Finish(), expected) << "split at " << split;
  }
}

// FIPS 180-2's long-message vector (NIST's "1 GiB" test): the 64-byte string below repeated
// 16,777,216 times, streamed in 1 MiB pieces. Its bit length needs more than 32 bits.
TEST(Sha256Test, OneGibibyteNistVector) {
  const std::string pattern = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno";
  std::string piece;
  for (int i = 0; i < (1 << 20) / 64; ++i) piece += pattern;
  Sha256 hasher;
  for (int i = 0; i < 1024; ++i) hasher.Update(piece);
  EXPECT_EQ(hasher.Finish().ToHex(),
            "50e72a0e26442fe2552dc3938ac58658228c0cbfb1d2ca872ae435266fcd055e");
}

TEST(Sha256Test, ACopyCarriesOnIndependently) {
  Sha256 original;
  original.Update("ab");
  Sha256 copy(original);
  copy.Update("c");
  EXPECT_EQ(copy.Finish().ToHex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 assigned;
  assigned.Update("unrelated input");
  assigned = original;
  original.Update("x");  // the original goes on alone
  EXPECT_EQ(assigned.Finish(), Sha256Digest("ab"));
  EXPECT_EQ(original.Finish(), Sha256Digest("abx"));

  Sha256 moved(std::move(assigned));
  moved.Update("abc");
  EXPECT_EQ(moved.Finish(), Sha256Digest("abc"));
}

TEST(Sha256Test, FinishStartsOver) {
  Sha256 hasher;
  hasher.Update("first input");
  hasher.Finish();
  hasher.Update("abc");
  EXPECT_EQ(hasher.Finish().ToHex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(HexTest, EncodesLowerCaseAndRoundTripsAllBytes) {
  EXPECT_EQ(HexEncode(std::string("\x00\x01\xab\xff", 4)), "0001abff");
  const std::string all = PatternBytes(256);
  EXPECT_EQ(HexDecode(HexEncode(all)).value(), all);
}

TEST(HexTest, DecodesEitherCase) {
  EXPECT_EQ(HexDecode("DeadBEEF").value(), "\xde\xad\xbe\xef");
  EXPECT_EQ(HexDecode("").value(), "");
}

TEST(HexTest, RejectsOddLengthAndNonHexNamingTheInput) {
  absl::Status odd = HexDecode("abc").status();
  EXPECT_EQ(odd.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(odd.message(), "hex \"abc\" has an odd number of digits (3)");

  absl::Status bad = HexDecode("00zz").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "hex \"00zz\" has a non-hex character at position 2");
  EXPECT_EQ(HexDecode("0z").status().message(), "hex \"0z\" has a non-hex character at position 1");
}

TEST(DigestTest, HexRoundTrip) {
  const Digest digest = Sha256Digest("abc");
  EXPECT_EQ(Digest::FromHex(digest.ToHex()).value(), digest);
  EXPECT_EQ(
      Digest::FromHex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD").value(),
      digest);
  EXPECT_EQ(digest.bytes()[0], 0xba);
  EXPECT_EQ(digest.bytes()[31], 0xad);
}

TEST(DigestTest, FromHexRejectsWrongLengthNamingTheInput) {
  absl::Status status = Digest::FromHex("abc123").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "digest \"abc123\" is not 64 hex digits (it has 6)");
}

TEST(DigestTest, FromHexRejectsNonHexNamingTheInputAndPosition) {
  std::string hex = Sha256Hex("abc");
  hex[10] = 'g';
  absl::Status status = Digest::FromHex(hex).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "digest \"" + hex + "\" has a non-hex character at position 10");
}

TEST(DigestTest, LongAndBinaryBadInputIsQuotedShortAndEscaped) {
  absl::Status status = Digest::FromHex(std::string(500, '\n')).status();
  EXPECT_THAT(status.message(), HasSubstr("\\n\\n...\" (500 characters) is not 64 hex digits"));
  EXPECT_LT(status.message().size(), 250u);
}

TEST(DigestTest, ComparesByBytes) {
  const Digest a = Sha256Digest("a");
  const Digest b = Sha256Digest("b");
  EXPECT_EQ(a, Sha256Digest("a"));
  EXPECT_NE(a, b);
  // Ordering follows the bytes, i.e. the hex strings.
  EXPECT_EQ(a < b, a.ToHex() < b.ToHex());
  EXPECT_EQ(Digest(), Digest::FromHex(std::string(64, '0')).value());
}

TEST(DigestTest, WorksAsAbslHashSetKey) {
  absl::flat_hash_set<Digest> seen;
  for (int i = 0; i < 100; ++i) seen.insert(Sha256Digest(std::to_string(i % 10)));
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_TRUE(seen.contains(Sha256Digest("7")));
  EXPECT_FALSE(seen.contains(Sha256Digest("10")));
}

TEST(DigestTest, PrintsAsHex) {
  std::ostringstream out;
  out << Sha256Digest("");
  EXPECT_EQ(out.str(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

}  // namespace
}  // namespace forge
