#include "workers/profiling/image_prep.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

namespace npuprof::profiling {

namespace {

// Bilinear resample of an RGBA8 image.
std::vector<unsigned char> Resize(const std::vector<unsigned char>& src, int sw, int sh, int dw, int dh) {
  std::vector<unsigned char> dst(static_cast<size_t>(dw) * dh * 4);
  const double sx = static_cast<double>(sw) / dw, sy = static_cast<double>(sh) / dh;
  for (int y = 0; y < dh; ++y) {
    const double fy = std::max(0.0, (y + 0.5) * sy - 0.5);
    const int y0 = std::min(static_cast<int>(fy), sh - 1), y1 = std::min(y0 + 1, sh - 1);
    const double wy = fy - y0;
    for (int x = 0; x < dw; ++x) {
      const double fx = std::max(0.0, (x + 0.5) * sx - 0.5);
      const int x0 = std::min(static_cast<int>(fx), sw - 1), x1 = std::min(x0 + 1, sw - 1);
      const double wx = fx - x0;
      for (int c = 0; c < 4; ++c) {
        auto at = [&](int xx, int yy) { return static_cast<double>(src[(static_cast<size_t>(yy) * sw + xx) * 4 + c]); };
        const double v = (at(x0, y0) * (1 - wx) + at(x1, y0) * wx) * (1 - wy) +
                         (at(x0, y1) * (1 - wx) + at(x1, y1) * wx) * wy;
        dst[(static_cast<size_t>(y) * dw + x) * 4 + c] = static_cast<unsigned char>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
  return dst;
}

}  // namespace

Result<PreparedImage> ResizePng(std::string_view png_bytes, int height) {
  if (height < 1) return Status::Invalid("image height must be at least 1");
  png_image in;
  std::memset(&in, 0, sizeof(in));
  in.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&in, png_bytes.data(), png_bytes.size()))
    return Status::Invalid(fmt::format("not a readable PNG: {}", in.message));
  in.format = PNG_FORMAT_RGBA;
  if (in.width == 0 || in.height == 0 || in.width > 20000 || in.height > 20000) {
    png_image_free(&in);
    return Status::Invalid(fmt::format("PNG size {}x{} is not supported (max 20000x20000)", in.width, in.height));
  }
  std::vector<unsigned char> pixels(PNG_IMAGE_SIZE(in));
  if (!png_image_finish_read(&in, nullptr, pixels.data(), 0, nullptr))
    return Status::Invalid(fmt::format("corrupt PNG: {}", in.message));
  PreparedImage out;
  out.source_width = static_cast<int>(in.width);
  out.source_height = static_cast<int>(in.height);
  out.height = height;
  out.width = std::max(1, static_cast<int>(std::lround(static_cast<double>(in.width) * height / in.height)));
  std::vector<unsigned char> resized = Resize(pixels, out.source_width, out.source_height, out.width, out.height);

  png_image o;
  std::memset(&o, 0, sizeof(o));
  o.version = PNG_IMAGE_VERSION;
  o.width = static_cast<png_uint_32>(out.width);
  o.height = static_cast<png_uint_32>(out.height);
  o.format = PNG_FORMAT_RGBA;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&o, nullptr, &size, 0, resized.data(), 0, nullptr))
    return Status::Internal(fmt::format("PNG encode failed: {}", o.message));
  out.png.resize(size);
  if (!png_image_write_to_memory(&o, out.png.data(), &size, 0, resized.data(), 0, nullptr))
    return Status::Internal(fmt::format("PNG encode failed: {}", o.message));
  out.png.resize(size);
  return out;
}

Result<PreparedImage> PrepareImageFile(const std::string& path, int height) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound(fmt::format("image_path '{}' cannot be read on the worker's machine", path));
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  if (bytes.size() > (256u << 20)) return Status::Invalid("image larger than 256 MB");
  auto r = ResizePng(bytes, height);
  if (!r.ok()) return Status::Invalid(fmt::format("image_path '{}': {} (only PNG images are supported)", path, r.status().message()));
  return r;
}

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string PngDataUrl(const PreparedImage& img) { return "data:image/png;base64," + Base64(img.png); }

nlohmann::json ImageMeta(const std::string& path, const PreparedImage& img) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(img.png.data()), img.png.size(), digest);
  std::string hex;
  for (unsigned char c : digest) hex += fmt::format("{:02x}", c);
  return {{"path", path},
          {"mime", "image/png"},
          {"source_width", img.source_width},
          {"source_height", img.source_height},
          {"width", img.width},
          {"height", img.height},
          {"png_bytes", img.png.size()},
          {"sha256", hex}};
}

}  // namespace npuprof::profiling
