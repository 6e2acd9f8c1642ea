// How a child learns who it is and how to reach its parent: environment variables
// set by the parent that launched it (or the attach file's line, docs/attach.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "canopy/result.h"
#include "canopy/topology.h"
#include "transport/striped_link.h"

namespace canopy::core {

inline constexpr const char* kEnvParent = "CANOPY_PARENT";        // address:port
inline constexpr const char* kEnvRank = "CANOPY_RANK";
inline constexpr const char* kEnvNetworkId = "CANOPY_NETWORK_ID";  // hex
// Set only for a striped link to the parent (docs/striping.md, "In the tree"):
// "checksum=crc32c reliable=1 corrupt=0 paths=LOCAL>REMOTE,LOCAL>REMOTE", the port
// being CANOPY_PARENT's.
inline constexpr const char* kEnvParentLink = "CANOPY_PARENT_LINK";

// How a child reaches its parent: a plain link to `address:port`, or, when `paths`
// is not empty, a striped link over those paths.
struct ParentLink {
  std::string address;
  std::uint16_t port = 0;
  std::vector<transport::PathEndpoints> paths;
  transport::StripedOptions striped;
};

// The StripedOptions of a tree's striped links.
transport::StripedOptions striped_options(const LinkSettings& links);
// CANOPY_PARENT_LINK's value for `paths` (their port is not part of it).
std::string encode_parent_link(const LinkSettings& links, const std::vector<transport::PathEndpoints>& paths);
// CANOPY_PARENT_LINK's value for `child` under `parent`, which listens on `port`:
// "" where their link is plain.
std::string parent_link_for(const Topology& topology, const TopologyNode& child, const TopologyNode& parent, std::uint16_t port);
// Reads CANOPY_PARENT ("address:port") and, if set, CANOPY_PARENT_LINK; the error
// names the variable and what is wrong with it.
Result<ParentLink> parent_link_from(const char* parent, const char* parent_link);

}  // namespace canopy::core
