#include "client/forge/plot.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace forge::client {
namespace {

constexpr char kFontFamily[] = "DejaVu Sans";
constexpr double kTextSize = 12;
constexpr double kTitleSize = 17;
constexpr char kEllipsis[] = "\xe2\x80\xa6";  // U+2026

constexpr Rgb kWhite{255, 255, 255};
constexpr Rgb kInk{30, 30, 30};
constexpr Rgb kGrid{225, 225, 225};
constexpr Rgb kMeasuredColor{46, 110, 180};
constexpr Rgb kPredictedColor{230, 140, 40};
constexpr Rgb kRoofColor{200, 40, 40};

enum class Align { kLeft, kCenter, kRight };
enum class Weight { kNormal, kBold };

// A white cairo image surface and its drawing context: the charts' primitives, in pixels from
// the top-left corner. cairo errors are sticky; Finish() reports the first.
class Canvas {
 public:
  Canvas(int width, int height)
      : surface_(cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height),
                 &cairo_surface_destroy),
        context_(cairo_create(surface_.get()), &cairo_destroy) {
    SetColor(kWhite);
    cairo_paint(context_.get());
  }

  // The rectangle between two corners, snapped to whole pixels: a bar is exactly its colour.
  void Rect(double x0, double y0, double x1, double y1, Rgb color) {
    const double left = std::round(std::min(x0, x1));
    const double right = std::round(std::max(x0, x1));
    const double top = std::round(std::min(y0, y1));
    const double bottom = std::round(std::max(y0, y1));
    cairo_rectangle(context_.get(), left, top, right - left, bottom - top);
    SetColor(color);
    cairo_fill(context_.get());
  }

  // A line `width` pixels wide; with dash > 0, `dash` pixels drawn then `dash` skipped.
  // Horizontal and vertical lines lie on pixel centres, so one-pixel ones stay sharp.
  void Line(double x0, double y0, double x1, double y1, Rgb color, double width = 1,
            double dash = 0) {
    if (x0 == x1) x0 = x1 = std::floor(x0) + 0.5;
    if (y0 == y1) y0 = y1 = std::floor(y0) + 0.5;
    cairo_t* cr = context_.get();
    cairo_move_to(cr, x0, y0);
    cairo_line_to(cr, x1, y1);
    cairo_set_line_width(cr, width);
    cairo_set_dash(cr, &dash, dash > 0 ? 1 : 0, 0);
    SetColor(color);
    cairo_stroke(cr);
  }

  // A round marker: filled, or a two-pixel ring.
  void Marker(double x, double y, double radius, Rgb color, bool hollow) {
    cairo_t* cr = context_.get();
    cairo_new_sub_path(cr);
    cairo_arc(cr, x, y, hollow ? radius - 1 : radius, 0, 2 * M_PI);
    SetColor(color);
    if (hollow) {
      cairo_set_line_width(cr, 2);
      cairo_set_dash(cr, nullptr, 0, 0);
      cairo_stroke(cr);
    } else {
      cairo_fill(cr);
    }
  }

  double TextWidth(absl::string_view text, double size = kTextSize,
                   Weight weight = Weight::kNormal) {
    SetFont(size, weight);
    const std::string terminated(text);
    cairo_text_extents_t extents;
    cairo_text_extents(context_.get(), terminated.c_str(), &extents);
    return extents.x_advance;
  }

  // `text` (UTF-8) cut to at most `max_width` pixels, an ellipsis marking the cut.
  std::string Fit(absl::string_view text, double max_width, double size = kTextSize,
                  Weight weight = Weight::kNormal) {
    if (TextWidth(text, size, weight) <= max_width) return std::string(text);
    while (!text.empty()) {
      // Drop the last character whole: its UTF-8 continuation bytes, then its first byte.
      while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) {
        text.remove_suffix(1);
      }
      if (!text.empty()) text.remove_suffix(1);
      const std::string cut = absl::StrCat(text, kEllipsis);
      if (TextWidth(cut, size, weight) <= max_width) return cut;
    }
    return kEllipsis;
  }

  // `text` with its baseline at y, starting at, centred on or ending at x.
  void Text(double x, double y, absl::string_view text, Rgb color, Align align = Align::kLeft,
            double size = kTextSize, Weight weight = Weight::kNormal) {
    const double width = TextWidth(text, size, weight);
    if (align == Align::kCenter) x -= width / 2;
    if (align == Align::kRight) x -= width;
    const std::string terminated(text);
    cairo_move_to(context_.get(), x, y);
    SetColor(color);
    cairo_show_text(context_.get(), terminated.c_str());
  }

  // The pixels drawn, or cairo's first error.
  absl::StatusOr<Image> Finish() {
    const cairo_status_t status = cairo_status(context_.get());
    if (status != CAIRO_STATUS_SUCCESS) {
      return absl::InternalError(
          absl::StrCat("drawing a chart with cairo failed: ", cairo_status_to_string(status)));
    }
    cairo_surface_flush(surface_.get());
    const int width = cairo_image_surface_get_width(surface_.get());
    const int height = cairo_image_surface_get_height(surface_.get());
    const int stride = cairo_image_surface_get_stride(surface_.get());
    const unsigned char* data = cairo_image_surface_get_data(surface_.get());
    Image image(width, height, kWhite);
    for (int y = 0; y < height; ++y) {
      const auto* row = reinterpret_cast<const uint32_t*>(data + static_cast<size_t>(y) * stride);
      for (int x = 0; x < width; ++x) {
        // RGB24: one native-endian 32-bit word per pixel, 0x00RRGGBB.
        image.Set(x, y,
                  Rgb{static_cast<uint8_t>(row[x] >> 16), static_cast<uint8_t>(row[x] >> 8),
                      static_cast<uint8_t>(row[x])});
      }
    }
    return image;
  }

 private:
  void SetColor(Rgb color) {
    cairo_set_source_rgb(context_.get(), color.r / 255.0, color.g / 255.0, color.b / 255.0);
  }

  void SetFont(double size, Weight weight) {
    cairo_select_font_face(
        context_.get(), kFontFamily, CAIRO_FONT_SLANT_NORMAL,
        weight == Weight::kBold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(context_.get(), size);
  }

  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface_;
  std::unique_ptr<cairo_t, decltype(&cairo_destroy)> context_;
};

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

// One entry of a legend with its baseline at y: a swatch and its name; returns the x after it.
double DrawLegendEntry(Canvas& canvas, double x, double y, Rgb color, absl::string_view name) {
  canvas.Rect(x, y - 9, x + 12, y + 1, color);
  canvas.Text(x + 17, y, name, kInk);
  return x + 17 + canvas.TextWidth(name) + 20;
}

// Both charts end alike: the axes of the plot area left..right x top..bottom, then a legend of
// measured and (when there are any) predicted results on the baseline `legend_y`.
void DrawAxesAndLegend(Canvas& canvas, double left, double top, double right, double bottom,
                       bool any_predicted, double legend_y, absl::string_view predicted_name) {
  canvas.Line(left, top, left, bottom, kInk);
  canvas.Line(left, bottom, right, bottom, kInk);
  const double legend_x = DrawLegendEntry(canvas, left, legend_y, kMeasuredColor, "measured");
  if (any_predicted) {
    DrawLegendEntry(canvas, legend_x, legend_y, kPredictedColor, predicted_name);
  }
}

}  // namespace

absl::StatusOr<Image> SpeedupChart(const std::vector<SpeedupBar>& bars, absl::string_view title) {
  constexpr int kWidth = 960;
  constexpr int kRowHeight = 26, kBarHeight = 16;
  constexpr int kTop = 70, kRight = kWidth - 70;  // room for a value beside the longest bar
  constexpr double kMaxLabelWidth = 360;
  const int rows = std::max<int>(1, static_cast<int>(bars.size()));
  const int bottom = kTop + rows * kRowHeight;
  const int height = bottom + 78;
  Canvas canvas(kWidth, height);
  canvas.Text(20, 32, canvas.Fit(title, kWidth - 40, kTitleSize, Weight::kBold), kInk, Align::kLeft,
              kTitleSize, Weight::kBold);

  double label_width = 0;
  double largest = 1.0;
  bool any_predicted = false;
  for (const SpeedupBar& bar : bars) {
    label_width = std::max(label_width, canvas.TextWidth(bar.label));
    largest = std::max(largest, bar.speedup);
    any_predicted = any_predicted || bar.predicted;
  }
  const double left = 20 + std::min(label_width, kMaxLabelWidth) + 10;
  const double step = NiceStep(largest * 1.1, 6);
  const double top = std::ceil(largest * 1.1 / step) * step;
  auto x_of = [&](double value) { return std::round(left + (kRight - left) * value / top); };

  for (double tick = 0; tick <= top + step / 2; tick += step) {
    const double x = x_of(tick);
    canvas.Line(x, kTop, x, bottom, kGrid);
    canvas.Text(x, bottom + 16, absl::StrFormat("%gx", tick), kInk, Align::kCenter);
  }
  canvas.Text((left + kRight) / 2, bottom + 36, "speedup over eager (longer is faster)", kInk,
              Align::kCenter);

  for (size_t i = 0; i < bars.size(); ++i) {
    const double y = kTop + static_cast<double>(i) * kRowHeight + (kRowHeight - kBarHeight) / 2;
    const double end = x_of(std::max(bars[i].speedup, 0.0));
    canvas.Rect(x_of(0), y, end, y + kBarHeight,
                bars[i].predicted ? kPredictedColor : kMeasuredColor);
    const double baseline = y + kBarHeight / 2 + 4;
    canvas.Text(left - 8, baseline, canvas.Fit(bars[i].label, kMaxLabelWidth), kInk, Align::kRight);
    canvas.Text(end + 5, baseline, absl::StrFormat("%.2fx", bars[i].speedup), kInk);
  }
  // Eager's time, for reference.
  canvas.Line(x_of(1.0), kTop - 4, x_of(1.0), bottom, kRoofColor, 1, 6);
  canvas.Text(x_of(1.0), kTop - 8, "eager", kRoofColor, Align::kCenter);
  DrawAxesAndLegend(canvas, left, kTop, kRight, bottom, any_predicted, height - 14,
                    "PREDICTED (no GPU)");
  return canvas.Finish();
}

absl::StatusOr<Image> RooflineChart(double bytes_per_second,
                                    const std::vector<ComputeCeiling>& ceilings,
                                    const std::vector<RooflinePoint>& points,
                                    absl::string_view title) {
  constexpr int kHeight = 640;
  constexpr int kLeft = 70, kTop = 60, kBottom = kHeight - 76;
  constexpr double kKeyWidth = 280, kKeyLine = 17;
  // Decades spanning every point, every ridge and the roofs over them.
  double peak = 0;
  for (const ComputeCeiling& ceiling : ceilings) peak = std::max(peak, ceiling.flops_per_second);
  const double ridge = peak > 0 && bytes_per_second > 0 ? peak / bytes_per_second : 1.0;
  double x_low = ridge / 100, x_high = ridge * 10;
  double y_high = std::max(peak, 1.0);
  double y_low = bytes_per_second > 0 ? bytes_per_second * x_low : 1.0;
  bool any_predicted = false;
  std::vector<const RooflinePoint*> keyed;
  for (const RooflinePoint& point : points) {
    if (point.intensity <= 0 || point.flops_per_second <= 0) continue;
    x_low = std::min(x_low, point.intensity);
    x_high = std::max(x_high, point.intensity);
    y_low = std::min(y_low, point.flops_per_second);
    y_high = std::max(y_high, point.flops_per_second);
    any_predicted = any_predicted || point.predicted;
    if (!point.key.empty()) keyed.push_back(&point);
  }
  const int width = keyed.empty() ? 960 : 960 + static_cast<int>(kKeyWidth);
  const int right = width - 30 - (keyed.empty() ? 0 : static_cast<int>(kKeyWidth));
  Canvas canvas(width, kHeight);
  canvas.Text(20, 32, canvas.Fit(title, width - 40, kTitleSize, Weight::kBold), kInk, Align::kLeft,
              kTitleSize, Weight::kBold);

  const int x_first = static_cast<int>(std::floor(std::log10(x_low)));
  const int x_last = static_cast<int>(std::ceil(std::log10(x_high)));
  const int y_first = static_cast<int>(std::floor(std::log10(y_low)));
  const int y_last = static_cast<int>(std::ceil(std::log10(y_high * 1.5)));
  auto x_of = [&](double intensity) {
    return std::round(kLeft + (right - kLeft) * (std::log10(intensity) - x_first) /
                                  std::max(1, x_last - x_first));
  };
  auto y_of = [&](double flops) {
    return std::round(kBottom - (kBottom - kTop) * (std::log10(flops) - y_first) /
                                    std::max(1, y_last - y_first));
  };

  for (int decade = x_first; decade <= x_last; ++decade) {
    const double x = x_of(std::pow(10.0, decade));
    canvas.Line(x, kTop, x, kBottom, kGrid);
    canvas.Text(x, kBottom + 18, DecadeLabel(decade), kInk, Align::kCenter);
  }
  for (int decade = y_first; decade <= y_last; ++decade) {
    const double y = y_of(std::pow(10.0, decade));
    canvas.Line(kLeft, y, right, y, kGrid);
    canvas.Text(kLeft - 8, y + 4, DecadeLabel(decade), kInk, Align::kRight);
  }
  canvas.Text(kLeft, kTop - 10, "FLOP/s achieved", kInk);
  canvas.Text((kLeft + right) / 2.0, kBottom + 40,
              "arithmetic intensity (FLOP per byte of DRAM traffic)", kInk, Align::kCenter);

  // The bandwidth slope up to the highest ridge, then each compute roof from its own ridge.
  if (bytes_per_second > 0) {
    const double x_start = std::pow(10.0, x_first);
    canvas.Line(x_of(x_start), y_of(bytes_per_second * x_start), x_of(ridge),
                y_of(peak > 0 ? peak : bytes_per_second * ridge), kRoofColor, 1.5);
    canvas.Text(x_of(x_start) + 6, y_of(bytes_per_second * x_start) + 18,
                absl::StrFormat("DRAM %.2g TB/s", bytes_per_second / 1e12), kRoofColor);
  }
  for (const ComputeCeiling& ceiling : ceilings) {
    if (ceiling.flops_per_second <= 0 || bytes_per_second <= 0) continue;
    const double y = y_of(ceiling.flops_per_second);
    canvas.Line(x_of(ceiling.flops_per_second / bytes_per_second), y, right, y, kRoofColor, 1.5);
    canvas.Text(right, y - 6, ceiling.label, kRoofColor, Align::kRight);
  }

  // Each point's label beside it, moved down a line at a time (a few at most) while it would
  // cover a label already drawn: tasks of equal intensity and speed share a place.
  struct Box {
    double left, top, right, bottom;
  };
  std::vector<Box> labels;
  for (const RooflinePoint& point : points) {
    if (point.intensity <= 0 || point.flops_per_second <= 0) continue;
    const double x = x_of(point.intensity);
    const double y = y_of(point.flops_per_second);
    canvas.Marker(x, y, 4.5, point.predicted ? kPredictedColor : kMeasuredColor, point.predicted);
    Box box{x + 8, y - 6, x + 8 + canvas.TextWidth(point.label), y + 6};
    for (int moves = 0; moves < 4; ++moves) {
      const bool covers = std::any_of(labels.begin(), labels.end(), [&](const Box& other) {
        return box.left < other.right && other.left < box.right && box.top < other.bottom &&
               other.top < box.bottom;
      });
      if (!covers) break;
      box.top += 12;
      box.bottom += 12;
    }
    labels.push_back(box);
    canvas.Text(box.left, box.bottom - 2, point.label, kInk);
  }

  // The key: one line per drawn point, as many as fit, then how many did not.
  if (!keyed.empty()) {
    const double key_x = right + 30;
    canvas.Text(key_x, kTop - 10, "Tasks", kInk, Align::kLeft, kTextSize, Weight::kBold);
    const int fit = static_cast<int>((kBottom - kTop) / kKeyLine);
    const int shown =
        static_cast<int>(keyed.size()) <= fit ? static_cast<int>(keyed.size()) : fit - 1;
    for (int i = 0; i < shown; ++i) {
      canvas.Text(key_x, kTop + 12 + i * kKeyLine, canvas.Fit(keyed[i]->key, kKeyWidth - 20), kInk);
    }
    if (shown < static_cast<int>(keyed.size())) {
      canvas.Text(key_x, kTop + 12 + shown * kKeyLine,
                  absl::StrCat("and ", keyed.size() - shown, " more (report.md)"), kInk);
    }
  }
  DrawAxesAndLegend(canvas, kLeft, kTop, right, kBottom, any_predicted, kHeight - 14,
                    "PREDICTED (hollow, no GPU)");
  return canvas.Finish();
}

}  // namespace forge::client
