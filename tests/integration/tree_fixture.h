// TreeTest: the fixture of the tests that launch trees through the library, a
// ProcessTest (process_test.h). Before each test, CANOPY_COMMNODE names this build's
// commnode and no process may be left over from an earlier test; after it, the
// network is destroyed before the processes are checked. A test that needs files
// gets a directory of its own (test_dir), removed afterwards.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "canopy/frontend.h"
#include "process_test.h"

namespace canopy::testing {

class TreeTest : public ProcessTest {
 protected:
  void SetUp() override {
    setenv("CANOPY_COMMNODE", (std::string(CANOPY_BIN_DIR) + "/canopy-commnode").c_str(), 1);
    ASSERT_TRUE(ProcessGuard::descendants().empty()) << "processes left over before the test";
  }

  void TearDown() override {
    network_.reset();
    ProcessTest::TearDown();
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

 private:
  std::filesystem::path dir_;
};

}  // namespace canopy::testing
