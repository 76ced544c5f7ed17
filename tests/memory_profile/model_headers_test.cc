// memory.weights' one-command read of a model dir (workers/memory/
// model_headers.h), run in a local shell over real files: config.json, every
// *.safetensors file's size, first 8 bytes and header (never its tensor
// data), a header over the cap left to a file operation; and the parser
// refuses every output that is not exactly the format.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/memory/model_headers.h"

namespace npuprof::workers {
namespace {

using ssh::testing::RunLocalArgv;
using TempDir = npuprof::testing::TempDir;

std::string Safetensors(const std::string& header, size_t data_bytes) {
  std::string f(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(f.data(), &n, 8);  // little-endian on the hosts this runs on
  return f + header + std::string(data_bytes, '\x7f');
}

TEST(ModelHeaders, ConfigFilesSizesAndHeadersButNoTensorData) {
  TempDir t;
  const std::string d = t.path + "/model dir";
  const std::string h1 = R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})";
  npuprof::testing::WriteTree(d + "/config.json", "{\"num_hidden_layers\": 2}\n");
  npuprof::testing::WriteTree(d + "/model-00001.safetensors", Safetensors(h1, 4));
  npuprof::testing::WriteTree(d + "/it's.safetensors", Safetensors("{}", 0));
  npuprof::testing::WriteTree(d + "/notes.txt", "x");
  auto r = RunLocalArgv(ModelHeadersArgv(d), "");
  ASSERT_EQ(r.status, 0) << r.err;
  auto m = ParseModelHeaders(r.out);
  ASSERT_TRUE(m.ok()) << m.status().ToString() << "\n" << r.out;
  ASSERT_TRUE(m->config.has_value());
  EXPECT_EQ(*m->config, "{\"num_hidden_layers\": 2}\n");
  EXPECT_TRUE(m->dir_exists);
  ASSERT_EQ(m->files.size(), 2u);
  for (const auto& f : m->files) {
    ASSERT_EQ(f.first8.size(), 8u) << f.name;
    ASSERT_TRUE(f.header.has_value()) << f.name;
    if (f.name == "model-00001.safetensors") {
      EXPECT_EQ(*f.header, h1);
      EXPECT_EQ(f.size, 8 + h1.size() + 4);
    } else {
      EXPECT_EQ(f.name, "it's.safetensors");
      EXPECT_EQ(*f.header, "{}");
    }
  }
  EXPECT_EQ(r.out.find("\x7f"), std::string::npos);
}

TEST(ModelHeaders, AMissingDirAndAHeaderLengthOverTheCapOrGarbage) {
  TempDir t;
  auto r = RunLocalArgv(ModelHeadersArgv(t.path + "/none"), "");
  ASSERT_EQ(r.status, 0) << r.err;
  auto m = ParseModelHeaders(r.out);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE(m->config.has_value());
  EXPECT_FALSE(m->dir_exists);

  const std::string d = t.path + "/m";
  std::string huge(8, '\0');
  const uint64_t n = kMaxInlineHeaderBytes + 1;
  std::memcpy(huge.data(), &n, 8);
  npuprof::testing::WriteTree(d + "/big.safetensors", huge + "{}");
  npuprof::testing::WriteTree(d + "/short.safetensors", "abc");
  r = RunLocalArgv(ModelHeadersArgv(d), "");
  ASSERT_EQ(r.status, 0) << r.err;
  m = ParseModelHeaders(r.out);
  ASSERT_TRUE(m.ok()) << m.status().ToString() << "\n" << r.out;
  ASSERT_EQ(m->files.size(), 2u);
  for (const auto& f : m->files) EXPECT_FALSE(f.header.has_value()) << f.name;  // left to the handler's checks
}

TEST(ModelHeaders, OutputThatIsNotExactlyTheFormatIsRefused) {
  for (const char* bad : {
           "",
           "npuprof-model 1\nconfig missing\ndir ok\n",                       // no end
           "npuprof-model 2\nconfig missing\ndir ok\nend\n",
           "npuprof-model 1\nconfig maybe\ndir ok\nend\n",
           "npuprof-model 1\nconfig ok !!\ndir ok\nend\n",
           "npuprof-model 1\nconfig missing\ndir gone\nend\n",
           "npuprof-model 1\nconfig missing\ndir missing\nfile YQ== 1 - -\nend\n",
           "npuprof-model 1\nconfig missing\ndir ok\nfile YQ== x - -\nend\n",
           "npuprof-model 1\nconfig missing\ndir ok\nfile YS9i 1 - -\nend\n",     // a name with '/'
           "npuprof-model 1\nconfig missing\ndir ok\nfile YQ== 1 AAAAAAAAAAAAAA== -\nend\n",  // 10 bytes
           "npuprof-model 1\nconfig missing\ndir ok\nfile YQ== 1 - - extra\nend\n",
       }) {
    auto r = ParseModelHeaders(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kCorruption) << bad;
    }
  }
}

}  // namespace
}  // namespace npuprof::workers
