// Text for a terminal: the one place where a string from a target, a stored
// event, a peer or the command line is made safe to print. A terminal obeys
// the control characters it is sent (ESC ] 0 ; TITLE BEL sets its title,
// ESC [ 2 J clears it, a bare CR rewrites the line), so none reach it raw.
//
// Contract: the result is valid UTF-8 (invalid sequences become U+FFFD,
// common/utf8.h) in which every control character is written out visibly:
// C0 characters and DEL as \xHH (\r as \r), the C1 characters U+0080..U+009F
// as \u00HH. TerminalText keeps line breaks and tabs (multi-line messages,
// reports); TerminalLine writes them as \n and \t too (a progress line,
// a table row). TerminalJson leaves JSON text valid and meaning the same:
// nlohmann already writes C0 characters inside strings as \u00XX; DEL and
// C1, which it writes raw, become \u007f and \u0080..\u009f. Pure.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace npuprof {

std::string TerminalText(std::string_view s);
std::string TerminalLine(std::string_view s);
// j as JSON text (indent as nlohmann's dump: -1 = one line), invalid UTF-8
// replaced, DEL and C1 escaped.
std::string TerminalJson(const nlohmann::json& j, int indent = -1);
// JSON text already dumped (valid UTF-8 or not), with DEL and C1 escaped.
std::string TerminalJsonText(std::string_view json_text);

}  // namespace npuprof
