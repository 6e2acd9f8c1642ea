// LaunchPlan: the tree-wide configuration, sent down with the topology: how a
// parent starts its children, and how every process watches its peers and heals.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "canopy/fault_tolerance.h"

namespace canopy::core {

// What only a process that starts others reads: the root has it from the options,
// and a commnode from its parent; a back-end is never sent it (encode_plan's
// `launches`) and never holds it (120 bytes in place until stop 76).
struct LaunchCommands {
  std::string commnode_exe;                 // absolute path of canopy-commnode
  std::vector<std::string> backend_argv;    // back-end program and its arguments
  std::string launcher = "ssh {host} {command}";
  // With fault.keep_tree_for: the front-end's re-attach file, which a heir that stops
  // at the end of the grace period removes (it holds the secret), when it is on the
  // heir's host and holds this tree's network id.
  std::string reattach_file;
};

// A LaunchCommands made when first set, copied with the plan.
class HeldCommands {
 public:
  HeldCommands() = default;
  HeldCommands(const HeldCommands& other) { *this = other; }
  HeldCommands& operator=(const HeldCommands& other) {
    if (this != &other) held_ = other.held_ ? std::make_unique<LaunchCommands>(*other.held_) : nullptr;
    return *this;
  }
  HeldCommands(HeldCommands&&) noexcept = default;
  HeldCommands& operator=(HeldCommands&&) noexcept = default;
  // The commands, or the defaults if none were set.
  const LaunchCommands& get() const {
    static const LaunchCommands kNone;
    return held_ ? *held_ : kNone;
  }
  LaunchCommands& set() {
    if (!held_) held_ = std::make_unique<LaunchCommands>();
    return *held_;
  }
  bool held() const { return held_ != nullptr; }

 private:
  std::unique_ptr<LaunchCommands> held_;
};

struct LaunchPlan {
  HeldCommands commands;
  std::chrono::milliseconds startup_timeout{30000};
  // The flags side by side: one word (16 bytes of padding in every process before).
  // Append MRNet's five arguments to each back-end's command line (docs/mrnet.md).
  bool mrnet_backend_args = false;
  bool attach = false;                      // back-ends attach themselves; not launched
  // Attach mode: back-ends the topology does not name may join under any commnode,
  // under a rank of their own (docs/attach.md, "Open attach").
  bool open_attach = false;
  // The front-end starts every process through the resource manager, one step per
  // level (docs/launch.md); parents start none and wait for their children.
  bool bulk = false;
  // What starts a level's processes in a bulk launch: srun or mpirun. The root's
  // alone (it runs the steps); not on the wire.
  enum class BulkTool : std::uint8_t { srun, mpirun } bulk_tool = BulkTool::srun;
  // This node is a front-end that re-attached to a tree which outlived its front-end
  // (Node::reattach): nothing is launched, and the tree's state comes from the heir.
  // Not on the wire.
  bool reattached = false;
  // Every back-end holds the whole tree (MRNet's model: its NetworkTopology on a
  // back-end; the gossip detector needs it), not only its part (docs/scale.md).
  bool whole_tree = false;
  // `gossip` is the user's at the root only: the tree gets it from the gossip
  // service's entry in `service_options`.
  FaultToleranceOptions fault;
  // Each service's options for the whole tree, by service id: bytes the service
  // encodes and decodes itself (Service::plan_options), carried by the core without
  // looking inside. Filled at the root when it starts.
  std::map<std::uint16_t, std::string> service_options;
  // Commnodes hold their part of the tree (Topology::part), not the whole
  // (docs/scale.md): unless every process holds the whole tree, or the tree is to
  // outlive its front-end (the heir's choice looks beyond any one part).
  bool commnode_parts() const { return !whole_tree && fault.keep_tree_for.count() == 0; }
  // A back-end holding its part of the tree: the back-ends of view 0 (the launch
  // topology's, which its part does not all hold), as ranges of ranks, first and
  // last of each, ascending. Empty elsewhere: the topology has them.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> view_zero;
};

}  // namespace canopy::core
