// The two charts of a results bundle, drawn with cairo: per-task speedup bars and a log-log
// roofline. Text is set in DejaVu Sans through fontconfig (another sans-serif where that font is
// missing), so labels keep their case; lines, markers and text are anti-aliased, and bars are
// whole pixels in their colour. A chart comes back as an Image (png.h) for WritePng.
//
// Labels are drawn as given, a label too long for its place cut with an ellipsis. The charts
// fail (Internal, with cairo's reason) only when cairo does: out of memory, a font it cannot load.
#ifndef FORGE_CLIENT_FORGE_PLOT_H_
#define FORGE_CLIENT_FORGE_PLOT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/forge/png.h"

namespace forge::client {

struct SpeedupBar {
  std::string label;     // e.g. "#2 linear+add (69be35)"
  double speedup = 1.0;  // over eager
  bool predicted = false;
};

// One horizontal bar of speedup over eager per entry, top to bottom in order, its label on the
// left and its value at its end, on an axis from 0 to a little above the largest, with a dashed
// line at 1x (eager). Predicted bars have their own colour and the legend says PREDICTED. The
// image is as tall as its bars need.
absl::StatusOr<Image> SpeedupChart(const std::vector<SpeedupBar>& bars, absl::string_view title);

struct ComputeCeiling {
  std::string label;  // e.g. "bf16 790 TFLOP/s"
  double flops_per_second = 0;
};

struct RooflinePoint {
  std::string label;            // short, beside the point, e.g. "#2"
  std::string key;              // the key's line for it, e.g. "#2 linear+add"; none when empty
  double intensity = 0;         // FLOP per byte of DRAM traffic; > 0 to be drawn
  double flops_per_second = 0;  // achieved; > 0 to be drawn
  bool predicted = false;
};

// Log-log roofline: the bandwidth slope, one horizontal line per compute ceiling, and the points
// (predicted ones hollow, and the legend says PREDICTED), with a key to the right listing the
// drawn points' `key` lines. Axes span every point and ceiling.
absl::StatusOr<Image> RooflineChart(double bytes_per_second,
                                    const std::vector<ComputeCeiling>& ceilings,
                                    const std::vector<RooflinePoint>& points,
                                    absl::string_view title);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_PLOT_H_
