#include "core/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdlib>
#include <mutex>
#include <string_view>

namespace canopy::core {
namespace {

// Whether $CANOPY_LOG_STDERR asks for the log on standard error.
bool stderr_wanted() {
  const char* v = std::getenv("CANOPY_LOG_STDERR");
  return v && *v && std::string_view(v) != "0";
}

spdlog::level::level_enum level_from_env(spdlog::level::level_enum otherwise) {
  const char* level = std::getenv("CANOPY_LOG_LEVEL");
  return level && *level ? spdlog::level::from_str(level) : otherwise;
}

// The process's logger: silent, unless $CANOPY_LOG_STDERR asks for standard error,
// until init_logging() configures it. A library does not write to its host
// program's terminal by default: errors reach the caller as Results.
const std::shared_ptr<spdlog::logger>& process_logger() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>("canopy");
    if (stderr_wanted()) {
      l->sinks() = {std::make_shared<spdlog::sinks::stderr_sink_mt>()};
      l->set_level(level_from_env(spdlog::level::warn));
    } else {
      l->set_level(spdlog::level::off);
    }
    return l;
  }();
  return logger;
}

void configure(spdlog::logger& logger, Role role, Rank rank) {
  std::string name = std::string(to_string(role)) + "-" + std::to_string(rank);
  const char* dir = std::getenv("CANOPY_LOG_DIR");
  bool file = false;
  if (dir && *dir) {
    try {
      auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(std::string(dir) + "/" + name + ".log");
      logger.sinks() = {sink};
      logger.set_level(level_from_env(spdlog::level::info));
      file = true;
    } catch (const spdlog::spdlog_ex& e) {
      // Said once, by the process that was asked for a file and cannot write it.
      std::fprintf(stderr, "canopy: cannot open log file in %s: %s\n", dir, e.what());
    }
  }
  if (!file && stderr_wanted()) {
    logger.sinks() = {std::make_shared<spdlog::sinks::stderr_sink_mt>()};
    logger.set_level(level_from_env(spdlog::level::warn));
  } else if (!file) {
    logger.sinks().clear();
    logger.set_level(spdlog::level::off);
  }
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
