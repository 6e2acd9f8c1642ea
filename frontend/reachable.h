// The address a front-end tells its children on other hosts (issue 49): never a
// loopback one. Debian maps a host's own name to 127.0.1.1, and a front-end on a
// login node would tell every commnode to connect to 127.0.1.1, which on the
// commnode's host is itself. Decided once, before the launch, in the topology every
// process gets: the front-end's host's address (docs/launch.md, "Which address the
// children are told").
#pragma once

#include <string>
#include <vector>

#include "canopy/result.h"
#include "canopy/topology.h"

namespace canopy::frontend {

// Sets the address of the front-end's host in `topology`:
// - `advertise`, if given (numeric, an address of this host);
// - else nothing, if the topology gives the host an address or NICs, or its name
//   resolves to an address that is not loopback, or no process runs on another host;
// - else the address this host sends from to reach the first other host that
//   resolves here (its route's source), or the first address of this host that is
//   not loopback.
// Returns what it chose and why, for the log (nothing if it changed nothing); an
// error, naming what it tried, if no address will do.
Result<std::vector<std::string>> choose_reachable_address(Topology& topology, const std::string& advertise);

}  // namespace canopy::frontend
