#include "core/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdlib>
#include <mutex>

namespace canopy::core {
namespace {

// The process's logger: stderr at warn level until init_logging() configures it.
const std::shared_ptr<spdlog::logger>& process_logger() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>("canopy", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_level(spdlog::level::warn);
    return l;
  }();
  return logger;
}

void configure(spdlog::logger& logger, Role role, Rank rank) {
  std::string name = std::string(to_string(role)) + "-" + std::to_string(rank);
  const char* dir = std::getenv("CANOPY_LOG_DIR");
  const char* level = std::getenv("CANOPY_LOG_LEVEL");
  if (dir && *dir) {
    try {
      auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(std::string(dir) + "/" + name + ".log");
      logger.sinks() = {sink};
      logger.set_level(level ? spdlog::level::from_str(level) : spdlog::level::info);
    } catch (const spdlog::spdlog_ex& e) {
      std::fprintf(stderr, "canopy: cannot open log file in %s: %s\n", dir, e.what());
    }
  }
  // Otherwise (or if the file could not be opened): stderr at warn level, as before.
  logger.set_pattern("%Y-%m-%dT%H:%M:%S.%f %L " + name + " %v");
  logger.flush_on(spdlog::level::info);
}

std::once_flag once;

}  // namespace

void init_logging(Role role, Rank rank) {
  std::call_once(once, [&] { configure(*process_logger(), role, rank); });
}

spdlog::logger& log() { return *process_logger(); }

std::shared_ptr<spdlog::logger> logger() { return process_logger(); }

}  // namespace canopy::core
