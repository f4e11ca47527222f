// A small rasterizer (rectangles, lines, markers, text in a 5x7 bitmap font) and the two charts of
// a results bundle: per-task speedup bars and a log-log roofline.
#ifndef FORGE_CLIENT_FORGE_PLOT_H_
#define FORGE_CLIENT_FORGE_PLOT_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/forge/png.h"

namespace forge::client {

// Drawing on an Image; coordinates in pixels from the top-left corner, anything outside dropped.
void FillRect(Image& image, int x0, int y0, int x1, int y1, Rgb color);  // inclusive corners
// A one-pixel line; with dash > 0, `dash` pixels drawn then `dash` skipped.
void DrawLine(Image& image, int x0, int y0, int x1, int y1, Rgb color, int dash = 0);
// Text in the 5x7 font, each glyph 6 * scale pixels wide (a column of spacing) and 7 * scale
// high, (x, y) its top-left corner. Lower-case letters are drawn as capitals; characters outside
// the font as a hollow box.
void DrawText(Image& image, int x, int y, absl::string_view text, Rgb color, int scale = 1);
// Width in pixels of `text` drawn at `scale`.
int TextWidth(absl::string_view text, int scale = 1);

// Whether the glyph of `c` (after upper-casing) lights pixel (column, row), column 0..4, row 0..6.
// False for characters outside the font.
bool GlyphPixel(char c, int column, int row);

struct SpeedupBar {
  std::string label;     // e.g. the task's short digest
  double speedup = 1.0;  // over eager
  bool predicted = false;
};

// Bars of speedup over eager, one per entry in order, on an axis from 0 to a little above the
// largest, with a dashed line at 1x (eager). Predicted bars have their own colour and the legend
// says PREDICTED.
Image SpeedupChart(const std::vector<SpeedupBar>& bars, absl::string_view title);

struct ComputeCeiling {
  std::string label;  // e.g. "bf16 790 TFLOP/s"
  double flops_per_second = 0;
};

struct RooflinePoint {
  std::string label;
  double intensity = 0;         // FLOP per byte of DRAM traffic; > 0 to be drawn
  double flops_per_second = 0;  // achieved; > 0 to be drawn
  bool predicted = false;
};

// Log-log roofline: the bandwidth slope, one horizontal line per compute ceiling, and the points
// (predicted ones hollow, and the legend says PREDICTED). Axes span every point and ceiling.
Image RooflineChart(double bytes_per_second, const std::vector<ComputeCeiling>& ceilings,
                    const std::vector<RooflinePoint>& points, absl::string_view title);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_PLOT_H_
