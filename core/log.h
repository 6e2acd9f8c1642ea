// Logging: one file per process in $CANOPY_LOG_DIR, named <role>-<rank>.log, at the
// level in $CANOPY_LOG_LEVEL (trace, debug, info, warn, error; default info).
// Without CANOPY_LOG_DIR nothing is logged: no Canopy process writes to the user's
// terminal, nor the libraries to their host program's stderr, unless
// $CANOPY_LOG_STDERR=1 asks for it (warnings and errors by default).
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>

#include "canopy/topology.h"

namespace canopy::core {

// Sets up the process's "canopy" logger. Safe to call more than once; the first
// call wins. Call it before other threads log.
void init_logging(Role role, Rank rank);

// The process's logger (silent, or stderr with $CANOPY_LOG_STDERR, until init_logging()).
spdlog::logger& log();

// The same logger, for code that is given its logger rather than calling log():
// the transport layer (transport::StripedOptions::log). It is one object for the
// whole life of the process — init_logging() sets its sinks, level and pattern in
// place — so a holder that took it before init_logging() logs where the process
// does after it.
std::shared_ptr<spdlog::logger> logger();

}  // namespace canopy::core
