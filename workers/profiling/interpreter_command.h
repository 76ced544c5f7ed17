// Every on-target Python program started with the machine's resolved
// interpreter (issue 38, after issue 37's target_interpreter.h): the
// remote-command layer's part, pure (text in, text out; no I/O).
//
// On many hosts `python3` is a version manager's shim (pyenv, asdf, conda's
// wrappers): 0.35-0.6 s of CPU per start against 0.03 s for the interpreter.
// A command that starts Python is wrapped (InterpreterArgv) so that, after
// the machine's env script was sourced:
//
//   * when the worker knows the machine's interpreter (WorkerInterpreters),
//     NPUPROF_PYTHON is exported as that path if it is still an executable
//     file (`[ -x ]`); if it is not, the wrapper writes the line
//     "npuprof-python-gone" on stderr and resolves again (below);
//   * when it does not, `python3` is asked once, in the same command (no
//     extra round trip), which interpreter it is (sys.executable, printed
//     only when absolute, free of control bytes and executable), and the
//     answer is exported as NPUPROF_PYTHON and written on stderr as the line
//     "npuprof-python-resolved <path>" for the worker to keep. One shim
//     start per machine per worker process; the program itself then starts
//     the interpreter directly. When python3 cannot answer, nothing is
//     exported and the program runs as `python3`, failing as it did before.
//
// Then the command runs: an argv whose argv[0] is "python3" execs
// "${NPUPROF_PYTHON:-python3}" with the same arguments; any other argv (a
// shell script) runs unchanged and starts Python itself as
// "${NPUPROF_PYTHON:-python3}" (the one spelling every script uses;
// detached programs, `nohup sh -c ...`, inherit the exported variable).
//
// The wrapper is `sh -c SCRIPT npuprof-python ARGV...`: argv is passed as
// positional parameters, never re-quoted, so the one quoting routine
// (ssh/shell_quote.h) still builds the whole command.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace npuprof::profiling {

// The spelling scripts use to start the machine's interpreter.
inline constexpr std::string_view kPythonRef = "\"${NPUPROF_PYTHON:-python3}\"";

// Whether argv starts Python: argv[0] is "python3", or an element names
// NPUPROF_PYTHON (a script written with kPythonRef).
bool StartsPython(const std::vector<std::string>& argv);

// argv wrapped as described above; `cached` is the machine's known
// interpreter (already checked by CheckInterpreterPath), if any.
std::vector<std::string> InterpreterArgv(const std::vector<std::string>& argv,
                                         const std::optional<std::string>& cached);

// What the wrapper told on stderr, its lines removed from *stderr_text so
// the command's own stderr reads as before.
struct InterpreterNews {
  std::optional<std::string> resolved;  // a path that passed CheckInterpreterPath
  bool gone = false;                    // the cached path was no longer an executable file
};
InterpreterNews TakeInterpreterNews(std::string* stderr_text);

// Whether a run of a wrapped python3 argv with the cached path never
// started the program: the shell's 126 (not executable) or 127 (not
// found) with nothing on stdout. The caller forgets the path and runs the
// command once more (nothing ran, so that is safe).
bool InterpreterDidNotStart(int exit_status, const std::string& stdout_text);

}  // namespace npuprof::profiling
