// What Network::launch() refuses before it starts anything: options that exclude
// each other, a topology the options cannot run (no back-ends, no commnode to join
// under or to take the front-end's place), bad fault-tolerance and gossip settings,
// a launch tool that is missing, more local processes than the machine has room for.
#pragma once

#include "canopy/frontend.h"

namespace canopy::frontend {

// Every error is ErrorKind::invalid_input. The topology's gossip settings become the
// options' when these leave gossip off (the one change it makes).
Result<void> check_launch_options(LaunchOptions& options);

}  // namespace canopy::frontend
