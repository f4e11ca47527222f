#include "client/forge/png.h"

#include <cairo.h>

#include <cstdint>
#include <fstream>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace forge::client {
namespace {

cairo_status_t AppendToString(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

absl::Status CairoError(absl::string_view what, cairo_status_t status) {
  return absl::InternalError(
      absl::StrCat("writing a PNG: ", what, " failed in cairo: ", cairo_status_to_string(status)));
}

}  // namespace

Image::Image(int width, int height, Rgb background)
    : width_(width), height_(height), pixels_(static_cast<size_t>(width) * height * 3) {
  for (size_t i = 0; i < pixels_.size(); i += 3) {
    pixels_[i] = background.r;
    pixels_[i + 1] = background.g;
    pixels_[i + 2] = background.b;
  }
}

void Image::Set(int x, int y, Rgb color) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  const size_t at = (static_cast<size_t>(y) * width_ + x) * 3;
  pixels_[at] = color.r;
  pixels_[at + 1] = color.g;
  pixels_[at + 2] = color.b;
}

Rgb Image::Get(int x, int y) const {
  const size_t at = (static_cast<size_t>(y) * width_ + x) * 3;
  return Rgb{pixels_[at], pixels_[at + 1], pixels_[at + 2]};
}

absl::StatusOr<std::string> EncodePng(const Image& image) {
  const std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_RGB24, image.width(), image.height()),
      &cairo_surface_destroy);
  if (cairo_surface_status(surface.get()) != CAIRO_STATUS_SUCCESS) {
    return CairoError("creating the image", cairo_surface_status(surface.get()));
  }
  cairo_surface_flush(surface.get());
  unsigned char* data = cairo_image_surface_get_data(surface.get());
  const int stride = cairo_image_surface_get_stride(surface.get());
  for (int y = 0; y < image.height(); ++y) {
    auto* row = reinterpret_cast<uint32_t*>(data + static_cast<size_t>(y) * stride);
    for (int x = 0; x < image.width(); ++x) {
      // RGB24: one native-endian 32-bit word per pixel, 0x00RRGGBB.
      const Rgb pixel = image.Get(x, y);
      row[x] = (uint32_t{pixel.r} << 16) | (uint32_t{pixel.g} << 8) | uint32_t{pixel.b};
    }
  }
  cairo_surface_mark_dirty(surface.get());
  std::string png;
  const cairo_status_t status =
      cairo_surface_write_to_png_stream(surface.get(), AppendToString, &png);
  if (status != CAIRO_STATUS_SUCCESS) return CairoError("encoding", status);
  return png;
}

absl::Status WritePng(const Image& image, absl::string_view path) {
  absl::StatusOr<std::string> png = EncodePng(image);
  if (!png.ok()) return png.status();
  std::ofstream file{std::string(path), std::ios::binary};
  file.write(png->data(), static_cast<std::streamsize>(png->size()));
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace forge::client
