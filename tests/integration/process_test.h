// ProcessTest: the fixture of tests that start real processes. After each test,
// every process it started, directly or not, must be gone within 10 s; whatever is
// left is then killed and the test fails.
#pragma once

#include <gtest/gtest.h>

#include <chrono>

#include "process_guard.h"

namespace canopy::testing {

class ProcessTest : public ::testing::Test {
 protected:
  void TearDown() override {
    auto left = ProcessGuard::wait_for_none(std::chrono::seconds(10));
    EXPECT_TRUE(left.empty()) << left.size() << " processes left after the test";
    ProcessGuard::kill_all();
  }

  ProcessGuard guard_;
};

}  // namespace canopy::testing
