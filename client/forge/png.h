// RGB images and their PNG files (8-bit truecolour, no interlace, written by cairo through
// libpng), for the plots of `forge results`.
#ifndef FORGE_CLIENT_FORGE_PNG_H_
#define FORGE_CLIENT_FORGE_PNG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace forge::client {

struct Rgb {
  uint8_t r = 0;
  uint8_t g = 0;
  uint8_t b = 0;
  bool operator==(const Rgb&) const = default;
};

// A width x height raster, row-major from the top-left corner. Writes outside it are dropped, so
// drawing code need not clip.
class Image {
 public:
  Image(int width, int height, Rgb background);

  int width() const { return width_; }
  int height() const { return height_; }
  void Set(int x, int y, Rgb color);
  // The pixel at (x, y), which must be inside the image.
  Rgb Get(int x, int y) const;
  // Three bytes (r, g, b) per pixel, rows top to bottom.
  const std::vector<uint8_t>& pixels() const { return pixels_; }

 private:
  int width_;
  int height_;
  std::vector<uint8_t> pixels_;
};

// The PNG file of `image`: 8-bit RGB, every pixel as it is. Internal error with cairo's reason if
// cairo fails (out of memory, for one).
absl::StatusOr<std::string> EncodePng(const Image& image);

// Encodes `image` and writes it to `path`, naming the path in errors.
absl::Status WritePng(const Image& image, absl::string_view path);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_PNG_H_
