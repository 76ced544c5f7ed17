// The kernel summary has one definition, the rank digest program
// (workers/profiling/remote/rank_digest.py), run on the target; the C++
// builder (parsers/kernel_summary.h) stays as its reference. This test runs
// the same .py file with the local python3 and holds its summaries equal to
// the builder's, number for number after the same rounding and error text
// for error text: on every kernel_details CSV under tests/, every seed of the
// kernel_summary fuzz corpus, a CSV the simulator's analyse() code writes,
// hand-made hostile cases and a few hundred generated ones. The
// trace_view.json check is held to CheckTraceViewJson's verdict and count
// the same way. Every summary the program gives also passes the worker's
// decoder (CheckKernelSummaryJson) unchanged.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <fstream>
#include <random>
#include <sstream>

#include "common/json_depth.h"
#include "parsers/kernel_summary.h"
#include "parsers/msprof_csv_parser.h"
#include "tests/support/build_paths.h"
#include "tests/support/temp_dir.h"
#include "workers/profiling/rank_digest.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Program() { return std::string(build_paths::SourceDir()) + "/workers/profiling/remote/rank_digest.py"; }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The program's output lines for argv (run by /bin/sh, words quoted).
std::vector<std::string> RunProgram(const std::vector<std::string>& argv) {
  const std::string cmd = ssh::BuildCommand(argv) + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  std::vector<std::string> lines;
  if (!f) return lines;
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The C++ reference, fed in pieces of `chunk` bytes.
json Reference(const std::string& text, size_t max_distinct, size_t chunk) {
  KernelSummaryBuilder b(max_distinct);
  for (size_t i = 0; i < text.size(); i += chunk) {
    if (Status st = b.Feed(std::string_view(text).substr(i, chunk)); !st.ok()) return json{{"error", st.message()}};
  }
  auto s = b.Finish();
  if (!s.ok()) return json{{"error", s.status().message()}};
  return KernelSummaryJson(*s);
}

// Compares the program's summary of every file with the reference's.
void ExpectSameSummaries(const std::vector<std::string>& files, size_t max_distinct) {
  std::vector<std::string> argv = {"python3", Program(), "summary", std::to_string(max_distinct)};
  argv.insert(argv.end(), files.begin(), files.end());
  const std::vector<std::string> lines = RunProgram(argv);
  ASSERT_EQ(lines.size(), files.size()) << (lines.empty() ? "" : lines.back());
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string text = ReadAll(files[i]);
    auto got = ParseJson(lines[i]);
    ASSERT_TRUE(got.ok()) << files[i] << ": " << lines[i];
    for (size_t chunk : {text.size() + 1, size_t{7}}) {
      const json want = Reference(text, max_distinct, std::max<size_t>(chunk, 1));
      EXPECT_EQ(*got, want) << files[i] << " (chunk " << chunk << ")\n program:   " << got->dump()
                            << "\n reference: " << want.dump();
    }
    if (!got->contains("error")) {
      auto checked = profiling::CheckKernelSummaryJson(*got, "summary");
      ASSERT_TRUE(checked.ok()) << files[i] << ": " << checked.status().message();
      EXPECT_EQ(*checked, *got) << files[i];
    }
  }
}

std::vector<std::string> FilesUnder(const std::string& dir, const std::string& name_part) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename().string().find(name_part) != std::string::npos)
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(KernelSummaryDifferential, EveryKernelDetailsCsvUnderTests) {
  const std::string tests = std::string(build_paths::SourceDir()) + "/tests";
  std::vector<std::string> files;
  for (const auto& f : FilesUnder(tests, "kernel_details"))
    if (f.ends_with(".csv")) files.push_back(f);
  ASSERT_GE(files.size(), 4u);
  ExpectSameSummaries(files, 20000);
}

TEST(KernelSummaryDifferential, EveryFuzzSeed) {
  const auto files = FilesUnder(std::string(build_paths::SourceDir()) + "/tests/fuzz/seeds/kernel_summary", "");
  ASSERT_GE(files.size(), 5u);
  ExpectSameSummaries(files, 20000);
  ExpectSameSummaries(files, 2);
}

// kernel_details.csv as the simulator's analyse() writes it (both headers),
// from its own row code.
TEST(KernelSummaryDifferential, TheSimulatorsOutput) {
  TempDir tmp;
  const std::string gen = tmp.path + "/gen.py";
  WriteTree(gen, R"PY(import sys
sys.path.insert(0, sys.argv[1])
from npusim import analyse_impl as a
tasks = [dict(step=1 + i // 500, device=3, task_id=i, stream=2,
              name=("hcom_allReduce__%d_0" % (i % 9)) if i % 4 == 0 else "aclnnKernel%d" % (i % 37),
              type="T%d" % (i % 5), core="HCCL" if i % 4 == 0 else ("AI_CORE" if i % 3 else "AI_VECTOR_CORE"),
              start_us=1736413971558972.0 + i * 10.125, dur_us=1.25 + (i % 97) * 0.333, wait_us=0, block=8)
         for i in range(3000)]
for path, header in ((sys.argv[2], a.HEADER_BLOCKDIM), (sys.argv[3], a.HEADER_BLOCKNUM)):
    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        f.writelines(a._kernel_lines(tasks, header))
)PY");
  const std::string sim = std::string(build_paths::SourceDir()) + "/tests/sim/python";
  const std::string a = tmp.path + "/blockdim.csv", b = tmp.path + "/blocknum.csv";
  RunProgram({"python3", gen, sim, a, b});
  ASSERT_TRUE(fs::exists(a) && fs::exists(b));
  ExpectSameSummaries({a, b}, 20000);
  ExpectSameSummaries({a}, 10);
}

TEST(KernelSummaryDifferential, HostileCases) {
  TempDir tmp;
  const std::string h = "Name,Type,Accelerator Core,Start Time(us),Duration(us)\n";
  const std::vector<std::string> cases = {
      "",
      "\n\n",
      "\xEF\xBB\xBF" + h + "a,T,AI_CORE,1,2\n",
      "\xEF\xBB" + h,
      "\xEF\xBB\xBF",
      h + "a,T,AI_CORE,1,2\r\nb,T,AI_CORE,2,3\r\n",
      h + "\"a,\"\"x\"\"\",T,AI_CORE,1,2\n\"multi\nline\",T,C,\"5\t\",\"7\"\n",
      h + "\"unclosed,T,C,1,2\nb,T,C,1,2\n",
      h + "a,T,C,1,\"2\"",
      h + "ab\"c,d\"e,T,C,1,2\n\"x\"y,T,C,1,3\n",
      h + "a,T,C,1,\"2\"\"\n",
      h + "a,T,C,1,N/A\nb,T,C,1,\nc,T,C,1,-5\nd,T,C,1,-0\ne,T,C,1,+3\nf,T,C,1,.5\ng,T,C,1,5.\n",
      h + "a,T,C,1,2\nb,T,C,1,1e999\nc,T,C,1,3\n",
      h + "a,T,C,1,inf\n",
      h + "a,T,C,1,-Infinity\n",
      h + "a,T,C,1,nan(abc)\n",
      h + "a,T,C,1,nan(\n",
      h + "a,T,C,1,1e-400\n",
      h + "a,T,C,1,1e-310\n",
      h + "a,T,C,1,0x10\nb,T,C,1,1e\nc,T,C,1,++1\nd,T,C,1,1_0\ne,T,C,1, 4 \n",
      h + "a,T,C,1,9223372036854775808\nb,T,C,1,9223372036854775809\n",
      h + "a,T,C,1,9300000000000000000\n",
      h + "a,T\nshort\n,,,,\n   \n\t\r\n\f\n",
      h + "\xFF\xFEname,T\xC3,C\xE2\x82,1,2\n\xED\xA0\x80,T,C,1,3\n\xF0\x80\x80\x80,T,C,1,4\n",
      h + std::string(300, 'n') + "\xC3\xA9,T,C,1,2\n" + std::string(255, 'n') + "\xC3\xA9,T,C,1,2\n",
      h + std::string(70000, 'x') + ",T,C,1,2\n\"" + std::string(70000, 'q') + "\",T,C,1,2\n",
      h + "a,T,C,1,2" + std::string(5000, ',') + "\n",
      "Name,Type,Duration(us)\na,T,1\n",
      "name,TYPE,duration(US),accelerator core,START TIME(us)\na,T,1,C,3\n",
      "Name,Start Time(us)\nx,1\n",
      "Foo\n",
      "Type,Duration(us),Name,Name\n T , 4 , a , b \n",
      h + "a,T,AI_CORE,10,2\na,T,AI_VECTOR_CORE,5,3\na,T,AI_CORE,N/A,4\nb,U,,-1,1\n",
      h + "a,T,C,1,1.0005\nb,T,C,1,1.0015\nc,T,C,1,0.0005\nd,T,C,1,2.5e-4\n",
      h + "b,T,C,1,3\na,T,C,1,3\na,S,C,1,3\n(other kernels),,C,1,1\n",
      h + "a,T,C,1,0.1\na,T,C,1,0.2\na,T,C,1,0.3\n",
      // Quotes among the columns read, as the program's whole-line fast path meets them.
      h + "\"a\"\"b\",T,C,\"1\t\",2\n\"a,b\",T,C,\"3\",4\na,\"T\",\" C \",\"5\",\"6\"\n\"\",,,\"\",\"\"\n",
      h + "a,T,C,99999999999999999999,2\nb,T,C,\"1e999\",3\nc,T,C,\"-1\",4\nd,T,C,\"00.000\",5\ne,T,C,\"\",6\n",
      h + "a,T,C,1,2,\"x,y\",\"\"\"z\"\"\"\nb,T,C,\"2\",3,\"p\nq\",r\nc,T,C,3,4\n",
      h + "a,T,C,\"1\"\"\",2\nb,T,\"C\"x,\"2\",3\nc\"\",T,C,4,5\"\"\n\"d\",\"T\",\"C\",\"6\",\"7\"",
      h + "a,T,C,1,\"0.\"\nb,T,C,1,\".\"\nc,T,C,\"1.5.\",\"2..\"\nd,T,C,1,00012.50\n",
  };
  std::vector<std::string> files;
  for (size_t i = 0; i < cases.size(); ++i) {
    files.push_back(tmp.path + "/case" + std::to_string(i) + ".csv");
    WriteTree(files.back(), cases[i]);
  }
  ExpectSameSummaries(files, 20000);
  ExpectSameSummaries(files, 1);
  // More kernels than max_distinct: folded into "(other kernels)", totals exact.
  std::string many = h;
  for (int i = 0; i < 300; ++i) many += "k" + std::to_string(i % 120) + ",T" + std::to_string(i % 70) + ",C,1," + std::to_string(i * 0.37) + "\n";
  WriteTree(tmp.path + "/many.csv", many);
  ExpectSameSummaries({tmp.path + "/many.csv"}, 50);
  ExpectSameSummaries({tmp.path + "/many.csv"}, 20000);
}

// Generated CSVs from an alphabet of the tokens that matter (quotes, commas,
// line ends, numbers at their edges, invalid UTF-8), fixed seed.
TEST(KernelSummaryDifferential, GeneratedCases) {
  TempDir tmp;
  const std::vector<std::string> tokens = {
      ",", ",", ",", "\n", "\n", "\r\n", "\"", "\"\"", " ", "\t", "a", "b", "T", "AI_CORE", "1", "2.5", "-3",
      "1e999", "N/A", "0.0005", "1e-400", "inf", "\xFF", "\xC3\xA9", "\xEF\xBB\xBF", "\f", "17.125", "+4", ".5"};
  const std::vector<std::string> headers = {"Name,Type,Accelerator Core,Start Time(us),Duration(us)\n",
                                            "Duration(us),Name,Type\n", "\xEF\xBB\xBFName,Type,Duration(us),Start Time(us)\n",
                                            "\"Name\",Type,\"Duration(us)\"\r\n"};
  std::mt19937 rng(20261206);
  std::vector<std::string> files;
  for (int i = 0; i < 300; ++i) {
    std::string text = headers[rng() % headers.size()];
    const int n = 5 + static_cast<int>(rng() % 200);
    for (int k = 0; k < n; ++k) text += tokens[rng() % tokens.size()];
    files.push_back(tmp.path + "/gen" + std::to_string(i) + ".csv");
    WriteTree(files.back(), text);
  }
  ExpectSameSummaries(files, 20000);
  ExpectSameSummaries(files, 3);
}

// Files of several MiB, so that the program reads them in several pieces:
// rows of the real kernel_details.csv format (a quoted start time, quoted
// shapes holding commas after the columns read) mixed with records that
// span lines, quotes inside the columns read, blank lines and refused
// numbers, at random places relative to the pieces' edges. Fixed seed.
TEST(KernelSummaryDifferential, LargeFilesInPieces) {
  TempDir tmp;
  const std::string h =
      "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
      "Wait Time(us),Block Dim,Input Shapes,Input Data Types,Output Shapes\n";
  const std::vector<std::string> names = {"aclnnMatmul_MatMulCommon_MatMulV2", "aclnnRmsNorm_RmsNormAiCore_RmsNorm",
                                          "hcom_allReduce__123_0_1", "\"q,uoted\"", "\"multi\nline\"",
                                          "\"esc\"\"aped\"", " spaced ", "\"\""};
  const std::vector<std::string> cores = {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "HCCL", "\"AI_CORE\""};
  const std::vector<std::string> odd = {"\n", "\r\n", "\n\t\n", "x,y\n", "1,2,3,4,\"open\n,still\",T,C,1,2\n",
                                        "1,2,3,4,n,T,S,C,1,-2\n",
                                        "1,2,3,4,n,T,S,C,1e999,2\n"};
  std::mt19937 rng(38);
  std::vector<std::string> files;
  for (int f = 0; f < 3; ++f) {
    std::string text = h;
    const size_t target = (f + 2) * (1u << 20) + rng() % 4096;
    while (text.size() < target) {
      if (rng() % 997 == 0 && f > 0) {
        text += odd[rng() % odd.size()];
        continue;
      }
      const bool rare = rng() % 50 == 0;
      const std::string name = rare ? names[rng() % names.size()] : names[rng() % 3];
      text += "1,4294967295," + std::to_string(rng() % 100000) + ",2," + name + ",T" + std::to_string(rng() % 7) +
              ",dynamic," + (rare ? cores[rng() % cores.size()] : cores[rng() % 4]) + ",\"" +
              std::to_string(rng() % 100000000) + "." + std::to_string(rng() % 1000) + "\t\"," +
              std::to_string(rng() % 5000) + "." + std::to_string(rng() % 1000) + ",1.2,40,\"\"\"" +
              std::to_string(rng() % 9) + ",4096\"\"\",DT_BF16,\"\"\"1\"\"\"\n";
    }
    if (f == 2) text += "1,2,3,4,n,T,S,C,\"1\",\"1e999\"\nlast,T,C,1,2\n";  // refused in the last piece
    files.push_back(tmp.path + "/large" + std::to_string(f) + ".csv");
    WriteTree(files.back(), text);
  }
  ExpectSameSummaries(files, 20000);
  ExpectSameSummaries(files, 5);
}

// The quoting of the start times and durations changes between stretches of
// a file and inside them, and a few names are quoted: the program first tries
// the pattern of the quoting the last piece had (no quote groups, the cells'
// columns anything but a comma), the general one when a line differs or a
// quote is among the cells.
TEST(KernelSummaryDifferential, QuotingThatChangesBetweenAndInsidePieces) {
  TempDir tmp;
  const std::string h = "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),"
                        "Duration(us),Wait Time(us),Input Shapes\n";
  const std::vector<std::string> names = {"aclnnMatmul_MatMulCommon_MatMulV2", "aclnnAdd_AddAiCore_Add",
                                          "hcom_allGather__1_0_1"};
  // Rarely, a quoted name holding commas (columns that the fixed pattern's
  // "anything but a comma" would cut elsewhere) or an escaped quote.
  const std::vector<std::string> quoted = {"\"q,uo,ted\"", "\"esc\"\"aped\"", "\"a,b\""};
  std::mt19937 rng(58);
  auto num = [&](bool quoted, bool spaced) {
    std::string v = std::to_string(rng() % 100000000) + "." + std::to_string(rng() % 1000);
    if (spaced) v = " " + v + "\t";
    return quoted ? "\"" + v + "\"" : v;
  };
  std::vector<std::string> files;
  for (int f = 0; f < 2; ++f) {
    std::string text = h;
    int mode = 0;
    while (text.size() < (f + 2) * (1u << 20)) {
      if (rng() % 3000 == 0) mode = static_cast<int>(rng() % 5);  // a stretch of another quoting
      const int m = mode == 4 ? static_cast<int>(rng() % 4) : mode;  // 4: every line its own
      const bool spaced = f == 1 && rng() % 200 == 0;
      text += "1,4294967295," + std::to_string(rng() % 100000) + ",2," + (rng() % 400 == 0 ? quoted[rng() % quoted.size()] : names[rng() % names.size()]) + ",T" +
              std::to_string(rng() % 3) + ",dynamic,AI_CORE," + num(m & 1, spaced) + "," + num(m & 2, spaced) +
              ",0,\"\"\"4096,512\"\"\"\n";
    }
    files.push_back(tmp.path + "/quoting" + std::to_string(f) + ".csv");
    WriteTree(files.back(), text);
  }
  ExpectSameSummaries(files, 20000);
  ExpectSameSummaries(files, 2);
}

// Files of one regular shape of line but for a few, so that the program takes
// their pieces with the loose pattern (its rows checked in bulk, then most
// start times compared as bytes): each file holds one kind of line that one of
// those checks must send to the general pattern, first in a piece and in the
// middle of pieces, so that removing that check changes that file's summary.
// Also the start times' other forms: lengths that change, no digit before the
// point, spaces, durations longer than the starts' spread.
TEST(KernelSummaryDifferential, LoosePatternChecks) {
  TempDir tmp;
  using Line = std::function<std::string(const std::string& start, const std::string& dur)>;
  const std::string cols = "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,";
  const std::string rest = ",0.0,\"\"\"32,4096\"\"\"\n";
  const std::string pre = "1,4294967295,7,2,";
  const std::string cells = "aclnnAdd_AddAiCore_Add,Add,dynamic,AI_VECTOR_CORE";
  struct Layout {
    std::string header;
    std::function<std::string(const std::string&, const std::string&, const std::string&, const std::string&)> line;
  };
  // (unread columns, name to core, start, duration) -> a line
  const std::map<std::string, Layout> layouts = {
      {"quoted start", {cols + "Start Time(us),Duration(us),Wait Time(us),Input Shapes\n",
                        [&](auto& u, auto& c, auto& s, auto& d) { return u + "," + c + ",\"" + s + "\t\"," + d + rest; }}},
      {"bare", {cols + "Start Time(us),Duration(us),Wait Time(us),Input Shapes\n",
                [&](auto& u, auto& c, auto& s, auto& d) { return u + "," + c + "," + s + "," + d + rest; }}},
      {"quoted both", {cols + "Start Time(us),Duration(us),Wait Time(us),Input Shapes\n",
                       [&](auto& u, auto& c, auto& s, auto& d) { return u + "," + c + ",\"" + s + "\",\"" + d + "\"" + rest; }}},
      {"duration first", {cols + "Duration(us),Start Time(us),Wait Time(us),Input Shapes\n",
                          [&](auto& u, auto& c, auto& s, auto& d) { return u + "," + c + "," + d + ",\"" + s + "\t\"" + rest; }}},
  };
  struct Case {
    std::string name, layout;
    Line odd;                                    // the odd line(s) for a start and a duration
    std::function<std::string(int)> start = {};  // the regular lines' start times, when not the default
    std::function<std::string(int)> dur = {};
  };
  const std::string zeros400 = "0." + std::string(400, '0') + "1";
  const std::vector<Case> cases = {
      // a comma inside quotes among the unread columns: the columns shift by one
      {"unread quote", "quoted start", [&](auto& s, auto& d) { return "1,\"4294967295,x\",7,aclnnMul_Mul,Mul,dynamic,AI_CORE,\"" + s + "\t\"," + d + rest; }},
      // a short line whose '\n' the unread columns would take
      {"unread newline", "quoted start", [&](auto& s, auto& d) { return "1,4294967295\n7,2,3,aclnnMul_Mul,Mul,dynamic,AI_CORE,\"" + s + "\t\"," + d + rest; }},
      {"cells newline", "quoted start", [&](auto& s, auto& d) { return pre + "aclnnMul\n_Mul,Mul,dynamic,AI_CORE,\"" + s + "\t\"," + d + rest; }},
      {"cells quoted comma", "quoted start", [&](auto& s, auto& d) { return pre + "\"aclnnMul,x\",Mul,AI_CORE,\"" + s + "\t\"," + d + rest; }},
      {"cells quoted", "quoted start", [&](auto& s, auto& d) { return pre + "\"aclnnMul\",Mul,dynamic,AI_CORE,\"" + s + "\t\"," + d + rest; }},
      // an odd quote in the rest of a line: the record goes on to the next line's end
      {"odd quotes", "quoted start", [&](auto& s, auto& d) {
         return pre + cells + ",\"" + s + "\t\"," + d + ",0.0,\"x\n" + pre + cells + ",\"" + s + "\t\"," + d + ",0.0,y\"\n"; }},
      {"duration underscore", "quoted start", [&](auto& s, auto&) { return pre + cells + ",\"" + s + "\t\",1_5" + rest; }},
      {"duration nan", "quoted start", [&](auto& s, auto&) { return pre + cells + ",\"" + s + "\t\",nan" + rest; }},
      {"duration NAN", "bare", [&](auto& s, auto&) { return pre + cells + "," + s + ",NAN" + rest; }},
      {"duration exponent", "quoted start", [&](auto& s, auto&) { return pre + cells + ",\"" + s + "\t\",1e-400" + rest; }},
      {"duration EXPONENT", "quoted both", [&](auto& s, auto&) { return pre + cells + ",\"" + s + "\",\"1E-400\"" + rest; }},
      {"duration negative", "quoted start", [&](auto& s, auto&) { return pre + cells + ",\"" + s + "\t\",-1.5" + rest; }},
      {"duration newline", "duration first", [&](auto& s, auto&) { return pre + cells + ",2.5\n,\"" + s + "\t\"" + rest; }},
      {"duration beyond 2^63", "quoted start", [&](auto& s, auto&) { return pre + cells + ",\"" + s + "\t\",9300000000000000000" + rest; }},
      {"duration 400 digits", "quoted start", [&](auto& s, auto&) { return pre + cells + ",\"" + s + "\t\"," + zeros400 + rest; }},
      {"start underscore", "quoted start", [&](auto&, auto& d) { return pre + cells + ",\"1_5.000\t\"," + d + rest; }},
      {"start nan", "quoted start", [&](auto&, auto& d) { return pre + cells + ",\"nan\t\"," + d + rest; }},
      {"start NAN", "bare", [&](auto&, auto& d) { return pre + cells + ",NAN," + d + rest; }},
      {"start exponent", "quoted start", [&](auto&, auto& d) { return pre + cells + ",\"1e-400\t\"," + d + rest; }},
      {"start EXPONENT", "bare", [&](auto&, auto& d) { return pre + cells + ",1E-400," + d + rest; }},
      {"start negative", "quoted start", [&](auto&, auto& d) { return pre + cells + ",\"-1.500\t\"," + d + rest; }},
      {"start beyond 2^63", "quoted start", [&](auto&, auto& d) { return pre + cells + ",\"9300000000000000000.000\t\"," + d + rest; }},
      {"start 400 digits", "quoted start", [&](auto&, auto& d) { return pre + cells + ",\"" + zeros400 + "\t\"," + d + rest; }},
      // every start of a stretch beyond 2^63, all written alike
      {"starts beyond 2^63", "quoted start", nullptr,
       [](int i) { return i / 3000 == 1 ? "93000000000000" + std::to_string(10000 + i % 9000) + ".000" : "1796691595897140.500"; }},
      // lengths that change inside pieces: bytes order is not the values' order
      // (the least start only after the first pieces)
      {"starts of two lengths", "quoted start", nullptr,
       [](int i) { return i > 2000 && i % 7 == 3 ? std::to_string(90 + i % 10) + ".5" : std::to_string(100 + i % 50) + ".000"; }},
      // two cells of other lengths whose bytes, joined, look like two of the
      // others' (each cell's shape must be compared, not the column's)
      {"starts joined alike", "bare", nullptr,
       [](int i) {
         if (i < 1500) return "6" + std::to_string(i % 10) + "." + std::to_string(10 + i % 90);
         return i % 50 == 10 ? std::string("12.345") : i % 50 == 11 ? std::string("9.99")
                             : "5" + std::to_string(i % 10) + "." + std::to_string(10 + i % 90);
       }},
      // written alike but with an exponent: bytes order is not the values' order
      {"starts with exponents", "bare", nullptr,
       [](int i) {
         if (i < 1500) return "7" + std::to_string(i % 10) + "." + std::to_string(i % 10);
         return i >= 2500 && i % 50 == 10 ? std::string("2e0") : i % 3 ? std::string("1e1") : std::string("5e0");
       }},
      // a start just below the bound whose end ties halfway above the greatest
      // start (2^54 + 84, an odd mantissa): it rounds up past that start's end,
      // so the bound must leave room for the conversions' rounding
      {"rounding margin", "bare", nullptr,
       [](int i) {
         if (i >= 1500 && i % 600 == 300) return std::string("18014398509482063");
         if (i >= 1500 && i % 600 == 301) return std::string("18014398509482068");
         return std::to_string(18014398509480000LL + i % 1000);
       },
       [](int i) { return i >= 1500 && i % 600 == 300 ? std::string("6") : i >= 1500 && i % 600 == 301 ? std::string("0") : std::string("0.5"); }},
      {"starts of two decimals", "bare", nullptr,
       [](int i) { return std::to_string(1000 + (i * 7919) % 5000) + (i % 5 ? ".25" : ".125"); }},
      {"starts without a whole part", "quoted start", nullptr, [](int i) { return "." + std::to_string(100000 + (i * 37) % 900000); }},
      {"starts without a point", "bare", nullptr, [](int i) { return std::to_string(5000000 + (i * 7919) % 100000); }},
      {"starts spaced", "quoted both", nullptr, [](int i) { return "  " + std::to_string(5000000 + (i * 7919) % 100000) + ".5 "; }},
      // durations longer than the starts' spread: every start may end last
      {"long durations", "bare", nullptr, [](int i) { return std::to_string(100 + i % 13) + ".5"; },
       [](int i) { return std::to_string((i * 7919) % 100000) + ".25"; }},
      // starts that go back: the last end is not the last line's
      {"starts out of order", "quoted start", nullptr,
       [](int i) { return std::to_string(1796691595000000 + (i * 7919) % 1000003) + ".750"; },
       [](int i) { return std::to_string((i * 31) % 2000) + ".5"; }},
  };
  const std::vector<std::string> names = {"aclnnMatmul_MatMulCommon_MatMulV2,MatMulV2,dynamic,AI_CORE",
                                          "aclnnAdd_AddAiCore_Add,Add,dynamic,AI_VECTOR_CORE",
                                          "hcom_allReduce__123_1_1,hcom_allReduce_,N/A,HCCL",
                                          "hcom_allReduce__456_1_1,hcom_allReduce_,N/A,HCCL"};
  std::vector<std::string> files;
  for (const auto& c : cases) {
    const Layout& layout = layouts.at(c.layout);
    std::string text = layout.header;
    for (int i = 0; text.size() < 6 * 65536; ++i) {
      const std::string start =
          c.start ? c.start(i) : std::to_string(1796691595897140 + i * 5) + "." + std::to_string(100 + (i * 125) % 900);
      const std::string dur = c.dur ? c.dur(i) : std::to_string((i * 37) % 50) + "." + std::to_string(100 + (i * 7) % 900);
      std::string line = layout.line("1,4294967295," + std::to_string(1000 + i % 2000) + ",2", names[i % names.size()], start, dur);
      // The odd line(s) first in the third and later pieces (the line that
      // crosses a 64 KiB boundary begins the next piece) and amid others.
      auto crosses = [&](size_t n) { return text.size() / 65536 != (text.size() + n) / 65536; };
      if (c.odd && text.size() > 2 * 65536) {
        const std::string odd = c.odd(start, dur);
        if (crosses(odd.find('\n') + 1) || (i % 1500 == 700 && !crosses(odd.size()))) line = odd;
      }
      text += line;
    }
    files.push_back(tmp.path + "/" + c.name + ".csv");
    WriteTree(files.back(), text);
  }
  ExpectSameSummaries(files, 20000);
}

// trace_view.json: the program's streamed check against CheckTraceViewJson.
TEST(KernelSummaryDifferential, TraceViewCheckAgreesWithTheReference) {
  TempDir tmp;
  const std::vector<std::string> cases = {
      "[]", "[{}]", " [ {\"ph\":\"X\"} , 1 , [2] ]\n", "{\"traceEvents\":[{},{},3]}",
      "{\"other\":{\"traceEvents\":[1]},\"traceEvents\":[{\"a\":[1,{\"b\":2}]}],\"x\":null}", "{}", "3", "\"s\"",
      "[", "[1,]", "[1 2]", "{\"traceEvents\":[1]", "[1] x", "[NaN]", "[1e999]", "", "   ", "[\"\xFF\"]",
      "\xEF\xBB\xBF[{}]", "{\"traceEvents\":{}}", "[{\"a\":\"" + std::string(3 << 20, 'x') + "\"},{}]",
      "[12345678901234567890123, -0, 1.5e300, true, false, null]", "{\"traceEvents\":[],\"traceEvents\":[{}]}"};
  std::vector<std::string> files;
  for (size_t i = 0; i < cases.size(); ++i) {
    files.push_back(tmp.path + "/trace" + std::to_string(i) + ".json");
    WriteTree(files.back(), cases[i]);
  }
  files.push_back(std::string(build_paths::TestDataDir()) + "/ascend-formats/trace_view.sample.json");
  std::vector<std::string> argv = {"python3", Program(), "trace"};
  argv.insert(argv.end(), files.begin(), files.end());
  const auto lines = RunProgram(argv);
  ASSERT_EQ(lines.size(), files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    auto got = ParseJson(lines[i]);
    ASSERT_TRUE(got.ok()) << lines[i];
    auto want = CheckTraceViewJson(ReadAll(files[i]));
    EXPECT_EQ((*got)["valid"], want.ok()) << files[i] << ": " << lines[i]
                                          << (want.ok() ? "" : "\n reference: " + want.status().message());
    if (want.ok() && (*got)["valid"] == true) {
      EXPECT_EQ((*got)["event_count"], want->event_count) << files[i];
    }
  }
}

// Files of many pieces whose rows the program takes column by column (a
// whole piece at once: every line even in quotes, the columns read bare or
// one quoted span, plain decimals), each file one variant at the edges of
// that path: cells padded with spaces or quoted with spaces inside, zero
// durations, "5." and "007", names of exactly MAX_NAME bytes and one more,
// a kernel's core changing between and within pieces, new kernels in every
// piece up to and past max_distinct, CRLF line ends, a start time or a
// duration above 2^63, a duration that underflows. Fixed seed.
TEST(KernelSummaryDifferential, WholePiecesColumnByColumn) {
  TempDir tmp;
  const std::string h =
      "Step Id,Model ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),Input Shapes,Wait Time(us)\n";
  std::mt19937 rng(4538);
  auto num = [&](int whole) { return std::to_string(rng() % whole) + "." + std::to_string(rng() % 1000); };
  using Row = std::function<std::string(int)>;
  const std::vector<std::pair<std::string, Row>> variants = {
      {"plain", [&](int i) { return "1,2,k" + std::to_string(i % 40) + ",T" + std::to_string(i % 6) + ",dyn,AI_CORE,\"" + num(100000000) + "\t\"," + num(5000) + ",\"\"\"4,8\"\"\",1\n"; }},
      {"spaces", [&](int i) { return "1,2,  k" + std::to_string(i % 40) + " x\t, T ,dyn, \" AI_CORE \" , \" " + num(1000) + " \" ,\t" + num(50) + " ,s,1\r\n"; }},
      {"zeros", [&](int i) { return "1,2,k" + std::to_string(i % 9) + ",T,dyn,C,0,"  + (i % 3 ? std::string("0.000") : i % 2 ? "5." : "007") + ",s,1\n"; }},
      {"names", [&](int i) { return "1,2," + std::string(255 + (i % 700 == 699), 'n') + std::to_string(i % 2) + ",T,dyn,C,1," + num(9) + ",s,1\n"; }},
      {"cores", [&](int i) { return "1,2,k" + std::to_string(i % 5) + ",T" + std::to_string(i % 3) + ",dyn," + (i % 4001 == 4000 ? "AI_VECTOR_CORE" : "AI_CORE") + ",1," + num(9) + ",s,1\n"; }},
      {"distinct", [&](int i) { return "1,2,k" + std::to_string(i / 50) + ",T" + std::to_string(i % 70) + ",dyn,C,1," + num(9) + ",s,1\n"; }},
      {"big start", [&](int i) { return "1,2,k,T,dyn,C," + std::string(i == 9000 ? "92233720368547758080" : "5") + "," + num(9) + ",s,1\n"; }},
      {"big duration", [&](int i) { return "1,2,k,T,dyn,C,5," + std::string(i == 9000 ? "92233720368547758080" : "3.5") + ",s,1\n"; }},
      {"underflow", [&](int i) { return "1,2,k,T,dyn,C,5," + std::string(i == 9000 ? "0." + std::string(400, '0') + "1" : "0.0") + ",s,1\n"; }},
  };
  std::vector<std::string> files;
  for (const auto& [name, row] : variants) {
    std::string text = h;
    for (int i = 0; i < 12000; ++i) text += row(i);
    files.push_back(tmp.path + "/" + name + ".csv");
    WriteTree(files.back(), text);
  }
  ExpectSameSummaries(files, 20000);
  ExpectSameSummaries(files, 100);
}

// trace_view.json files of many reads, which the program decodes in runs of
// whole events: separators as json.dumps and the real files write them,
// events whose args hold arrays of objects (a cut that lands inside one),
// and an error late in the file of each kind the check refuses.
TEST(KernelSummaryDifferential, LargeTracesInRunsOfEvents) {
  TempDir tmp;
  auto events = [](const std::string& sep, int n, int bad_at, const std::string& bad) {
    std::string t = "[";
    for (int i = 0; i < n; ++i) {
      if (i) t += sep;
      if (i == bad_at) {
        t += bad;
        continue;
      }
      t += "{\"name\": \"k" + std::to_string(i % 37) + "\", \"ph\": \"X\", \"ts\": \"" + std::to_string(1000 + i) +
           ".5\", \"dur\": " + std::to_string(i % 90) + ".25, \"args\": {\"l\": [{\"x\": 1}, {\"y\": [2, {}]}], \"s\": \"},{\"}}";
    }
    return t + "]";
  };
  const std::vector<std::string> cases = {
      events(", ", 20000, -1, ""),
      events(",\n", 20000, -1, ""),
      events(",", 20000, -1, ""),
      "{\"a\": 1, \"traceEvents\": " + events(", ", 20000, -1, "") + ", \"b\": [1]}",
      events(", ", 20000, 15000, "{\"dur\": 1e999}"),
      events(", ", 20000, 15000, "{\"dur\": NaN}"),
      events(", ", 20000, 15000, "{\"s\": \"\x01\"}"),
      events(", ", 20000, 15000, "{\"s\": \"\\q\"}"),
      events(", ", 20000, 15000, "{\"a\": 1,}"),
      events(", ", 20000, 15000, "7"),
      events(", ", 20000, 19999, "{}, ") ,
      events(", ", 20000, 15000, "{\"dur\": 1.5e300, \"n\": 123456789012345678901234567890}"),
      events(", ", 20000, -1, "").substr(0, 900000),
  };
  std::vector<std::string> files;
  for (size_t i = 0; i < cases.size(); ++i) {
    files.push_back(tmp.path + "/big" + std::to_string(i) + ".json");
    WriteTree(files.back(), cases[i]);
  }
  std::vector<std::string> argv = {"python3", Program(), "trace"};
  argv.insert(argv.end(), files.begin(), files.end());
  const auto lines = RunProgram(argv);
  ASSERT_EQ(lines.size(), files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    auto got = ParseJson(lines[i]);
    ASSERT_TRUE(got.ok()) << lines[i];
    auto want = CheckTraceViewJson(ReadAll(files[i]));
    EXPECT_EQ((*got)["valid"], want.ok()) << files[i] << ": " << lines[i]
                                          << (want.ok() ? "" : "\n reference: " + want.status().message());
    if (want.ok() && (*got)["valid"] == true) {
      EXPECT_EQ((*got)["event_count"], want->event_count) << files[i];
    }
  }
  EXPECT_EQ(ParseJson(lines[0])->value("event_count", 0), 20000);  // the reference and the program alike
}

// Records that go on past their line (a quote left open in a column not
// read) among pieces of plain lines: the line after such a line can look
// like a whole row of its own, which the program's regular-expression path
// must not take as one (it checks every line's quotes are even first).
TEST(KernelSummaryDifferential, RecordsSpanningLinesAmongPlainLines) {
  TempDir tmp;
  std::string text =
      "Step Id,Model ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),Input Shapes,Wait Time(us)\n";
  for (int i = 0; i < 12000; ++i) {
    if (i % 997 == 996) {
      text += "1,2,kA,T,dyn,AI_CORE,\"5\t\",3.5,\"open\n1,2,kB,T2,dyn,AI_CORE,\"6\t\",4.5,close\"\n";
      continue;
    }
    text += "1,2,k" + std::to_string(i % 13) + ",T" + std::to_string(i % 4) + ",dyn,AI_CORE,\"" +
            std::to_string(1000 + i) + ".5\t\"," + std::to_string(i % 90) + ".25,\"\"\"4,8\"\"\",1\n";
  }
  const std::string file = tmp.path + "/spanning.csv";
  WriteTree(file, text);
  ExpectSameSummaries({file}, 20000);
}

// trace_view.json of flat events (no "}, {" inside one), which the program
// takes by their shapes (every digit read as 1, each shape checked once):
// an error late in the file of each kind the digits' values decide (a
// leading zero, a number that overflows only at its digits' values) and
// valid events the shapes must send to the exact check (exponents,
// non-ASCII text, "}, {" inside a string, another separator).
TEST(KernelSummaryDifferential, LargeTracesInShapes) {
  TempDir tmp;
  auto events = [](const std::string& sep, int n, int bad_at, const std::string& bad) {
    std::string t = "[";
    for (int i = 0; i < n; ++i) {
      if (i) t += sep;
      if (i == bad_at) {
        t += bad;
        continue;
      }
      t += "{\"name\": \"k" + std::to_string(i % 37) + "\", \"pid\": 800, \"tid\": " + std::to_string(i % 3) +
           ", \"ts\": \"" + std::to_string(1000 + i) + ".5\", \"dur\": " + std::to_string(i % 90) +
           ".025, \"args\": {\"Model Id\": 4294967295, \"Task Type\": \"AI_CORE\", \"Task Id\": " +
           std::to_string(i) + "}, \"ph\": \"X\"}";
    }
    return t + "]";
  };
  const std::vector<std::string> cases = {
      events(", ", 20000, -1, ""),
      events(",\n", 20000, -1, ""),
      events(",", 20000, -1, ""),
      "{\"traceEvents\": " + events(", ", 20000, -1, "") + "}",
      events(", ", 20000, 15000, "{\"dur\": 03.25}"),
      events(", ", 20000, 15000, "{\"tid\": -02}"),
      events(", ", 20000, 15000, "{\"n\": [1, 00]}"),
      events(", ", 20000, 15000, "{\"dur\": 1e999}"),
      events(", ", 20000, 15000, "{\"dur\": 2e308}"),
      events(", ", 20000, 15000, "{\"dur\": " + std::string(400, '9') + ".5}"),
      events(", ", 20000, 15000, "{\"dur\": 1e5, \"x\": 1E+05, \"y\": 0.5, \"z\": -0, \"w\": 10, \"v\": 1.5e300}"),
      events(", ", 20000, 15000, "{\"name\": \"k\xC3\xA9 \xE5\x90\x8D\"}"),
      events(", ", 20000, 15000, "{\"name\": \"a}, {b\"}"),
      events(", ", 20000, 15000, "{\"a\": 1},\n{\"b\": 2}"),
      events(", ", 20000, 15000, "{\"s\": \"\\u12G4\"}"),
      events(", ", 20000, 15000, "{\"s\": \"\\u0041\\ud83d\\ude00\"}"),
      events(", ", 20000, 15000, "{\"a\" 1}"),
      events(", ", 20000, 15000, "{\"a\": 1,}"),
      events(", ", 20000, 15000, "{\"a\": Infinity}"),
      events(", ", 20000, -1, "").substr(0, 1000000),
  };
  std::vector<std::string> files;
  for (size_t i = 0; i < cases.size(); ++i) {
    files.push_back(tmp.path + "/flat" + std::to_string(i) + ".json");
    WriteTree(files.back(), cases[i]);
  }
  std::vector<std::string> argv = {"python3", Program(), "trace"};
  argv.insert(argv.end(), files.begin(), files.end());
  const auto lines = RunProgram(argv);
  ASSERT_EQ(lines.size(), files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    auto got = ParseJson(lines[i]);
    ASSERT_TRUE(got.ok()) << lines[i];
    auto want = CheckTraceViewJson(ReadAll(files[i]));
    EXPECT_EQ((*got)["valid"], want.ok()) << files[i] << ": " << lines[i]
                                          << (want.ok() ? "" : "\n reference: " + want.status().message());
    if (want.ok() && (*got)["valid"] == true) {
      EXPECT_EQ((*got)["event_count"], want->event_count) << files[i];
    }
  }
  EXPECT_EQ(ParseJson(lines[0])->value("event_count", 0), 20000);
  EXPECT_EQ(ParseJson(lines[13])->value("event_count", 0), 20001);  // the other separator: one event more
  for (size_t i : {4, 5, 6, 7, 8, 9}) EXPECT_EQ(ParseJson(lines[i])->value("valid", true), false) << files[i];
}

}  // namespace
}  // namespace npuprof::testing
