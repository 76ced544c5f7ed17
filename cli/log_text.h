// The server's and workers' log lines (spdlog's default logger, on a
// terminal or in the journal) carry text from targets, peers and stored
// events: their message is written with common/terminal_text.h's
// TerminalLine, so no control character reaches the terminal raw and one
// message stays one line. The rest of the line is spdlog's usual
// "[time] [level] message".
#pragma once

namespace npuprof::cli {

// Sets the default logger's formatter; call once, before anything logs.
void UseTerminalSafeLogLines();

}  // namespace npuprof::cli
