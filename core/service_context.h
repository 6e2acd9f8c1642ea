// ServiceContext: what a service may see and do of the node it runs on.
//
// A service (core/service.h) is given this, not the node: the node core
// (core/node.h) implements it, and a test may give a service a context of its own.
// It is the whole seam: reading the node (its identity, phase, plan, the live tree,
// its children), sending (up, to a child), and the few changes a service may ask
// for, each of which the core carries out and logs: a child's lifecycle (launch),
// cutting a child off, holding a child's reading back, asking for an adoption
// (recovery), the gate and epoch of back-end messages (membership), and a stop.
// A service never closes a link nor kills a process itself.
//
// All methods run on the io_context's thread; nothing here is thread-safe.
#pragma once

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "canopy/event.h"
#include "canopy/topology.h"
#include "core/children.h"
#include "core/dial.h"
#include "core/plan.h"
#include "core/service.h"
#include "core/tree_view.h"

namespace canopy::transport {
class Link;
}

namespace canopy::core {

enum class Phase : std::uint8_t { launching, running, orphaned, stopping, stopped };
const char* to_string(Phase phase);

// What an orphan's adoption handshake produced (ServiceContext::request_adoption).
struct Adoption {
  Rank adopter = 0;
  std::uint32_t incarnation = 0;
  Rank failed_parent = 0;
  std::chrono::steady_clock::time_point accepted;     // the adopter's answer arrived
  std::chrono::steady_clock::time_point compensated;  // services sent their state, held output sent
};

class ServiceContext {
 public:
  // ---- reading the node ----
  virtual boost::asio::io_context& io() = 0;
  virtual const NodeIdentity& identity() const = 0;
  bool is_root() const { return identity().role == Role::frontend; }
  virtual Phase phase() const = 0;
  // Stopping or stopped.
  bool stopping() const { return phase() >= Phase::stopping; }
  // Orphaned in the root's place (events::Promoted).
  virtual bool promoted() const = 0;
  virtual const LaunchPlan& plan() const = 0;
  virtual const Topology* topology() const = 0;  // null until the tree is known
  // The live tree (who is whose child now, who is gone); null until the topology is
  // known. Not the membership view, which is the membership service's.
  virtual const TreeView* live_tree() const = 0;
  // This process's parent, the parent's incarnation and the root, as the live tree
  // has them, read without unfolding a back-end's part (core/folded_part.h), as
  // live_tree() would: what the detector reads on every tick. TreeView::kNone (and
  // 0) at the root, and before the tree is known.
  virtual Rank parent_rank() const = 0;
  virtual std::uint32_t parent_incarnation() const = 0;
  virtual Rank root_rank() const = 0;
  // Where this process stands in the live tree (TreeView::place), without unfolding
  // a back-end's part; empty before the tree is known.
  virtual std::optional<TreeView::Place> own_place() const = 0;
  // The children, read-only: their state changes through the verbs below.
  virtual const ChildTable& children() const = 0;
  // The link to the parent, read-only (when it was last heard from); null at the root.
  virtual const transport::Link* parent_link() const = 0;
  virtual std::uint16_t listen_port() const = 0;
  // "back-end 3 on h1", for log lines and reports.
  virtual std::string describe(Rank rank) const = 0;
  // The child through which back-end `rank` is reached, if it is below this node.
  virtual std::optional<std::size_t> route_to(Rank backend) const = 0;

  // ---- sending ----
  // To the parent; while orphaned, held back (up to 64 MiB) until an adopter takes
  // this node, then sent in order. False if the message was dropped: beyond the
  // bound, while stopping, or at the root, which has no parent.
  virtual bool send_up(Message& message) = 0;
  // To a child, after the news of the tree's changes waiting to go down.
  virtual void send_to_child(std::size_t child, Message& message) = 0;

  // ---- a child's connection ----
  // Cuts child `child` off: `why` goes to it as a Shutdown if `say_why` (else the
  // link is aborted: a peer taken for lost is told nothing it might wait on), the
  // link is closed, and if `fence` the process this node started for it, if any, is
  // killed (a hung process must not wake up and act in a healed tree). Its loss
  // follows as for any closed link.
  virtual void cut_child(std::size_t child, const std::string& why, bool say_why, bool fence) = 0;
  // The parent is taken for lost: `last` (a failure report telling it so) goes if the
  // socket takes it at once, and the link is aborted; the node becomes an orphan.
  virtual void cut_parent(Message& last, const std::string& why) = 0;
  // A service stops (or resumes) reading from child `child`, apart from the
  // back-pressure of the way up: the link is read while neither holds it. The child
  // counts as heard from meanwhile (transport::Link::last_received).
  virtual void hold_reading(std::size_t child, bool hold) = 0;

  // ---- a child's lifecycle (the launch service) ----
  // The one funnel for a child's state (logged).
  virtual void set_child_state(std::size_t child, ChildState next, std::string_view why, bool warn = false) = 0;
  // `process` is child `child`'s process; the core watches it and reports its exit.
  virtual void attach_process(std::size_t child, std::unique_ptr<ChildProcess> process) = 0;
  // Child `child` did not come up (it could not be started, or did not connect in
  // time): it is gone, its process killed if running, and no loss is reported for
  // it by the core (the launch service reports the launch failure).
  virtual void give_up_child(std::size_t child, std::string_view why) = 0;
  // The subtree is up; launching -> running.
  virtual void subtree_up() = 0;
  // At the root (and on the way down): the listening ports of the tree's commnodes
  // are known; set in the topology and sent to every child, so that every process
  // gets them (an orphan needs them to reach an adopter).
  virtual void publish_endpoints(const std::map<Rank, std::uint16_t>& endpoints) = 0;

  // ---- the program around this process ----
  // A public event (include/canopy/event.h) for the program: the front-end's
  // Network::next_event(), a back-end's Backend::next_event(). The one way any event
  // reaches it; stamped with the time now unless it has a time (and, of kind service,
  // with this process's rank).
  virtual void publish(Event event) = 0;
  // Whether a program reads what publish() is given: where none does (a simulated
  // process), a service need not build what only an event would carry.
  virtual bool publishes() const = 0;

  // ---- connecting ----
  // Dials process `rank` of the tree (core/dial.h): striped where the topology says,
  // else plain (always plain with `plain`). Keep the Dial while it is under way:
  // dropping it abandons the connection. An error at once when the rank cannot be
  // reached at all (unknown, no port yet, its host does not resolve).
  virtual Result<Dial> dial(Rank rank, bool plain, DialDone done) = 0;

  // ---- adoption (the recovery service) ----
  // While orphaned: asks the process at the other end of `link` (a connected
  // potential adopter) to adopt this node, under a fresh incarnation. On acceptance
  // the core makes the link the parent, signals Adopted (services send their
  // state), sends the held-back output, floods the adoption report and calls `done`
  // with the timings; on refusal or failure it calls `done` with the reason. `done`
  // is not called if the node stops first, or after cancel_adoption().
  virtual void request_adoption(std::shared_ptr<transport::Link> link, Rank candidate,
                                std::function<void(Result<Adoption>)> done) = 0;
  // Gives up the adoption request under way, if any (the link is closed).
  virtual void cancel_adoption() = 0;
  // `link`, connected to `acceptor` (this node's first potential adopter), becomes
  // the standby link (FaultToleranceOptions::standby_links): the hello goes with
  // `standby` set and its proof; the acceptor keeps the link idle. Replaces any
  // standby link before it.
  virtual void open_standby(std::shared_ptr<transport::Link> link, Rank acceptor) = 0;
  // The acceptor at the other end of the standby link, if one is open.
  virtual std::optional<Rank> standby() const = 0;
  virtual void close_standby(std::string_view why) = 0;
  // While orphaned: asks the acceptor of the standby link, which must be
  // `candidate`, to adopt this node, as request_adoption() does on a new connection.
  // False if there is no open standby link to `candidate` whose handshake is done.
  virtual bool request_adoption_on_standby(Rank candidate, std::function<void(Result<Adoption>)> done) = 0;

  // ---- back-end messages (the membership service) ----
  // A check every message from a back-end child passes before it is dispatched; a
  // message it refuses is dropped (the gate logs and counts it). One gate per node.
  using Gate = std::function<bool(const Peer& from)>;
  virtual void set_gate(Gate gate) = 0;
  // The epoch this node writes on its messages (a back-end's member epoch).
  virtual void set_epoch(std::uint32_t epoch) = 0;

  // Orderly stop of the whole subtree.
  virtual void shutdown(const std::string& reason) = 0;

  // ---- healing on and off (the requests service) ----
  // Whether this node heals: fault tolerance on at launch (the plan) and healing not
  // switched off since. Off, losing the parent stops the node with its subtree, and
  // orphans asking for adoption are refused for good (they stop too).
  virtual bool healing() const = 0;
  // Switches healing on or off from now on (a no-op for on when the plan has fault
  // tolerance off); the standby link closes when it goes off.
  virtual void set_healing(bool on) = 0;

 protected:
  ~ServiceContext() = default;
};

}  // namespace canopy::core
