// Worker-side helpers of torch-profile: PNG resize (libpng), prompts and chat
// bodies, request records, and the detached analyse() script's re-attach
// behaviour (run locally with the simulator's torch_npu).
#include <gtest/gtest.h>
#include <png.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "workers/profiling/chat_requests.h"
#include "workers/profiling/image_prep.h"
#include "workers/profiling/remote_analyse.h"
#include "workers/ssh/shell_quote.h"
#include "tests/support/build_paths.h"

namespace npuprof::profiling {
namespace {

std::string MakePng(int w, int h) {
  std::vector<unsigned char> px(static_cast<size_t>(w) * h * 4);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<unsigned char>(i * 7);
  png_image img;
  std::memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  img.width = w;
  img.height = h;
  img.format = PNG_FORMAT_RGBA;
  png_alloc_size_t size = 0;
  png_image_write_to_memory(&img, nullptr, &size, 0, px.data(), 0, nullptr);
  std::string out(size, '\0');
  png_image_write_to_memory(&img, out.data(), &size, 0, px.data(), 0, nullptr);
  out.resize(size);
  return out;
}

TEST(ImagePrep, ResizesKeepingAspect) {
  auto r = ResizePng(MakePng(200, 100), 50);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->width, 100);
  EXPECT_EQ(r->height, 50);
  EXPECT_EQ(r->source_width, 200);
  auto again = ResizePng(r->png, 50);  // output is a valid PNG
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->width, 100);
  EXPECT_EQ(PngDataUrl(*r).rfind("data:image/png;base64,iVBORw0KGgo", 0), 0u);
  auto meta = ImageMeta("/x.png", *r);
  EXPECT_EQ(meta["height"], 50);
  EXPECT_EQ(meta["sha256"].get<std::string>().size(), 64u);
}

TEST(ImagePrep, RejectsNonPng) {
  EXPECT_FALSE(ResizePng("GIF89a not a png", 10).ok());
  EXPECT_FALSE(PrepareImageFile("/nonexistent/file.png", 10).ok());
  EXPECT_EQ(Base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64("fo"), "Zm8=");
}

TEST(ChatRequests, PromptAndBody) {
  const std::string p = BuildPrompt(7, 100);
  std::istringstream ss(p);
  int words = 0;
  for (std::string w; ss >> w;) ++words;
  EXPECT_EQ(words, 100);
  EXPECT_NE(p.find(" 7."), std::string::npos);
  EXPECT_NE(BuildPrompt(1, 50), BuildPrompt(2, 50));
  auto body = ChatBody("m", "hi", 12, "");
  EXPECT_EQ(body["max_tokens"], 12);
  EXPECT_EQ(body["temperature"], 0);
  EXPECT_EQ(body["top_p"], 1);
  EXPECT_EQ(body["messages"][0]["content"], "hi");
  auto vl = ChatBody("m", "hi", 12, "data:image/png;base64,AAAA");
  EXPECT_EQ(vl["messages"][0]["content"][1]["image_url"]["url"], "data:image/png;base64,AAAA");
}

TEST(ChatRequests, Records) {
  ssh::HttpResponse ok;
  ok.status = 200;
  ok.body = R"({"choices":[]})";
  ok.latency_ms = 12;
  auto rec = RequestRecord(3, ok, -1);
  EXPECT_EQ(rec["ok"], true);
  EXPECT_EQ(rec["index"], 3);
  EXPECT_EQ(rec["latency_ms"], 12);
  EXPECT_TRUE(rec["body"].is_object());
  ssh::HttpResponse bad;
  bad.status = 500;
  bad.body = std::string("oops\xff", 5);
  auto r2 = RequestRecord(4, bad, -1);
  EXPECT_EQ(r2["ok"], false);
  EXPECT_EQ(r2["status"], 500);
  EXPECT_NO_THROW(r2.dump());
  auto r3 = RequestRecord(5, Result<ssh::HttpResponse>(Status::Timeout("timeout: x")), -1);
  EXPECT_EQ(r3["ok"], false);
  EXPECT_TRUE(r3["status"].is_null());
  EXPECT_EQ(r3["error"], "timeout: x");
}

std::string RunSh(const std::vector<std::string>& argv, const std::string& env) {
  const std::string cmd = env + " " + ssh::BuildCommand(argv);
  FILE* f = popen(cmd.c_str(), "r");
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof(buf), f)) out.append(buf, n);
  pclose(f);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(RemoteAnalyse, MarkerMakesItRunOnce) {
  const std::string tmp = ::testing::TempDir() + "/tp_analyse_" + std::to_string(getpid());
  const std::string dir = tmp + "/host_1_2_ascend_pt";
  std::filesystem::create_directories(dir + "/FRAMEWORK");
  const std::string env = "NPUPROF_SIM_ROOT=" + tmp + " PYTHONPATH=" + std::string(npuprof::build_paths::SourceDir()) + "/tests/sim/python";
  const std::string marker = AnalyseMarker(dir, "run 1.t7");
  EXPECT_EQ(marker, dir + "/.npuprof_analyse.run_1.t7");
  EXPECT_EQ(RunSh(DetachedAnalyseArgv(dir, marker), env), "started");
  for (int i = 0; i < 200 && !std::filesystem::exists(marker + ".rc"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(std::filesystem::exists(marker + ".rc"));
  EXPECT_EQ(RunSh(DetachedAnalyseArgv(dir, marker), env), "done");
  EXPECT_EQ(RunSh(AnalyseAliveArgv(marker), env), "done");
  std::ifstream rc(marker + ".rc");
  int code = -1;
  rc >> code;
  EXPECT_EQ(code, 0);
  // Another task id starts afresh.
  EXPECT_EQ(RunSh(DetachedAnalyseArgv(dir, AnalyseMarker(dir, "other.t1")), env), "started");
  for (int i = 0; i < 200 && !std::filesystem::exists(AnalyseMarker(dir, "other.t1") + ".rc"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // A missing directory is refused (exit 4), nothing is started.
  EXPECT_EQ(RunSh(DetachedAnalyseArgv(tmp + "/nope", tmp + "/nope/.m"), env + " 2>/dev/null"), "");
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace npuprof::profiling
