// TreeTest: the fixture of the tests that launch trees of real processes.
//
// Before each test, CANOPY_COMMNODE names this build's commnode and no process may be
// left over from an earlier test. After it, the network is destroyed and every
// process the test started, directly or not, must be gone within 10 s; whatever is
// left is then killed and the test fails. A test that needs files gets a directory of
// its own (test_dir), removed afterwards.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "canopy/frontend.h"
#include "process_guard.h"

namespace canopy::testing {

class TreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("CANOPY_COMMNODE", (std::string(CANOPY_BIN_DIR) + "/canopy-commnode").c_str(), 1);
    ASSERT_TRUE(ProcessGuard::descendants().empty()) << "processes left over before the test";
  }

  void TearDown() override {
    network_.reset();
    auto left = ProcessGuard::wait_for_none(std::chrono::seconds(10));
    EXPECT_TRUE(left.empty()) << left.size() << " processes left after the test";
    ProcessGuard::kill_all();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  // A directory for this test's files, PREFIX-PID-TESTNAME under the temporary
  // directory, made on the first call.
  const std::filesystem::path& test_dir(const std::string& prefix) {
    if (dir_.empty()) {
      dir_ = std::filesystem::temp_directory_path() /
             (prefix + "-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
      std::filesystem::create_directories(dir_);
    }
    return dir_;
  }

  std::unique_ptr<canopy::Network> network_;
  ProcessGuard guard_;

 private:
  std::filesystem::path dir_;
};

}  // namespace canopy::testing
