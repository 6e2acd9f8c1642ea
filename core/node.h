// Node: the core of one Canopy process, whatever its role.
//
// A node has an optional parent link (absent at the front-end) and a table of
// children (empty at a back-end). The core owns what every protocol relies on:
//   - links: listening, the hello handshake (launch and adoption), closing;
//   - the child table, with one logged funnel for every change of a child's state;
//   - routing: up to the parent (held back while orphaned), to a child, down
//     towards a back-end, flooding to every peer but the sender;
//   - the node's phase (launching, running, orphaned, stopping, stopped), one
//     explicit state with per-phase data, changed only by set_phase() (logged);
//   - the live tree (TreeView), kept current by failure and adoption reports that
//     the core floods and applies in one total order on every process.
// Everything else is a service (core/service.h): the core hands each service its
// own messages and the node's events, and includes no service.
//
// All methods run on the io_context's thread; nothing here is thread-safe.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "canopy/topology.h"
#include "core/backend_part.h"
#include "core/children.h"
#include "core/connections.h"
#include "core/folded_part.h"
#include "core/healing.h"
#include "core/held_adoptions.h"
#include "core/held_output.h"
#include "core/listener.h"
#include "core/live_tree.h"
#include "core/parent_link.h"
#include "core/plan.h"
#include "core/service.h"
#include "core/service_context.h"
#include "core/service_table.h"
#include "core/tree_news.h"
#include "core/up_handshakes.h"
#include "transport/fabric.h"
#include "transport/link.h"
#include "transport/refusal_log.h"

namespace canopy::core {

namespace asio = boost::asio;

class Node final : public ServiceContext, private transport::LinkHandler {
 public:
  // What the program around the node hears of it beyond its services.
  class Observer {
   public:
    virtual ~Observer() = default;
    // The node has stopped (shut down, or lost its parent) and every child process
    // it started has exited. `reason` says why. Called once.
    virtual void on_stopped(const std::string& reason) {}
    // Every event of the node, after its services have had it.
    virtual void on_event(const NodeEvent& event) {}
    // A public event, from the core or a service (ServiceContext::publish): the one
    // route by which the program hears of failures, adoptions, recoveries, views and
    // the events of its own services.
    virtual void on_public(const Event& event) {}
    // The link to the parent holds more than kUpstreamHighWater bytes (true), or is
    // back at kUpstreamLowWater (false): a back-end's send() waits meanwhile.
    virtual void on_upstream_full(bool full) {}
  };

  // Back-pressure on the way up (docs/protocol.md, "Resource bounds").
  static constexpr std::size_t kUpstreamHighWater = 16u << 20;
  static constexpr std::size_t kUpstreamLowWater = 4u << 20;
  bool upstream_full() const { return upstream_full_; }
  // The front-end's way up is its program: while the program's inbox is full, the
  // root reads its children no more, as a commnode does when its parent's link is
  // full (docs/protocol.md, "Back-pressure"). Nothing at other nodes.
  void hold_outlet(bool full) {
    if (is_root()) set_upstream_full(full);
  }

  // `observer` is borrowed, may be null, and must outlive the node. So is `fabric`:
  // given (canopy-sim), the node listens and connects over it, not over sockets
  // (transport/fabric.h).
  Node(asio::io_context& io, NodeIdentity identity, Observer* observer = nullptr,
       transport::Fabric* fabric = nullptr);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Registers a service (borrowed; it must outlive the node). Before start only.
  // Events reach services in the order they were added, each after those it names
  // in Service::runs_after() (core/service_table.h). Two services with one id, or a
  // circle of runs_after(), are a programming error: refused with an error.
  Result<void> add_service(Service& service);

  // Front-end: listens, then signals Started (the launch service starts the
  // children).
  Result<void> start_as_root(Topology topology, LaunchPlan plan);
  // Commnode or back-end: connects to the parent and says hello; Started follows
  // once the parent's topology has arrived.
  Result<void> start_as_child(const ParentLink& parent);
  // A front-end re-attaching to a tree that outlived its front-end
  // (FaultToleranceOptions::keep_tree_for), its identity the lost front-end's rank
  // and the network's id and secret: asks the process at the other end of `link`,
  // `acceptor`, to take this node as its parent. Only the process promoted in the
  // root's place accepts (the others refuse, saying why); it sends the topology and
  // the live tree, then its services' state (state composition) and what it held
  // back. `done` is called once: with success when the topology has arrived (Started
  // follows at once, then the node runs with the acceptor as its child), or with the
  // reason of a refusal or a lost link (the node is unchanged: ask another).
  void reattach(std::shared_ptr<transport::Link> link, Rank acceptor, std::function<void(Result<void>)> done);
  // Whether this node stopped (or is stopping) in order: shut down here or by its
  // parent's shutdown. False when it stopped for a failure (its parent lost without
  // healing, no adopter, left the tree, no front-end within the grace period): the
  // commnode's exit status says which (0 or 1).
  bool stopped_in_order() const;
  // This front-end read that a child took it for lost, and left the tree
  // (docs/fault-tolerance.md, "A stopped front-end").
  bool declared_lost() const;
  // True while nothing waits to be written on this node's links (the parent's and
  // every connected child's): a message sent now leaves at once, and would not be
  // coalesced with others. The libraries' caller-thread fast path sends inline only
  // then; a burst goes through the loop's thread, which coalesces it.
  bool links_idle() const;
  // How long a stopping node whose subtree is `height` levels deep gives its
  // children before killing them; parents always wait longer than their children.
  static std::chrono::milliseconds stop_grace_for_height(std::size_t height);
  // To the parent and every connected child, except the peer `except` (if any). News
  // `about` a process goes to a back-end child only if its part of the tree holds
  // that process (it would drop it: docs/scale.md).
  void flood(Message& message, const transport::Link* except = nullptr, std::optional<Rank> about = std::nullopt);
  // Messages of live-tree news this node has received (failure reports, adoption
  // reports, batches of them: a batch counts once); for tests and diagnostics.
  std::size_t news_received() const { return news_received_; }
  // Whether this process holds its part of the tree folded (core/folded_part.h): a
  // back-end, since nothing has read its tree since it arrived or since it was
  // folded again; a commnode, once its subtree has been up a while. For tests and
  // diagnostics.
  bool part_folded() const { return folded_ != nullptr; }
  // A part unfolded (to heal, or read) is folded again once nothing has read it for
  // this long, with the process running.
  static constexpr std::chrono::seconds kFoldAgainAfter{2};
  // Whether it knows where every commnode of the tree it holds listens (an orphan
  // needs its adopters' ports), without unfolding a folded part.
  bool knows_every_port() const;
  // How many standby links other processes keep to this node.
  std::size_t standbys_accepted() const { return connections_.count<Connections::Standby>(); }
  // How many probes of an orphan's parent this node has made (one per parent for
  // all the requests held at once); for tests and diagnostics.
  std::size_t parent_probes() const { return held_if_made() ? held_if_made()->probes() : 0; }

  // ---- ServiceContext (core/service_context.h) ----
  asio::io_context& io() override { return io_; }
  const NodeIdentity& identity() const override { return id_; }
  Phase phase() const override { return static_cast<Phase>(phase_.index()); }
  bool promoted() const override;
  const LaunchPlan& plan() const override { return plan_; }
  const Topology* topology() const override {
    unfold();
    return topology_.get();
  }
  const TreeView* live_tree() const override {
    unfold();
    return tree_ ? &tree_->view() : nullptr;
  }
  Rank parent_rank() const override;
  std::uint32_t parent_incarnation() const override;
  Rank root_rank() const override;
  std::optional<TreeView::Place> own_place() const override;
  const ChildTable& children() const override { return children_; }
  const transport::Link* parent_link() const override { return parent_.get(); }
  std::uint16_t listen_port() const override { return connections_.port(); }
  std::string describe(Rank rank) const override;
  std::optional<std::size_t> route_to(Rank backend) const override;
  bool send_up(Message& message) override;
  void send_to_child(std::size_t child, Message& message) override;
  void cut_child(std::size_t child, const std::string& why, bool say_why, bool fence) override;
  void cut_parent(Message& last, const std::string& why) override;
  void hold_reading(std::size_t child, bool hold) override;
  void set_child_state(std::size_t child, ChildState next, std::string_view why, bool warn = false) override;
  void attach_process(std::size_t child, std::unique_ptr<ChildProcess> process) override;
  void give_up_child(std::size_t child, std::string_view why) override;
  void subtree_up() override;
  void publish_endpoints(const std::map<Rank, std::uint16_t>& endpoints) override;
  Result<Dial> dial(Rank rank, bool plain, DialDone done) override;
  void publish(Event event) override;
  bool publishes() const override { return observer_ != nullptr; }
  void request_adoption(std::shared_ptr<transport::Link> link, Rank candidate,
                        std::function<void(Result<Adoption>)> done) override;
  void cancel_adoption() override;
  void open_standby(std::shared_ptr<transport::Link> link, Rank acceptor) override;
  std::optional<Rank> standby() const override;
  void close_standby(std::string_view why) override;
  bool request_adoption_on_standby(Rank candidate, std::function<void(Result<Adoption>)> done) override;
  void set_gate(Gate gate) override { gate_ = std::make_unique<Gate>(std::move(gate)); }
  void set_epoch(std::uint32_t epoch) override { id_.epoch = epoch; }
  void shutdown(const std::string& reason) override;
  bool healing() const override { return plan_.fault.enabled && healing_on_; }
  void set_healing(bool on) override;
 private:
  // The live-tree news on its way down, made with its filters when first needed
  // (core/healing.h).
  TreeNews& news();
  struct Launching {};
  struct Running {};
  struct OrphanState {
    Rank failed_parent = 0;
    std::unique_ptr<Timer> deadline;  // adoption_timeout
    // The adoption request under way: link, candidate and continuation.
    std::shared_ptr<transport::Link> trying;
    Rank trying_rank = 0;
    std::function<void(Result<Adoption>)> done;
    HeldOutput held;  // upward messages, until adoption
    // The heir of a lost root (events::Promoted): it looks for no adopter; the
    // deadline is the tree's grace period (keep_tree_for).
    bool promoted = false;
  };
  // On the heap, made as the node is orphaned: every process held its 120 bytes in
  // place, for a phase it is rarely in (docs/scale.md, "A back-end's own state").
  struct Orphaned {
    std::unique_ptr<OrphanState> state = std::make_unique<OrphanState>();
  };
  struct Stopping {
    std::string reason;
    bool in_order = false;        // shut down, not stopped for a failure (stopped_in_order())
    std::unique_ptr<Timer> grace;  // then the children still running are killed
  };
  struct Stopped {
    std::string reason;
    bool in_order = false;
    bool declared_lost = false;  // a front-end a child took for lost (declared_lost())
    bool notified = false;
    std::unique_ptr<Timer> farewell;  // the parent link's goodbye, bounded
  };
  using PhaseData = std::variant<Launching, Running, Orphaned, Stopping, Stopped>;
  void set_phase(PhaseData next, std::string_view why);
  // The orphan's state while orphaned, null otherwise.
  OrphanState* orphan() {
    auto* o = std::get_if<Orphaned>(&phase_);
    return o ? o->state.get() : nullptr;
  }
  const OrphanState* orphan() const { return const_cast<Node*>(this)->orphan(); }

  void emit(const NodeEvent& event);
  bool dispatch(const Peer& from, wire::Message::Body::Reader body);
  void deliver_to_service(const Peer& from, wire::Message::Body::Service::Reader envelope);

  // Every link of the node hands its messages and its close here, and they go on by
  // the purpose it was started with (Link::purpose): one pointer a link, where two
  // std::function handlers were 64 bytes of each (docs/scale.md).
  enum LinkPurpose : std::uint8_t { kUpLink, kAcceptedLink, kReattachLink };
  void on_link_message(transport::Link& link, capnp::MessageReader& message) override;
  void on_link_closed(transport::Link& link, std::string_view reason) override;

  Result<void> listen();
  void accept_link(std::shared_ptr<transport::Link> link);
  std::size_t max_pending() const;
  void on_accepted_message(const transport::Link* link, capnp::MessageReader& message);
  void on_accepted_closed(const transport::Link* link, std::string_view reason);
  void on_child_message(std::size_t child, const transport::Link* link, wire::Message::Reader message);
  void on_hello(const std::shared_ptr<transport::Link>& link, wire::Message::Reader msg);
  void on_hello_proof(const std::shared_ptr<transport::Link>& link, wire::Message::Reader msg);
  void admit(const std::shared_ptr<transport::Link>& link, wire::Hello::Reader hello);
  void accept_orphan(const std::shared_ptr<transport::Link>& link, wire::Hello::Reader hello);
  bool orphan_may_be_adopted(const OrphanRequest& request) const;
  void adopt_orphan(const OrphanRequest& request);
  void review_held_adoptions();
  // A message on a link up (parent or potential adopter), its handshake first
  // (core/up_handshakes.h).
  void on_up_message(const transport::Link* link, capnp::MessageReader& message);
  void on_up_closed(const transport::Link* link, std::string_view reason);
  void accept_rejoin(std::size_t index, const std::shared_ptr<transport::Link>& link, wire::Hello::Reader hello);
  void accept_newcomer(const std::shared_ptr<transport::Link>& link, wire::Hello::Reader hello);
  // Open attach: a join asked for (incarnation 0 in an adoption report) goes up to the
  // root, which decides, first come first served; a refusal comes down (node_join.cpp).
  void on_join_request(Rank rank, Rank under, const transport::Link* from);
  void refuse_joining(Rank rank, const std::string& why);
  void admit_joining(Rank rank, bool rejoined);
  void take_link(std::size_t index, const std::shared_ptr<transport::Link>& link);
  void accept_standby(const std::shared_ptr<transport::Link>& link, wire::Hello::Reader hello);
  // A proved hello of a front-end re-attaching (role front-end): only a promoted
  // node takes it, as its parent (node_reattach.cpp, with the front-end's side).
  void accept_frontend(const std::shared_ptr<transport::Link>& link, wire::Hello::Reader hello);
  void on_reattach_message(const transport::Link* link, capnp::MessageReader& message);
  void on_reattach_closed(const transport::Link* link, std::string_view reason);
  void reattach_failed(const std::string& why);
  void on_standby_message(const transport::Link* link, wire::Message::Reader message);
  // The topology and the plan, to a child (or a re-attached front-end) `to` of
  // `role`: a back-end gets its part of the tree (core/backend_part.h), if the part
  // holds it (a back-end that joined under another commnode before, in open attach,
  // gets the whole); a commnode its own (Topology::part), where the plan says
  // (LaunchPlan::commnode_parts).
  void send_topology(transport::Link& link, Role role, Rank to);
  // This node's subtree as its live tree has it, rooted here (Topology::make_subtree),
  // and, where commnodes hold parts, in an orphan's request for adoption that subtree
  // and its ancestors (wire::Hello.subtree, .ancestors), in a standby link's hello
  // its ancestors (the acceptor may not hold it, but holds its parent).
  std::optional<Topology> live_subtree() const;
  void fill_adoption(wire::Hello::Builder hello) const;
  // An orphan's subtree, held below `under` where the live tree lacks it (an orphan
  // not held here, or held without its children); false if it conflicts with what
  // is held. Mostly only the adopter needs it: an orphan chooses among the children
  // of its ancestors, so the adopter's parent is an ancestor of the orphan and holds
  // its subtree, as every process above does; unless the adopter was adopted since,
  // where the orphan did not hear of it. Then the subtree goes up with the report.
  bool graft(const Topology& subtree, Rank under);
  // The live tree's and the topology's part of graft(), also as a part unfolds.
  bool hold_graft(const Topology& subtree, Rank under);
  // Where commnodes hold parts: whether child `child` hears a failure of `about`
  // (`failure`) or its adoption (docs/scale.md, "Who hears of a change").
  bool hears_of(Rank child, Rank about, bool failure) const;
  // Where commnodes hold parts: the one child whose part alone holds `rank` (its
  // subtree does), or TreeView::kNone when every child's part holds it (a child of
  // this node or of an ancestor, the root) or parts are not used (docs/scale.md,
  // "A commnode folds its part").
  Rank only_part_holding(Rank rank) const;
  // Holds `topology` and the live tree of it, and adds its children to the child
  // table; hold_topology() holds it alone (a part unfolded: the children are in the
  // table already).
  void adopt_topology(Topology topology);
  void hold_topology(Topology topology);
  void on_topology(wire::Topology::Reader t);
  // Ports learnt after the topology, from the parent: set and sent on to the children
  // as publish_endpoints() does (protocol version 6).
  void on_endpoints(wire::Endpoints::Reader endpoints);

  void attach_parent(std::shared_ptr<transport::Link> link);
  void on_parent_message(capnp::MessageReader& message);
  void on_parent_closed(std::string_view reason);
  void set_upstream_full(bool full);
  void on_trying_message(capnp::MessageReader& message);
  void on_trying_closed(std::string_view reason);
  void become_orphan(const std::string& reason);
  // Orphaned, and no longer looking for an adopter: this node stands in the root's
  // place (`reason`: how the root was lost). Stops the tree once `grace` has passed
  // without a front-end.
  void promote(std::chrono::milliseconds grace, const std::string& reason);
  void remove_reattach_file();
  void taken_for_lost(const std::string& reason);
  // Orphaned and looking for an adopter (not promoted): such a node adopts no one.
  bool seeking_adopter() const { return phase() == Phase::orphaned && !promoted(); }
  void adopted_by(wire::Adopted::Reader adopted);

  void on_child_closed(std::size_t child, std::string_view reason);
  void on_child_exit(std::size_t child, int status);
  void finish_child_loss(std::size_t child);
  void on_failure_report(Rank rank, const std::string& reason, const transport::Link* from,
                         std::optional<std::uint32_t> incarnation = std::nullopt);
  void abandon(const std::string& reason, bool declared_lost = false);
  // `orphan_is_commnode`: as the report says, for a back-end that does not hold the
  // orphan in its part of the tree.
  // `subtree`: the orphan's, going up where an ancestor may not hold it (Node::graft).
  void on_attach_report(Rank orphan, Rank adopter, std::uint32_t incarnation, const transport::Link* from,
                        bool orphan_is_commnode = false, const Topology* subtree = nullptr);

  // Stops the node and its subtree (nothing if it is stopping already); `in_order`:
  // shut down, not for a failure.
  void begin_stop(const std::string& reason, bool in_order = false);
  void check_stopped();
  void notify_stopped();

  asio::io_context& io_;
  NodeIdentity id_;
  Observer* observer_;
  transport::Fabric* fabric_;  // null: sockets
  ServiceTable services_;
  PhaseData phase_;

  // The tree this node holds, folded (a back-end's part, until something reads it:
  // core/folded_part.h) or not.
  bool knows_tree() const { return topology_ != nullptr || folded_ != nullptr; }
  // Unfolds a folded part; what reads the tree calls it first. Const, as reading is.
  void unfold() const {
    if (folded_) const_cast<Node*>(this)->unfold_part();
    else if (fold_timer_armed_) const_cast<Node*>(this)->part_read_ = true;
  }
  void unfold_part();
  // Folds an unfolded part again (kFoldAgainAfter; core/folded_part.h): an adopted
  // back-end held its part unfolded for ever.
  void fold_part_later();
  void fold_part();
  // The tree, unfolded; precondition: knows_tree().
  LiveTree& tree() {
    unfold();
    return *tree_;
  }
  const LiveTree& tree() const {
    unfold();
    return *tree_;
  }
  Topology& topo() {
    unfold();
    return *topology_;
  }
  const Topology& topo() const {
    unfold();
    return *topology_;
  }

  LaunchPlan plan_;
  // On the heap, as the folded part is: a folded back-end holds neither.
  std::unique_ptr<Topology> topology_;
  // What back-end children get of topology_: made at the first use, so never at a
  // back-end (56 bytes there before).
  std::unique_ptr<BackendPart> backend_part_;
  BackendPart& backend_part();
  std::unique_ptr<LiveTree> tree_;  // the live tree, with failure and adoption reports applied
  std::unique_ptr<FoldedPart> folded_;  // its part, folded: topology_ and tree_ are empty
  // While a part is unfolded: the part as it came (and the ports learnt), to fold it
  // again (fold_part), once its timer finds nothing read it meanwhile.
  std::unique_ptr<FoldedPart> refold_;
  Timer fold_timer_;
  bool fold_timer_armed_ = false;
  bool part_read_ = false;  // read since the fold timer was armed
  // Here, not by what they are about, so that the node's flags share one word.
  bool upstream_full_ = false;  // reading from the children is paused (parent_)
  // Healing switched on (the default) or off while the tree runs (the front-end's
  // Network::set_healing): off, an orphan stops with its subtree and an adopter
  // refuses orphans, as with fault tolerance off.
  bool healing_on_ = true;

  std::shared_ptr<transport::Link> parent_;
  Connections connections_;  // every link but the parent's, in its state, and the listener (core/connections.h)

  ChildTable children_;
  std::unique_ptr<Gate> gate_;  // set only where back-end children may be (32 bytes in place before)
  // Links up, standby, re-attach, held adoptions, tree news (core/healing.h): made
  // when first needed and given back once it holds nothing, as it does not at a
  // back-end once its parent's handshake is done (docs/scale.md, "A back-end's own
  // state").
  std::unique_ptr<Healing> healing_;
  Healing& healer();
  // Gives healing_ back if it holds nothing.
  void shed_healer();
  TreeNews* news_if_made() { return healing_ ? healing_->news_if_made() : nullptr; }
  const HeldAdoptions* held_if_made() const { return healing_ ? healing_->held_if_made() : nullptr; }
  // A message on a link this node dialled, while the link's handshake may be under
  // way: false if the handshake took it (UpHandshakes::on_message).
  bool handshake_read(const transport::Link* link, capnp::MessageReader& message);
  std::size_t news_received_ = 0;  // messages of live-tree news received (a batch counts once)
};

}  // namespace canopy::core
