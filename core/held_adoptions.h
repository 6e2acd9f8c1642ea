// HeldAdoptions: the adopter's side of an adoption that cannot be answered yet.
//
// An adopter takes an orphan only once it knows the orphan's parent is gone: its
// live tree says the parent failed, or that the orphan itself was lost to its parent
// (a broken path), or the adopter's own probe of the parent finds nothing there. So
// a process that knows the secret can never take over the rank of a process whose
// parent and link are alive. The request of an orphan that has seen the failure
// before this node has is held here, not refused: until the report arrives (it
// floods the tree within about a heartbeat of the orphan's own detection), the probe
// finds the parent gone, or the hold runs out; then it is adopted if the parent
// never answered the probe (hung), and refused if it did (docs/security.md).
//
// A probe is a hello to the parent's port, as any connection begins: a challenge
// whose proof is right, from the parent's rank, shows it alive; anything else ending
// the connection first shows nothing of it is there. One probe per parent: the
// orphans of one failed parent ask together, and their requests wait on the first
// one's probe and are adopted in one pass when it finds the parent gone.
//
// All on the node's io_context thread.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/auth.h"
#include "core/service_context.h"
#include "core/tree_view.h"
#include "transport/link.h"

namespace canopy::core {

// An orphan's adoption request, as its proved hello asked.
struct OrphanRequest {
  std::shared_ptr<transport::Link> link;
  Rank orphan = 0;
  Role role = Role::backend;
  std::uint32_t incarnation = 0;
  int pid = 0;
  // Where commnodes hold parts of the tree (docs/scale.md): the orphan's live
  // subtree, if it sent one (TreeView::graft), and, for an orphan this node does not
  // hold, the deepest of its ancestors that it does (kNone otherwise).
  std::shared_ptr<const Topology> subtree;
  std::vector<Rank> ancestors;  // root first, as the orphan last knew them
  Rank watched = TreeView::kNone;
};

class HeldAdoptions {
 public:
  // `node` is read (identity, topology, live tree) and outlives this; `adopt` is
  // given each request let go: it adopts the orphan, or refuses it saying why.
  HeldAdoptions(ServiceContext& node, std::function<void(const OrphanRequest&)> adopt);
  ~HeldAdoptions();
  HeldAdoptions(const HeldAdoptions&) = delete;
  HeldAdoptions& operator=(const HeldAdoptions&) = delete;

  // Holds `request` for at most `kept` and probes its parent (the live tree is known).
  void hold(OrphanRequest request, std::chrono::milliseconds kept);
  // Whether the request made on `orphan_link` is held.
  bool holds(const transport::Link* orphan_link) const;
  // The orphan's link closed: its request is forgotten.
  void forget(const transport::Link* orphan_link) { release(orphan_link); }
  // Lets go, to `adopt`, every held request whose orphan `ready` says may now be
  // answered (after a failure report, once orphaned, when stopping).
  void review(const std::function<bool(const OrphanRequest& request)>& ready);
  // Whether a probe found `parent` gone within the last `within`: the requests of its
  // orphans that come later are adopted without probing again, until the failure
  // report arrives (the verdict is kept for `within`, in case a rank comes back: a
  // re-attached front-end).
  bool found_gone(Rank parent, std::chrono::milliseconds within) const;
  // How many probes this node has made; for tests and diagnostics.
  std::size_t probes() const { return probes_; }

 private:
  enum class Probe : std::uint8_t { none, asking, alive, gone };
  struct Held {
    OrphanRequest request;
    std::unique_ptr<Timer> deadline;
    Probe probe = Probe::none;
    Dial dial;                                             // connecting
    std::shared_ptr<transport::Link> probe_link;          // connected: hello sent
    Nonce probe_nonce{};
  };
  Held* find(const transport::Link* orphan_link);
  // The parent whose loss lets the request go: the orphan's in the live tree, or,
  // for an orphan not held here, the deepest of its ancestors held (`watched`).
  Rank parent_of(const OrphanRequest& request) const;
  void release(const transport::Link* orphan_link);
  void expired(const transport::Link* orphan_link, std::chrono::milliseconds kept);
  void probe_parent(Held& held);
  void probe_answered(const transport::Link* orphan_link, Probe result, const std::string& why);
  void let_go(const std::vector<OrphanRequest>& requests);

  ServiceContext& node_;
  std::function<void(const OrphanRequest&)> adopt_;
  std::vector<Held> held_;
  std::unordered_map<Rank, NodeClock::time_point> parents_found_gone_;
  std::size_t probes_ = 0;
  // Expires with this: a probe's connect handler may run after it is gone.
  std::shared_ptr<int> lifetime_ = std::make_shared<int>(0);
};

}  // namespace canopy::core
