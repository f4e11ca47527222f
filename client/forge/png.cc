#include "client/forge/png.h"

#include <zlib.h>

#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace forge::client {
namespace {

constexpr char kSignature[] = "\x89PNG\r\n\x1a\n";

void AppendBigEndian32(std::string& out, uint32_t value) {
  out.push_back(static_cast<char>(value >> 24));
  out.push_back(static_cast<char>(value >> 16));
  out.push_back(static_cast<char>(value >> 8));
  out.push_back(static_cast<char>(value));
}

// Length, type, data, and the CRC-32 of type and data.
void AppendChunk(std::string& out, absl::string_view type, absl::string_view data) {
  AppendBigEndian32(out, static_cast<uint32_t>(data.size()));
  const size_t type_start = out.size();
  out.append(type.data(), type.size());
  out.append(data.data(), data.size());
  const uLong crc =
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(out.data() + type_start),
            static_cast<uInt>(type.size() + data.size()));
  AppendBigEndian32(out, static_cast<uint32_t>(crc));
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
  const size_t row_bytes = static_cast<size_t>(image.width()) * 3;
  std::string filtered;
  filtered.reserve((row_bytes + 1) * image.height());
  for (int y = 0; y < image.height(); ++y) {
    filtered.push_back('\0');  // filter type 0: the row as it is
    filtered.append(reinterpret_cast<const char*>(image.pixels().data()) + y * row_bytes,
                    row_bytes);
  }
  uLongf compressed_size = compressBound(static_cast<uLong>(filtered.size()));
  std::string compressed(compressed_size, '\0');
  const int result = compress2(reinterpret_cast<Bytef*>(compressed.data()), &compressed_size,
                               reinterpret_cast<const Bytef*>(filtered.data()),
                               static_cast<uLong>(filtered.size()), Z_BEST_COMPRESSION);
  if (result != Z_OK) {
    return absl::InternalError(absl::StrCat("zlib compress2 failed with code ", result));
  }
  compressed.resize(compressed_size);

  std::string header;
  AppendBigEndian32(header, static_cast<uint32_t>(image.width()));
  AppendBigEndian32(header, static_cast<uint32_t>(image.height()));
  header += {8, 2, 0, 0, 0};  // bit depth 8, colour type 2 (RGB), deflate, filter 0, no interlace

  std::string png(kSignature, sizeof(kSignature) - 1);
  AppendChunk(png, "IHDR", header);
  AppendChunk(png, "IDAT", compressed);
  AppendChunk(png, "IEND", "");
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
