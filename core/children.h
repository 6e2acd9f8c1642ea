// ChildTable: the children of one node, whether launched by it or adopted.
//
// Indexes are stable: a child is never removed, only marked gone (an adopted orphan
// is appended; a former child that comes back reuses its entry). Every change of a
// child's state goes through set_state(), which logs it as "child R: a -> b (why)".
#pragma once

#include <boost/asio.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "canopy/topology.h"
#include "core/process.h"
#include "transport/clock.h"
#include "transport/link.h"

namespace canopy::core {

namespace asio = boost::asio;

// starting: launched (or, in attach mode, expected), not connected yet;
// connected: said hello; ready: its whole subtree is up (adopted orphans join
// ready); gone: its process or connection is lost, or it never came up.
enum class ChildState : std::uint8_t { starting, connected, ready, gone };
const char* to_string(ChildState state);

// What is known of a child's loss: made when its link closes or its process exits.
// Most children are never lost, and a commnode has up to thousands: a child held
// these 48 bytes in place until stop 76 (docs/scale.md, "A commnode's state per
// child").
struct ChildLoss {
  std::string close_reason;  // why its link closed; reported once known
  std::optional<int> exit_status;
  std::unique_ptr<Timer> timer;  // waits briefly for the exit status
};

struct Child {
  Rank rank = 0;
  Role role = Role::backend;
  ChildState state = ChildState::starting;
  bool loss_reported = false;
  bool adopted = false;                       // joined as an orphan, not started by this node
  bool reading_held = false;                  // a service holds its reading (Node::hold_reading)
  std::shared_ptr<transport::Link> link;      // null unless connected
  std::unique_ptr<ChildProcess> process;      // null if not started by this node
  std::unique_ptr<ChildLoss> loss;            // null until its link closes or its process exits
  ChildLoss& lost() {
    if (!loss) loss = std::make_unique<ChildLoss>();
    return *loss;
  }
  bool never_connected() const { return loss && loss->close_reason == kNeverConnected; }
  static constexpr std::string_view kNeverConnected = "never connected";
};

class ChildTable {
 public:
  // Appends a child in state `starting`; returns its index.
  std::size_t add(Rank rank, Role role);
  // The index of `rank`, if it is or was a child of this node.
  std::optional<std::size_t> index_of(Rank rank) const;

  Child& operator[](std::size_t index) { return children_[index]; }
  const Child& operator[](std::size_t index) const { return children_[index]; }
  std::size_t size() const { return children_.size(); }
  bool empty() const { return children_.empty(); }
  auto begin() { return children_.begin(); }
  auto end() { return children_.end(); }
  auto begin() const { return children_.begin(); }
  auto end() const { return children_.end(); }

  // The one way a child's state changes; logs the transition at info level, or at
  // warn level when `warn` (a loss that is not part of a stop).
  void set_state(std::size_t index, ChildState next, std::string_view why, bool warn = false);
  // Children with an open link.
  std::size_t connected() const;
  // Gives back the room kept for more children (the node is quiet: Node::fold_part).
  void shrink_to_fit() {
    children_.shrink_to_fit();
    index_.shrink_to_fit();
  }

 private:
  std::vector<Child> children_;
  // (rank, index), ascending by rank: 8 bytes a child, not a hash node's 24 and its
  // bucket's 8 (docs/scale.md, "A commnode's state per child").
  std::vector<std::pair<Rank, std::uint32_t>> index_;
};

}  // namespace canopy::core
