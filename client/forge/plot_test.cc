#include "client/forge/plot.h"

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/forge/png.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::client {
namespace {

struct Chunk {
  std::string type;
  std::string data;
  uint32_t stored_crc = 0;
};

uint32_t BigEndian32(const std::string& bytes, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 3]));
}

// Splits a PNG after its signature into chunks; fails the test on a truncated file.
std::vector<Chunk> ReadChunks(const std::string& png) {
  std::vector<Chunk> chunks;
  size_t at = 8;
  while (at < png.size()) {
    if (at + 12 > png.size()) {
      ADD_FAILURE() << "truncated chunk header at byte " << at;
      break;
    }
    const uint32_t length = BigEndian32(png, at);
    if (at + 12 + length > png.size()) {
      ADD_FAILURE() << "truncated chunk at byte " << at;
      break;
    }
    chunks.push_back(
        {png.substr(at + 4, 4), png.substr(at + 8, length), BigEndian32(png, at + 8 + length)});
    at += 12 + length;
  }
  return chunks;
}

uint32_t Crc(const Chunk& chunk) {
  const std::string covered = chunk.type + chunk.data;
  return static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0),
                                     reinterpret_cast<const Bytef*>(covered.data()),
                                     static_cast<uInt>(covered.size())));
}

// The decoded pixels of a PNG the encoder wrote (filter 0 rows), or empty on failure.
std::vector<uint8_t> Inflate(const std::string& compressed, size_t expected_size) {
  std::vector<uint8_t> raw(expected_size + 16);  // room to notice extra bytes
  uLongf size = raw.size();
  const int result = uncompress(
      raw.data(), &size, reinterpret_cast<const Bytef*>(compressed.data()), compressed.size());
  EXPECT_EQ(result, Z_OK);
  raw.resize(size);
  return raw;
}

TEST(PngTest, EncodesAValidRgbPng) {
  Image image(7, 3, Rgb{10, 20, 30});
  image.Set(0, 0, Rgb{255, 0, 0});
  image.Set(6, 2, Rgb{0, 255, 0});
  image.Set(7, 0, Rgb{1, 1, 1});  // outside: dropped

  absl::StatusOr<std::string> png = EncodePng(image);
  ASSERT_TRUE(png.ok()) << png.status();
  ASSERT_GE(png->size(), 8u);
  EXPECT_EQ(png->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));

  const std::vector<Chunk> chunks = ReadChunks(*png);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].type, "IHDR");
  EXPECT_EQ(chunks[1].type, "IDAT");
  EXPECT_EQ(chunks[2].type, "IEND");
  for (const Chunk& chunk : chunks) EXPECT_EQ(chunk.stored_crc, Crc(chunk)) << chunk.type;

  const std::string& header = chunks[0].data;
  ASSERT_EQ(header.size(), 13u);
  EXPECT_EQ(BigEndian32(header, 0), 7u);
  EXPECT_EQ(BigEndian32(header, 4), 3u);
  EXPECT_EQ(header[8], 8);   // bit depth
  EXPECT_EQ(header[9], 2);   // truecolour
  EXPECT_EQ(header[10], 0);  // deflate
  EXPECT_EQ(header[11], 0);  // filter method
  EXPECT_EQ(header[12], 0);  // no interlace

  const size_t row_bytes = 1 + 7 * 3;
  const std::vector<uint8_t> raw = Inflate(chunks[1].data, 3 * row_bytes);
  ASSERT_EQ(raw.size(), 3 * row_bytes);
  for (int y = 0; y < 3; ++y) {
    EXPECT_EQ(raw[y * row_bytes], 0) << "filter byte of row " << y;
    for (int x = 0; x < 7; ++x) {
      const Rgb pixel = image.Get(x, y);
      const size_t at = y * row_bytes + 1 + x * 3;
      EXPECT_EQ((Rgb{raw[at], raw[at + 1], raw[at + 2]}), pixel) << x << "," << y;
    }
  }
  EXPECT_EQ((Rgb{raw[1], raw[2], raw[3]}), (Rgb{255, 0, 0}));
  const size_t last = 2 * row_bytes + 1 + 6 * 3;
  EXPECT_EQ((Rgb{raw[last], raw[last + 1], raw[last + 2]}), (Rgb{0, 255, 0}));
}

int CountColor(const Image& image, Rgb color) {
  int count = 0;
  for (int y = 0; y < image.height(); ++y) {
    for (int x = 0; x < image.width(); ++x) count += image.Get(x, y) == color ? 1 : 0;
  }
  return count;
}

// The charts' colours (plot.cc): measured blue, PREDICTED orange.
constexpr Rgb kMeasured{46, 110, 180};
constexpr Rgb kPredicted{230, 140, 40};
constexpr Rgb kWhite{255, 255, 255};

TEST(PlotTest, SpeedupBarsScaleWithTheSpeedupAndPredictedOnesStandApart) {
  const Image measured_only =
      SpeedupChart({{"#1 a", 1.0, false}, {"#2 b", 3.0, false}}, "t").value();
  EXPECT_GT(CountColor(measured_only, kMeasured), 0);
  EXPECT_EQ(CountColor(measured_only, kPredicted), 0);

  // The first bar at 1x, then at 2x, on the same axis (the second bar fixes its top): twice as
  // many bar pixels above the baseline row (the legend's swatch counted out by the 0x chart).
  auto measured_pixels = [](double speedup) {
    return CountColor(SpeedupChart({{"x", speedup, false}, {"y", 4.0, true}}, "t").value(),
                      kMeasured);
  };
  const int baseline = measured_pixels(0.0);
  const int once = measured_pixels(1.0) - baseline;
  const int twice = measured_pixels(2.0) - baseline;
  EXPECT_GT(once, 0);
  EXPECT_NEAR(static_cast<double>(twice) / once, 2.0, 0.05);
  EXPECT_GT(CountColor(SpeedupChart({{"y", 4.0, true}}, "t").value(), kPredicted), 0);
}

TEST(PlotTest, RooflineDrawsMeasuredAndPredictedPointsApart) {
  const std::vector<ComputeCeiling> ceilings = {{"fp32", 51e12}};
  const int legend = CountColor(RooflineChart(4.3e12, ceilings, {}, "r").value(), kMeasured);
  const Image measured =
      RooflineChart(4.3e12, ceilings, {{"#1", "", 0.25, 0.5e12, false}}, "r").value();
  const Image predicted =
      RooflineChart(4.3e12, ceilings, {{"#1", "", 0.25, 0.5e12, true}}, "r").value();
  EXPECT_GT(CountColor(measured, kMeasured), legend);
  EXPECT_EQ(CountColor(measured, kPredicted), 0);
  EXPECT_GT(CountColor(predicted, kPredicted), 0);
  EXPECT_EQ(CountColor(predicted, kMeasured), legend);

  // A point without arithmetic intensity has no place on log axes: not drawn.
  const Image dropped = RooflineChart(4.3e12, ceilings, {{"#1", "#1 x", 0, 0, false}}, "r").value();
  EXPECT_EQ(CountColor(dropped, kMeasured), legend);
  EXPECT_EQ(dropped.width(), RooflineChart(4.3e12, ceilings, {}, "r").value().width())
      << "a point not drawn has no line in the key";
}

// The pixels that are not white, as a string of '#' and '.', to compare two renderings.
std::string Ink(const Image& image) {
  std::string ink;
  for (int y = 0; y < image.height(); ++y) {
    for (int x = 0; x < image.width(); ++x) ink += image.Get(x, y) == kWhite ? '.' : '#';
  }
  return ink;
}

// The old bitmap font drew lower case as capitals; a real font keeps the case.
TEST(PlotTest, TextKeepsItsCase) {
  const Image lower = SpeedupChart({{"#1 linear+add", 2.0, false}}, "job speedup").value();
  const Image upper = SpeedupChart({{"#1 LINEAR+ADD", 2.0, false}}, "JOB SPEEDUP").value();
  ASSERT_EQ(lower.width(), upper.width());
  ASSERT_EQ(lower.height(), upper.height());
  EXPECT_NE(Ink(lower), Ink(upper));
}

// A label too long for the label column is cut: nothing is drawn in the left margin.
TEST(PlotTest, LongLabelsAreCutToTheirColumn) {
  const Image image = SpeedupChart({{std::string(400, 'm'), 2.0, false}}, "t").value();
  for (int y = 0; y < image.height(); ++y) {
    for (int x = 0; x < 15; ++x) ASSERT_EQ(image.Get(x, y), kWhite) << x << "," << y;
  }
}

TEST(PlotTest, SpeedupChartGrowsWithItsBars) {
  std::vector<SpeedupBar> bars;
  for (int i = 0; i < 40; ++i) bars.push_back({absl::StrCat("#", i + 1, " mul+add"), 1.5, false});
  const Image tall = SpeedupChart(bars, "t").value();
  const Image short_one = SpeedupChart({bars.front()}, "t").value();
  EXPECT_GE(tall.height() - short_one.height(), 39 * 20);
}

TEST(PlotTest, RooflineKeyListsThePointsItDraws) {
  const std::vector<ComputeCeiling> ceilings = {{"fp32", 51e12}};
  const Image plain = RooflineChart(4.3e12, ceilings, {{"#1", "", 0.25, 0.5e12, false}}, "r").value();
  const Image keyed =
      RooflineChart(4.3e12, ceilings, {{"#1", "#1 softmax", 0.25, 0.5e12, false}}, "r").value();
  EXPECT_GT(keyed.width(), plain.width());
  // The key's column has ink only in the keyed chart.
  int key_ink = 0;
  for (int y = 0; y < keyed.height(); ++y) {
    for (int x = plain.width(); x < keyed.width(); ++x) key_ink += keyed.Get(x, y) != kWhite;
  }
  EXPECT_GT(key_ink, 0);
}

}  // namespace
}  // namespace forge::client
