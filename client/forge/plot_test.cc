#include "client/forge/plot.h"

#include <cairo.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/forge/png.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::client {
namespace {

// The chunk types of a PNG after its signature, in order; fails the test on a truncated file.
std::vector<std::string> ChunkTypes(const std::string& png) {
  std::vector<std::string> types;
  size_t at = 8;
  while (at + 12 <= png.size()) {
    const uint32_t length = (static_cast<uint32_t>(static_cast<uint8_t>(png[at])) << 24) |
                            (static_cast<uint32_t>(static_cast<uint8_t>(png[at + 1])) << 16) |
                            (static_cast<uint32_t>(static_cast<uint8_t>(png[at + 2])) << 8) |
                            static_cast<uint32_t>(static_cast<uint8_t>(png[at + 3]));
    types.push_back(png.substr(at + 4, 4));
    at += 12 + length;
  }
  EXPECT_EQ(at, png.size()) << "truncated or trailing bytes";
  return types;
}

struct PngReader {
  const std::string* png;
  size_t at = 0;
};

cairo_status_t ReadFromString(void* closure, unsigned char* data, unsigned int length) {
  auto* reader = static_cast<PngReader*>(closure);
  if (reader->at + length > reader->png->size()) return CAIRO_STATUS_READ_ERROR;
  std::memcpy(data, reader->png->data() + reader->at, length);
  reader->at += length;
  return CAIRO_STATUS_SUCCESS;
}

TEST(PngTest, EncodesAnRgbPngThatDecodesToTheSamePixels) {
  Image image(7, 3, Rgb{10, 20, 30});
  image.Set(0, 0, Rgb{255, 0, 0});
  image.Set(6, 2, Rgb{0, 255, 0});
  image.Set(3, 1, Rgb{1, 128, 254});
  image.Set(7, 0, Rgb{1, 1, 1});  // outside: dropped

  absl::StatusOr<std::string> png = EncodePng(image);
  ASSERT_TRUE(png.ok()) << png.status();
  ASSERT_GE(png->size(), 8u + 25);
  EXPECT_EQ(png->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const std::vector<std::string> types = ChunkTypes(*png);
  ASSERT_FALSE(types.empty());
  EXPECT_EQ(types.front(), "IHDR");
  EXPECT_EQ(types.back(), "IEND");
  // IHDR: width, height, bit depth 8, colour type 2 (truecolour, no alpha), no interlace.
  const std::string header = png->substr(16, 13);
  EXPECT_EQ(header.substr(0, 8), std::string("\0\0\0\x07\0\0\0\x03", 8));
  EXPECT_EQ(header[8], 8);
  EXPECT_EQ(header[9], 2);
  EXPECT_EQ(header[12], 0);

  // libpng (through cairo) reads it back, checking every chunk's CRC, to the same pixels.
  PngReader reader{&*png};
  cairo_surface_t* decoded = cairo_image_surface_create_from_png_stream(ReadFromString, &reader);
  ASSERT_EQ(cairo_surface_status(decoded), CAIRO_STATUS_SUCCESS);
  ASSERT_EQ(cairo_image_surface_get_width(decoded), 7);
  ASSERT_EQ(cairo_image_surface_get_height(decoded), 3);
  const unsigned char* data = cairo_image_surface_get_data(decoded);
  const int stride = cairo_image_surface_get_stride(decoded);
  for (int y = 0; y < 3; ++y) {
    const auto* row = reinterpret_cast<const uint32_t*>(data + y * stride);
    for (int x = 0; x < 7; ++x) {
      const Rgb pixel{static_cast<uint8_t>(row[x] >> 16), static_cast<uint8_t>(row[x] >> 8),
                      static_cast<uint8_t>(row[x])};
      EXPECT_EQ(pixel, image.Get(x, y)) << x << "," << y;
    }
  }
  cairo_surface_destroy(decoded);
  EXPECT_EQ(image.Get(0, 0), (Rgb{255, 0, 0}));
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
  const Image plain =
      RooflineChart(4.3e12, ceilings, {{"#1", "", 0.25, 0.5e12, false}}, "r").value();
  const Image keyed =
      RooflineChart(4.3e12, ceilings, {{"#1", "#1 softmax", 0.25, 0.5e12, false}}, "r").value();
  EXPECT_GT(keyed.width(), plain.width());
  // The key widens the chart, and its column has ink.
  int key_ink = 0;
  for (int y = 0; y < keyed.height(); ++y) {
    for (int x = plain.width(); x < keyed.width(); ++x) key_ink += keyed.Get(x, y) != kWhite;
  }
  EXPECT_GT(key_ink, 0);
}

}  // namespace
}  // namespace forge::client
