// Image preparation for vl workloads: a PNG file resized to a given height
// (aspect ratio kept) and re-encoded as PNG, then as a data: URL. Decoding,
// resizing input and encoding use libpng's simplified API.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::profiling {

struct PreparedImage {
  std::string png;  // encoded PNG (RGBA, 8 bit)
  int width = 0;
  int height = 0;
  int source_width = 0;
  int source_height = 0;
};

// Decodes `png_bytes`, resizes to `height` rows (bilinear; width scaled to keep
// the aspect ratio, at least 1) and encodes again. Errors: not a PNG, corrupt
// data, height < 1.
Result<PreparedImage> ResizePng(std::string_view png_bytes, int height);
// Reads `path` (local file on the worker's machine) and resizes it.
Result<PreparedImage> PrepareImageFile(const std::string& path, int height);

std::string Base64(std::string_view bytes);
// "data:image/png;base64,..."
std::string PngDataUrl(const PreparedImage& img);
// {path, source_width, source_height, width, height, png_bytes, sha256, mime}
nlohmann::json ImageMeta(const std::string& path, const PreparedImage& img);

}  // namespace npuprof::profiling
