#include "client/forge/plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace forge::client {
namespace {

constexpr int kGlyphWidth = 5;
constexpr int kGlyphHeight = 7;
constexpr int kGlyphAdvance = kGlyphWidth + 1;

struct Glyph {
  char character;
  std::array<const char*, kGlyphHeight> rows;  // '#' lit, '.' dark
};

// Drawn for this project: capitals, digits and the punctuation the charts print.
constexpr Glyph kFont[] = {
    {' ', {".....", ".....", ".....", ".....", ".....", ".....", "....."}},
    {'0', {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."}},
    {'1', {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'2', {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"}},
    {'3', {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."}},
    {'4', {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."}},
    {'5', {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."}},
    {'6', {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."}},
    {'7', {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."}},
    {'8', {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."}},
    {'9', {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."}},
    {'A', {".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"}},
    {'B', {"####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."}},
    {'C', {".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."}},
    {'D', {"###..", "#..#.", "#...#", "#...#", "#...#", "#..#.", "###.."}},
    {'E', {"#####", "#....", "#....", "####.", "#....", "#....", "#####"}},
    {'F', {"#####", "#....", "#....", "####.", "#....", "#....", "#...."}},
    {'G', {".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".####"}},
    {'H', {"#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"}},
    {'I', {".###.", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'J', {"..###", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."}},
    {'K', {"#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"}},
    {'L', {"#....", "#....", "#....", "#....", "#....", "#....", "#####"}},
    {'M', {"#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#"}},
    {'N', {"#...#", "#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#"}},
    {'O', {".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."}},
    {'P', {"####.", "#...#", "#...#", "####.", "#....", "#....", "#...."}},
    {'Q', {".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"}},
    {'R', {"####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"}},
    {'S', {".####", "#....", "#....", ".###.", "....#", "....#", "####."}},
    {'T', {"#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."}},
    {'U', {"#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."}},
    {'V', {"#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."}},
    {'W', {"#...#", "#...#", "#...#", "#.#.#", "#.#.#", "#.#.#", ".#.#."}},
    {'X', {"#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#"}},
    {'Y', {"#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."}},
    {'Z', {"#####", "....#", "...#.", "..#..", ".#...", "#....", "#####"}},
    {'.', {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."}},
    {',', {".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."}},
    {':', {".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."}},
    {'-', {".....", ".....", ".....", "#####", ".....", ".....", "....."}},
    {'+', {".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."}},
    {'_', {".....", ".....", ".....", ".....", ".....", ".....", "#####"}},
    {'/', {".....", "....#", "...#.", "..#..", ".#...", "#....", "....."}},
    {'%', {"##...", "##..#", "...#.", "..#..", ".#...", "#..##", "...##"}},
    {'(', {"...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."}},
    {')', {".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."}},
    {'[', {".###.", ".#...", ".#...", ".#...", ".#...", ".#...", ".###."}},
    {']', {".###.", "...#.", "...#.", "...#.", "...#.", "...#.", ".###."}},
    {'=', {".....", ".....", "#####", ".....", "#####", ".....", "....."}},
    {'<', {"...#.", "..#..", ".#...", "#....", ".#...", "..#..", "...#."}},
    {'>', {".#...", "..#..", "...#.", "....#", "...#.", "..#..", ".#..."}},
    {'*', {".....", "..#..", "#.#.#", ".###.", "#.#.#", "..#..", "....."}},
    {'#', {".#.#.", ".#.#.", "#####", ".#.#.", "#####", ".#.#.", ".#.#."}},
    {'\'', {"..#..", "..#..", ".#...", ".....", ".....", ".....", "....."}},
    {'!', {"..#..", "..#..", "..#..", "..#..", "..#..", ".....", "..#.."}},
    {'?', {".###.", "#...#", "....#", "...#.", "..#..", ".....", "..#.."}},
    {'|', {"..#..", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."}},
};

const Glyph* FindGlyph(char c) {
  const char upper = absl::ascii_toupper(static_cast<unsigned char>(c));
  for (const Glyph& glyph : kFont) {
    if (glyph.character == upper) return &glyph;
  }
  return nullptr;
}

constexpr Rgb kWhite{255, 255, 255};
constexpr Rgb kInk{30, 30, 30};
constexpr Rgb kGrid{225, 225, 225};
constexpr Rgb kMeasuredColor{46, 110, 180};
constexpr Rgb kPredictedColor{230, 140, 40};
constexpr Rgb kRoofColor{200, 40, 40};

void FillCircle(Image& image, int cx, int cy, int radius, Rgb color, bool hollow) {
  for (int dy = -radius; dy <= radius; ++dy) {
    for (int dx = -radius; dx <= radius; ++dx) {
      const int d2 = dx * dx + dy * dy;
      if (d2 > radius * radius) continue;
      if (hollow && d2 <= (radius - 2) * (radius - 2)) continue;
      image.Set(cx + dx, cy + dy, color);
    }
  }
}

// A tick step of 1, 2 or 5 times a power of ten that gives about `ticks` ticks up to `top`.
double NiceStep(double top, int ticks) {
  const double raw = top / ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0}) {
    if (factor * magnitude >= raw) return factor * magnitude;
  }
  return 10 * magnitude;
}

// "0.01", "1", "100", "1K", "10M", "100T": the label of 10^exponent.
std::string DecadeLabel(int exponent) {
  if (exponent < 0) return absl::StrCat("0.", std::string(-exponent - 1, '0'), "1");
  static constexpr const char* kPrefixes[] = {"", "K", "M", "G", "T", "P", "E"};
  const int group = std::min(exponent / 3, 6);
  return absl::StrCat("1", std::string(exponent - 3 * group, '0'), kPrefixes[group]);
}

// One entry of a legend: a swatch and its name; returns the x after it.
int DrawLegendEntry(Image& image, int x, int y, Rgb color, absl::string_view name) {
  FillRect(image, x, y, x + 10, y + 6, color);
  DrawText(image, x + 14, y, name, kInk);
  return x + 14 + TextWidth(name) + 16;
}

// Both charts end alike: the axes of the plot area left..right x top..bottom, then a legend of
// measured and (when there are any) predicted points on the row at `legend_y`.
void DrawAxesAndLegend(Image& image, int left, int top, int right, int bottom, bool any_predicted,
                       int legend_y, absl::string_view predicted_name) {
  DrawLine(image, left, top, left, bottom, kInk);
  DrawLine(image, left, bottom, right, bottom, kInk);
  const int legend_x = DrawLegendEntry(image, left, legend_y, kMeasuredColor, "measured");
  if (any_predicted) DrawLegendEntry(image, legend_x, legend_y, kPredictedColor, predicted_name);
}

}  // namespace

void FillRect(Image& image, int x0, int y0, int x1, int y1, Rgb color) {
  for (int y = std::min(y0, y1); y <= std::max(y0, y1); ++y) {
    for (int x = std::min(x0, x1); x <= std::max(x0, x1); ++x) image.Set(x, y, color);
  }
}

void DrawLine(Image& image, int x0, int y0, int x1, int y1, Rgb color, int dash) {
  // Bresenham, counting steps for the dash pattern.
  const int dx = std::abs(x1 - x0);
  const int dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1;
  const int sy = y0 < y1 ? 1 : -1;
  int error = dx + dy;
  for (int step = 0;; ++step) {
    if (dash <= 0 || (step / dash) % 2 == 0) image.Set(x0, y0, color);
    if (x0 == x1 && y0 == y1) break;
    const int twice = 2 * error;
    if (twice >= dy) {
      error += dy;
      x0 += sx;
    }
    if (twice <= dx) {
      error += dx;
      y0 += sy;
    }
  }
}

bool GlyphPixel(char c, int column, int row) {
  const Glyph* glyph = FindGlyph(c);
  return glyph != nullptr && glyph->rows[row][column] == '#';
}

void DrawText(Image& image, int x, int y, absl::string_view text, Rgb color, int scale) {
  for (char c : text) {
    const Glyph* glyph = FindGlyph(c);
    for (int row = 0; row < kGlyphHeight; ++row) {
      for (int column = 0; column < kGlyphWidth; ++column) {
        const bool lit = glyph != nullptr ? glyph->rows[row][column] == '#'
                                          : (row == 0 || row == kGlyphHeight - 1 || column == 0 ||
                                             column == kGlyphWidth - 1);
        if (!lit) continue;
        FillRect(image, x + column * scale, y + row * scale, x + (column + 1) * scale - 1,
                 y + (row + 1) * scale - 1, color);
      }
    }
    x += kGlyphAdvance * scale;
  }
}

int TextWidth(absl::string_view text, int scale) {
  return text.empty() ? 0 : static_cast<int>(text.size()) * kGlyphAdvance * scale - scale;
}

Image SpeedupChart(const std::vector<SpeedupBar>& bars, absl::string_view title) {
  constexpr int kWidth = 960, kHeight = 540;
  constexpr int kLeft = 70, kRight = kWidth - 20, kTop = 60, kBottom = kHeight - 60;
  Image image(kWidth, kHeight, kWhite);
  DrawText(image, kLeft, 16, title, kInk, 2);

  double largest = 1.0;
  bool any_predicted = false;
  for (const SpeedupBar& bar : bars) {
    largest = std::max(largest, bar.speedup);
    any_predicted = any_predicted || bar.predicted;
  }
  const double step = NiceStep(largest * 1.1, 6);
  const double top = std::ceil(largest * 1.1 / step) * step;
  auto y_of = [&](double value) {
    return kBottom - static_cast<int>(std::lround((kBottom - kTop) * value / top));
  };

  for (double tick = 0; tick <= top + step / 2; tick += step) {
    const int y = y_of(tick);
    DrawLine(image, kLeft, y, kRight, y, kGrid);
    const std::string label = absl::StrFormat("%gx", tick);
    DrawText(image, kLeft - 8 - TextWidth(label), y - 3, label, kInk);
  }
  DrawText(image, kLeft, kTop - 14, "speedup over eager", kInk);

  const int slot = bars.empty() ? 0 : (kRight - kLeft) / static_cast<int>(bars.size());
  const int max_label_chars = std::max(1, (slot - 2) / kGlyphAdvance);
  for (size_t i = 0; i < bars.size(); ++i) {
    const int x0 = kLeft + static_cast<int>(i) * slot + slot / 6;
    const int x1 = kLeft + static_cast<int>(i + 1) * slot - slot / 6;
    const int y = y_of(std::max(bars[i].speedup, 0.0));
    FillRect(image, x0, y, x1, kBottom, bars[i].predicted ? kPredictedColor : kMeasuredColor);
    const std::string value = absl::StrFormat("%.2fx", bars[i].speedup);
    if (TextWidth(value) <= slot) {
      DrawText(image, (x0 + x1 - TextWidth(value)) / 2, y - 10, value, kInk);
    }
    const std::string label = bars[i].label.substr(0, max_label_chars);
    DrawText(image, (x0 + x1 - TextWidth(label)) / 2, kBottom + 8, label, kInk);
  }
  // Eager's time, for reference.
  DrawLine(image, kLeft, y_of(1.0), kRight, y_of(1.0), kRoofColor, 6);
  DrawText(image, kRight - TextWidth("eager"), y_of(1.0) - 10, "eager", kRoofColor);
  DrawAxesAndLegend(image, kLeft, kTop, kRight, kBottom, any_predicted, kHeight - 24,
                    "PREDICTED (no GPU)");
  return image;
}

Image RooflineChart(double bytes_per_second, const std::vector<ComputeCeiling>& ceilings,
                    const std::vector<RooflinePoint>& points, absl::string_view title) {
  constexpr int kWidth = 960, kHeight = 640;
  constexpr int kLeft = 70, kRight = kWidth - 30, kTop = 60, kBottom = kHeight - 70;
  Image image(kWidth, kHeight, kWhite);
  DrawText(image, kLeft, 16, title, kInk, 2);

  // Decades spanning every point, every ridge and the roofs over them.
  double peak = 0;
  for (const ComputeCeiling& ceiling : ceilings) peak = std::max(peak, ceiling.flops_per_second);
  const double ridge = peak > 0 && bytes_per_second > 0 ? peak / bytes_per_second : 1.0;
  double x_low = ridge / 100, x_high = ridge * 10;
  double y_high = std::max(peak, 1.0);
  double y_low = bytes_per_second > 0 ? bytes_per_second * x_low : 1.0;
  bool any_predicted = false;
  for (const RooflinePoint& point : points) {
    if (point.intensity <= 0 || point.flops_per_second <= 0) continue;
    x_low = std::min(x_low, point.intensity);
    x_high = std::max(x_high, point.intensity);
    y_low = std::min(y_low, point.flops_per_second);
    y_high = std::max(y_high, point.flops_per_second);
    any_predicted = any_predicted || point.predicted;
  }
  const int x_first = static_cast<int>(std::floor(std::log10(x_low)));
  const int x_last = static_cast<int>(std::ceil(std::log10(x_high)));
  const int y_first = static_cast<int>(std::floor(std::log10(y_low)));
  const int y_last = static_cast<int>(std::ceil(std::log10(y_high * 1.5)));
  auto x_of = [&](double intensity) {
    return kLeft +
           static_cast<int>(std::lround((kRight - kLeft) * (std::log10(intensity) - x_first) /
                                        std::max(1, x_last - x_first)));
  };
  auto y_of = [&](double flops) {
    return kBottom - static_cast<int>(std::lround((kBottom - kTop) * (std::log10(flops) - y_first) /
                                                  std::max(1, y_last - y_first)));
  };

  for (int decade = x_first; decade <= x_last; ++decade) {
    const int x = x_of(std::pow(10.0, decade));
    DrawLine(image, x, kTop, x, kBottom, kGrid);
    const std::string label = DecadeLabel(decade);
    DrawText(image, x - TextWidth(label) / 2, kBottom + 8, label, kInk);
  }
  for (int decade = y_first; decade <= y_last; ++decade) {
    const int y = y_of(std::pow(10.0, decade));
    DrawLine(image, kLeft, y, kRight, y, kGrid);
    const std::string label = DecadeLabel(decade);
    DrawText(image, kLeft - 8 - TextWidth(label), y - 3, label, kInk);
  }
  DrawText(image, kLeft, kTop - 14, "FLOP/s achieved", kInk);
  const std::string x_title = "arithmetic intensity (FLOP per byte of DRAM traffic)";
  DrawText(image, (kLeft + kRight - TextWidth(x_title)) / 2, kBottom + 24, x_title, kInk);

  // The bandwidth slope up to the highest ridge, then each compute roof from its own ridge.
  if (bytes_per_second > 0) {
    const double x_start = std::pow(10.0, x_first);
    DrawLine(image, x_of(x_start), y_of(bytes_per_second * x_start), x_of(ridge),
             y_of(peak > 0 ? peak : bytes_per_second * ridge), kRoofColor);
    const std::string label = absl::StrFormat("DRAM %.2g TB/s", bytes_per_second / 1e12);
    DrawText(image, x_of(x_start) + 6, y_of(bytes_per_second * x_start) + 8, label, kRoofColor);
  }
  for (const ComputeCeiling& ceiling : ceilings) {
    if (ceiling.flops_per_second <= 0 || bytes_per_second <= 0) continue;
    const int y = y_of(ceiling.flops_per_second);
    DrawLine(image, x_of(ceiling.flops_per_second / bytes_per_second), y, kRight, y, kRoofColor);
    DrawText(image, kRight - TextWidth(ceiling.label), y - 10, ceiling.label, kRoofColor);
  }

  for (const RooflinePoint& point : points) {
    if (point.intensity <= 0 || point.flops_per_second <= 0) continue;
    const int x = x_of(point.intensity);
    const int y = y_of(point.flops_per_second);
    FillCircle(image, x, y, 4, point.predicted ? kPredictedColor : kMeasuredColor, point.predicted);
    DrawText(image, x + 7, y - 3, point.label, kInk);
  }
  DrawAxesAndLegend(image, kLeft, kTop, kRight, kBottom, any_predicted, kHeight - 20,
                    "PREDICTED (hollow, no GPU)");
  return image;
}

}  // namespace forge::client
