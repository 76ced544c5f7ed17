#include "workers/ssh/shell_quote.h"

#include <fmt/format.h>

#include "workers/ssh/env_script_protocol.h"

namespace npuprof::ssh {
namespace {

bool IsPlainShellChar(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '_': case '@': case '%': case '+': case '=': case ':': case ',':
    case '.': case '/': case '-':
      return true;
    default:
      return false;
  }
}

bool IsSafeNameChar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-';
}

// Printable rendering of a user value for error messages (no raw control bytes).
std::string Printable(std::string_view v) {
  std::string out;
  for (unsigned char c : v.substr(0, 80)) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (v.size() > 80) out += "...";
  return out;
}

}  // namespace

std::string ShellQuote(std::string_view word) {
  bool plain = !word.empty();
  for (unsigned char c : word) {
    if (!IsPlainShellChar(c)) {
      plain = false;
      break;
    }
  }
  if (plain) return std::string(word);
  std::string out;
  out.reserve(word.size() + 2);
  out.push_back('\'');
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}

std::string BuildCommand(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out.push_back(' ');
    out += ShellQuote(a);
  }
  return out;
}

Status ValidateEnvName(std::string_view name) {
  if (name.empty()) return Status::Invalid("environment variable name is empty");
  for (size_t i = 0; i < name.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) {
      return Status::Invalid(fmt::format(
          "invalid environment variable name '{}': use letters, digits and '_' and do not "
          "start with a digit (e.g. ASCEND_RT_VISIBLE_DEVICES)",
          Printable(name)));
    }
  }
  return Status::Ok();
}

Status ValidateSafeName(std::string_view field, std::string_view value) {
  if (value.empty()) {
    return Status::Invalid(fmt::format("{} is empty; give a name made of letters, digits, "
                                       "'.', '_' or '-'", field));
  }
  if (value.size() > 128) {
    return Status::Invalid(fmt::format("{} is {} characters long; use at most 128", field,
                                       value.size()));
  }
  if (value == "." || value == "..") {
    return Status::Invalid(fmt::format("{} '{}' is not allowed; pick a real name", field, value));
  }
  if (value.front() == '-') {
    return Status::Invalid(fmt::format(
        "{} '{}' starts with '-', which looks like a command-line option; start it with a "
        "letter or digit", field, Printable(value)));
  }
  for (size_t i = 0; i < value.size(); ++i) {
    if (!IsSafeNameChar(static_cast<unsigned char>(value[i]))) {
      return Status::Invalid(fmt::format(
          "{} '{}' contains '{}' at position {}; only letters, digits, '.', '_' and '-' are "
          "allowed (e.g. 'qwen-7b_run.1')",
          field, Printable(value), Printable(value.substr(i, 1)), i));
    }
  }
  return Status::Ok();
}

Result<std::string> BuildRemoteScriptChecked(
    const std::string& env_script,
    const std::vector<std::pair<std::string, std::string>>& env,
    const std::vector<std::string>& argv) {
  if (argv.empty()) return Status::Invalid("remote command is empty (argv has no elements)");
  for (const auto& [k, v] : env) {
    Status s = ValidateEnvName(k);
    if (!s.ok()) return s;
  }
  std::string out;
  // Sourced unless the command shell running this already sourced this
  // very file (command_shell_protocol.h: __np_env); a failure is named
  // (env_script_protocol.h).
  if (!env_script.empty()) out += EnvScriptPrefix(env_script);
  for (const auto& [k, v] : env) {
    out += fmt::format("export {}={}; ", k, ShellQuote(v));
  }
  out += "exec ";
  out += BuildCommand(argv);
  return out;
}

std::string BuildRemoteScript(const std::string& env_script,
                              const std::vector<std::pair<std::string, std::string>>& env,
                              const std::vector<std::string>& argv) {
  Result<std::string> r = BuildRemoteScriptChecked(env_script, env, argv);
  if (r.ok()) return std::move(r).value();
  // Fail closed: the script reports the problem and runs nothing.
  return "echo " + ShellQuote("npuprof: " + r.status().message()) + " >&2; exit 2";
}

}  // namespace npuprof::ssh
