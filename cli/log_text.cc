#include "cli/log_text.h"

#include <memory>
#include <string_view>

#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include "common/terminal_text.h"

namespace npuprof::cli {

namespace {

// %* : the message, control characters escaped.
class SafeMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const std::string shown = TerminalLine(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(shown.data(), shown.data() + shown.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<SafeMessage>(); }
};

}  // namespace

void UseTerminalSafeLogLines() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<SafeMessage>('*').set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %*");
  spdlog::set_formatter(std::move(formatter));
}

}  // namespace npuprof::cli
