// SshdTest: a GoogleTest fixture with a real loopback sshd (SshdFixture,
// tests/support/sshd_fixture.h) started before each test as `sshd_`; a test
// that failed prints the sshd's log. Tests that need more set-up derive from
// it and call SshdTest::SetUp() first.
#pragma once

#include <gtest/gtest.h>

#include <iostream>

#include "tests/support/sshd_fixture.h"

namespace npuprof::testing {

class SshdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = sshd_.Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "sshd log:\n" << sshd_.log() << "\n";
  }
  SshdFixture sshd_;
};

}  // namespace npuprof::testing
