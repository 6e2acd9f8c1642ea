// The process logger handed to the transport layer (core::logger()) is the logger
// core::log() writes to, before and after init_logging(): a striped link whose
// options were made before init_logging() still logs to the process's log file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/log.h"

TEST(Log, TheLoggerHandedOutBeforeInitLoggingWritesToTheLogFileAfterIt) {
  auto dir = std::filesystem::temp_directory_path() / ("canopy-log-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto before = canopy::core::logger();
  EXPECT_EQ(before.get(), &canopy::core::log());

  setenv("CANOPY_LOG_DIR", dir.c_str(), 1);
  unsetenv("CANOPY_LOG_LEVEL");  // info
  canopy::core::init_logging(canopy::Role::commnode, 7);
  unsetenv("CANOPY_LOG_DIR");
  EXPECT_EQ(canopy::core::logger(), before);
  before->info("written through the early logger");

  std::ifstream file(dir / "commnode-7.log");
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_NE(text.str().find("commnode-7 written through the early logger"), std::string::npos) << text.str();
  std::filesystem::remove_all(dir);
}
