#include "statemachine/operator_memory_text.h"

#include <fmt/format.h>

namespace npuprof::sm {

namespace {

std::string Str(const json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string Mb(const json& o, const char* key, bool zh) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return zh ? "无数据" : "unavailable";
  return fmt::format("{:.3f} MB", it->get<double>());
}

std::string Us(const json& o, const char* key, bool zh) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return zh ? "窗口内未释放" : "not released in the window";
  return fmt::format("{:.3f}", it->get<double>());
}

}  // namespace

std::string RenderOperatorMemoryText(const json& e, bool zh) {
  if (!e.is_object()) return "";
  std::string out = zh ? "  [算子内存 @ 激活峰值]\n" : "  [Operator memory at the activation peak]\n";
  out += fmt::format("  {:<22} {}\n", zh ? "状态:" : "status:", Str(e, "status"));
  if (const auto p = e.find("problems"); p != e.end() && p->is_array())
    for (const auto& t : *p)
      if (t.is_string()) out += fmt::format("  {:<22} {}\n", zh ? "问题:" : "problem:", t.get<std::string>());
  out += fmt::format("  {:<22} {}\n", zh ? "峰值 PTA 已分配:" : "PTA allocated at peak:", Mb(e, "peak_allocated_mb", zh));
  out += fmt::format("  {:<22} {}\n", zh ? "峰值 PTA 预留:" : "PTA reserved at peak:", Mb(e, "peak_reserved_mb", zh));
  out += fmt::format("  {:<22} {}\n", zh ? "碎片 (预留-已分配):" : "fragmentation:", Mb(e, "fragmentation_mb", zh));
  if (const auto w = e.find("window"); w != e.end() && w->is_object())
    out += fmt::format("  {:<22} {}\n", zh ? "窗口内最大预留:" : "max reserved (window):", Mb(*w, "max_reserved_mb", zh));
  if (const auto ops = e.find("peak_operators"); ops != e.end() && ops->is_array() && !ops->empty()) {
    out += fmt::format("  {:<44} | {:>12} | {:>22} | {:>22} | {}\n", zh ? "算子" : "operator", "MB",
                       zh ? "分配 (us)" : "allocated (us)", zh ? "释放 (us)" : "released (us)", zh ? "行" : "row");
    for (const auto& op : *ops) {
      if (!op.is_object()) continue;
      const auto ev = op.find("evidence");
      const auto row = ev != op.end() && ev->is_object() && ev->contains("row") ? (*ev)["row"].dump() : "?";
      const auto size = op.find("size_mb");
      out += fmt::format("  {:<44} | {:>12.3f} | {:>22} | {:>22} | operator_memory.csv:{}\n", Str(op, "name"),
                         size != op.end() && size->is_number() ? size->get<double>() : 0.0,
                         Us(op, "allocated_at_us", zh), Us(op, "released_at_us", zh), row);
    }
  }
  return out + "\n";
}

}  // namespace npuprof::sm
