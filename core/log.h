// Logging: one file per process in $CANOPY_LOG_DIR, named <role>-<rank>.log, at the
// level in $CANOPY_LOG_LEVEL (trace, debug, info, warn, error; default info).
// Without CANOPY_LOG_DIR, warnings and errors go to stderr.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>

#include "canopy/topology.h"

namespace canopy::core {

// Sets up the process's "canopy" logger. Safe to call more than once; the first
// call wins.
void init_logging(Role role, Rank rank);

// The process's logger (a stderr logger at warn level until init_logging()).
spdlog::logger& log();

}  // namespace canopy::core
