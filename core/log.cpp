#include "core/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdlib>
#include <mutex>

namespace canopy::core {
namespace {

std::shared_ptr<spdlog::logger> make_logger(Role role, Rank rank) {
  std::string name = std::string(to_string(role)) + "-" + std::to_string(rank);
  const char* dir = std::getenv("CANOPY_LOG_DIR");
  const char* level = std::getenv("CANOPY_LOG_LEVEL");
  std::shared_ptr<spdlog::logger> logger;
  if (dir && *dir) {
    try {
      auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(std::string(dir) + "/" + name + ".log");
      logger = std::make_shared<spdlog::logger>("canopy", sink);
      logger->set_level(level ? spdlog::level::from_str(level) : spdlog::level::info);
    } catch (const spdlog::spdlog_ex& e) {
      logger = nullptr;
      std::fprintf(stderr, "canopy: cannot open log file in %s: %s\n", dir, e.what());
    }
  }
  if (!logger) {
    logger = std::make_shared<spdlog::logger>("canopy", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    logger->set_level(spdlog::level::warn);
  }
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%f %L " + name + " %v");
  logger->flush_on(spdlog::level::info);
  return logger;
}

std::once_flag once;
std::shared_ptr<spdlog::logger> process_logger;

}  // namespace

void init_logging(Role role, Rank rank) {
  std::call_once(once, [&] { process_logger = make_logger(role, rank); });
}

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> fallback = [] {
    auto l = std::make_shared<spdlog::logger>("canopy", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_level(spdlog::level::warn);
    return l;
  }();
  return process_logger ? *process_logger : *fallback;
}

}  // namespace canopy::core
