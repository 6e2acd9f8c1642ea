// The address a parent tells its children on other hosts (issue 49): never a
// loopback one. Debian maps a host's own name to 127.0.1.1, and a front-end on a
// login node, or a commnode on a cluster node, would tell its children on other
// hosts to connect to 127.0.1.1, which on their host is themselves. Decided by the
// front-end before the launch, and by each commnode when its part of the tree
// arrives, in the topology it listens by and hands on (docs/launch.md, "Which
// address the children are told").
#pragma once

#include <string>
#include <vector>

#include "canopy/result.h"
#include "canopy/topology.h"

namespace canopy::core {

// Sets the address of the host of process `self` in `topology`:
// - `advertise`, if given (numeric, an address of this host; the front-end's
//   --advertise);
// - else nothing, if the topology gives the host an address or NICs, or its name
//   resolves to an address that is not loopback, or every other host of `topology`
//   resolves here to a loopback address too (they are this machine);
// - else the address this host sends from to reach the first other host that
//   resolves here (its route's source), or the first address of this host that is
//   not loopback.
// Returns what it chose and why, for the log (nothing if it changed nothing); an
// error, naming what it tried, if no address will do.
Result<std::vector<std::string>> choose_reachable_address(Topology& topology, Rank self, const std::string& advertise);

}  // namespace canopy::core
