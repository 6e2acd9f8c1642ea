// Node: the runtime of one Canopy process, whatever its role.
//
// A node has an optional parent link (absent at the front-end) and a set of child
// links (empty at a back-end). Everything that travels up goes to the parent, or,
// at the root, to the observer (the front-end library); everything that travels down
// goes to the children, or, at a leaf, to the observer (the back-end library). A
// commnode is a node with both and no observer of its own.
//
// All methods run on the io_context's thread; nothing here is thread-safe.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "canopy.capnp.h"
#include "canopy/packet.h"
#include "canopy/topology.h"
#include "core/process.h"
#include "core/tree_view.h"
#include "filters/filter.h"
#include "transport/link.h"
#include "transport/striped_link.h"

namespace canopy::core {

namespace asio = boost::asio;

struct NodeIdentity {
  Rank rank = 0;
  Role role = Role::backend;
  std::uint64_t network_id = 0;
  std::uint32_t incarnation = 0;
};

// How every process watches its peers and heals the tree (docs/fault-tolerance.md).
struct FaultConfig {
  bool enabled = true;
  std::chrono::milliseconds heartbeat{500};          // idle links carry a heartbeat this often
  std::chrono::milliseconds suspect{2000};           // silent this long: suspect
  std::chrono::milliseconds lost{5000};              // silent this long: lost
  std::chrono::milliseconds adoption_timeout{30000}; // an orphan gives up after this long
};

// What an orphan reports once it has been adopted and has compensated.
struct RecoveryReport {
  Rank orphan = 0;
  Rank adopter = 0;
  Rank failed_parent = 0;
  std::uint32_t incarnation = 0;
  std::chrono::microseconds choose{0}, connect{0}, compensate{0}, cleanup{0};
  std::uint32_t attempts = 0;
  std::vector<StreamId> incomplete_streams;
};

// How a parent starts its children. Sent down with the topology.
struct LaunchPlan {
  std::string commnode_exe;                 // absolute path of canopy-commnode
  std::vector<std::string> backend_argv;    // back-end program and its arguments
  std::string launcher = "ssh {host} {command}";
  std::chrono::milliseconds startup_timeout{30000};
  bool attach = false;                      // back-ends attach themselves; not launched
  FaultConfig fault;
};

struct StreamSpec {
  StreamId id = 0;
  std::vector<Rank> backends;               // the communicator, ascending
  std::string upstream_filter = "sum";
  Packet upstream_params;
  SyncMode sync = SyncMode::wait_for_all;
  std::chrono::milliseconds sync_timeout{100};  // time_out mode
  std::string downstream_filter;            // "" = none
  Packet downstream_params;
};

// Reads the sync "filter" parameter: one positive integer, the time-out in ms.
Result<std::chrono::milliseconds> sync_timeout_param(const Packet& params);

// What the process above the node hears. Called on the io_context's thread.
class NodeObserver {
 public:
  virtual ~NodeObserver() = default;
  // Root only:
  virtual void on_launched(Rank rank) {}
  virtual void on_launch_failed(Rank rank, const std::string& reason) {}
  virtual void on_ready() {}
  virtual void on_node_lost(Rank rank, const std::string& reason) {}
  virtual void on_stream_ack(StreamId stream, const std::string& error) {}
  virtual void on_stream_error(StreamId stream, const std::string& error) {}
  virtual void on_request_ack(std::uint64_t request, const std::string& error) {}
  virtual void on_adoption(Rank orphan, Rank adopter, std::uint32_t incarnation) {}
  virtual void on_recovered(const RecoveryReport& report) {}
  virtual void on_upstream(StreamId stream, Packet&& packet) {}
  // Leaf only:
  virtual void on_downstream(StreamId stream, Packet&& packet) {}
  // Any node: the node has stopped (shut down, or lost its parent) and every child
  // process it started has exited. `reason` says why.
  virtual void on_stopped(const std::string& reason) {}
};

// Environment variables through which a parent tells a child who it is.
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
// Reads CANOPY_PARENT ("address:port") and, if set, CANOPY_PARENT_LINK; the error
// names the variable and what is wrong with it.
Result<ParentLink> parent_link_from(const char* parent, const char* parent_link);

class Node {
 public:
  // `filters` and `observer` are borrowed and must outlive the node; observer may be
  // null (a commnode).
  Node(asio::io_context& io, NodeIdentity identity, filters::FilterRegistry& filters,
       NodeObserver* observer);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Front-end: listens, then launches its children. Progress and the outcome arrive
  // through the observer (on_launched, on_ready or on_launch_failed).
  Result<void> start_as_root(Topology topology, LaunchPlan plan);

  // Commnode or back-end: connects to the parent and says hello (a commnode listens
  // once the topology arrives).
  Result<void> start_as_child(const ParentLink& parent);

  // Root: creates a stream in the subtrees holding its back-ends; the observer's
  // on_stream_ack reports the outcome.
  void create_stream(const StreamSpec& spec);
  // Root: sends a packet down a stream, to all its back-ends or to one.
  void send_down(StreamId stream, const Packet& packet, std::optional<Rank> destination);
  // Root: loads a filter plugin in every node that has children, this one included;
  // on_request_ack reports the outcome.
  void load_filter(std::uint64_t request, const std::string& path, const std::string& name);
  // Root: new parameters for one filter of a stream at every node of the stream;
  // on_request_ack reports the outcome.
  void set_params(std::uint64_t request, StreamId stream, FilterSlot slot, const Packet& params);
  // Leaf: sends a packet up a stream.
  void send_up(StreamId stream, Packet packet);
  // Leaf: sends a packet to another back-end through the nearest common ancestor.
  void send_to_backend(Rank destination, StreamId stream, Packet packet);
  // Orderly stop of the whole subtree; on_stopped follows.
  void shutdown(const std::string& reason);

  const std::optional<Topology>& topology() const { return topology_; }
  const std::optional<TreeView>& view() const { return view_; }

  // How long a stopping node whose subtree is `height` levels deep gives its
  // children before killing them; parents always wait longer than their children.
  static std::chrono::milliseconds stop_grace_for_height(std::size_t height);
  const NodeIdentity& identity() const { return id_; }
  bool is_root() const { return id_.role == Role::frontend; }

 private:
  enum class ChildState : std::uint8_t { starting, connected, ready, gone };
  // The event detection service's view of a connected peer.
  enum class PeerState : std::uint8_t { alive, suspect, lost };
  static const char* peer_state_name(PeerState state);
  static const char* state_name(ChildState state);
  struct Child {
    Rank rank;
    Role role;
    ChildState state = ChildState::starting;
    std::shared_ptr<transport::Link> link;
    std::unique_ptr<ChildProcess> process;
    std::optional<int> exit_status;
    std::string close_reason;      // set when the link closed; loss reported later
    bool loss_reported = false;
    bool adopted = false;          // joined as an orphan, not started by this node
    PeerState peer = PeerState::alive;
    std::unique_ptr<asio::steady_timer> loss_timer;
  };
  struct Stream {
    StreamSpec spec;
    std::vector<std::size_t> members;            // participating children (indexes)
    std::vector<std::deque<Packet>> queues;      // one per member
    std::size_t nonempty = 0;                    // members with a queued packet
    std::unique_ptr<filters::Filter> filter;      // upstream
    std::unique_ptr<filters::Filter> downstream;  // null: packets pass unchanged
    std::vector<Packet> wave, output;             // reused by run_waves: no allocation per wave
    std::vector<std::size_t> awaiting_ack;       // member children yet to ack
    std::string ack_error;
    std::unique_ptr<asio::steady_timer> wave_timer;  // time_out mode: closes a partial wave
    bool timer_armed = false;
  };
  // An orphan looking for a new parent.
  struct Orphanhood {
    explicit Orphanhood(asio::io_context& io) : retry(io), deadline(io), attempt(io) {}
    Rank failed = 0;
    std::chrono::steady_clock::time_point since, connect_start;
    std::chrono::microseconds choose{0};
    std::vector<Rank> candidates;
    std::size_t next = 0;
    std::uint32_t attempts = 0;
    Rank trying_rank = 0;
    std::shared_ptr<transport::Link> trying;
    std::unique_ptr<asio::ip::tcp::socket> socket;  // a plain connection under way
    bool striped_connecting = false;                // a striped connection under way
    std::uint64_t attempt_id = 0;                   // the striped connection under way; 0: none
    asio::steady_timer retry, deadline, attempt;
    // Upward messages held back until adoption (copies of whole protocol messages).
    std::vector<kj::Array<capnp::word>> held;
    std::size_t held_bytes = 0;
    std::vector<StreamId> overflowed;  // streams whose held output had to be dropped
  };
  // A request from the root that every node of a subtree carries out and acks.
  struct Request {
    std::vector<std::size_t> awaiting;  // children yet to ack
    std::string error;
  };

  class Message;  // an outgoing protocol message

  Result<void> listen();
  Result<void> listen_on(const std::vector<asio::ip::address>& addresses, std::uint16_t port);
  void accept_next(asio::ip::tcp::acceptor& acceptor);
  void accept_link(std::shared_ptr<transport::Link> link);
  void send_hello(transport::Link& link, bool adopt);
  void adopter_connected(Rank candidate, std::shared_ptr<transport::Link> link);
  void on_accepted_message(const transport::Link* link, wire::Message::Reader msg);
  void on_accepted_closed(const transport::Link* link, std::string_view reason);
  void on_hello(const std::shared_ptr<transport::Link>& link, wire::Message::Reader msg);
  void on_parent_message(wire::Message::Reader msg);
  void on_child_message(std::size_t index, wire::Message::Reader msg);
  void on_child_closed(std::size_t index, std::string_view reason);
  void on_child_exit(std::size_t index, int status);
  void finish_child_loss(std::size_t index);

  void adopt_topology(Topology topology);
  void launch_children();
  Result<void> launch_child(Child& child);
  void on_startup_timeout();
  void check_subtree_ready();

  void open_stream(const StreamSpec& spec);
  void deliver_down(StreamId stream, wire::DataPacket::Reader packet);
  void forward_down(StreamId stream, const Packet& packet, std::optional<Rank> destination);
  void accept_upstream(std::size_t child, StreamId stream, Packet packet);
  void run_waves(Stream& stream);
  void run_partial_wave(StreamId id);
  void arm_wave_timer(Stream& stream);
  void emit_wave(Stream& stream);
  void loosen_waves();
  void route_point_to_point(wire::DataPacket::Reader packet);
  void do_load_filter(std::uint64_t request, const std::string& path, const std::string& name);
  void do_set_params(std::uint64_t request, StreamId stream, FilterSlot slot, const Packet& params);
  void start_request(std::uint64_t request, std::vector<std::size_t> children, std::string error,
                     const std::function<void(Message&)>& fill);
  void request_acked(std::uint64_t request, std::size_t child, const std::string& error);
  void report_request_ack(std::uint64_t request, const std::string& error);

  // ---- fault tolerance ----
  void attach_parent(std::shared_ptr<transport::Link> link);
  void on_parent_closed(std::string_view reason);
  void start_heartbeats();
  void heartbeat_tick();
  void watch_peer(transport::Link& link, PeerState& state, const std::string& who,
                  std::chrono::steady_clock::time_point now);
  void accept_orphan(const std::shared_ptr<transport::Link>& link, wire::Hello::Reader hello);
  void join_stream(std::size_t child, const StreamSpec& spec);
  Result<void> make_filters(Stream& stream);
  void become_orphan(const std::string& reason);
  void start_adoption_round();
  void try_next_adopter();
  void on_adopted(wire::Adopted::Reader adopted);
  void on_failure_report(Rank rank, const std::string& reason, const transport::Link* from);
  void on_adoption_report(Rank orphan, Rank adopter, std::uint32_t incarnation, const transport::Link* from);
  void update_routes(Rank orphan);
  void flood(Message& message, const transport::Link* except);
  void report_recovered(const RecoveryReport& report);
  void write_stream_spec(wire::StreamCreate::Builder c, const StreamSpec& spec) const;
  void drop_member(Stream& stream, std::size_t child);

  void report_launched(Rank rank);
  void report_launch_failed(Rank rank, const std::string& reason);
  void report_node_lost(Rank rank, const std::string& reason);
  void report_stream_ack(StreamId stream, const std::string& error);
  void report_stream_error(StreamId stream, const std::string& error);
  void report_upstream(StreamId stream, const Packet& packet);
  void send_to_parent(Message& message);
  void send_topology(transport::Link& link, bool update);
  std::string describe(Rank rank) const;

  void begin_stop(const std::string& reason);
  std::size_t subtree_height() const;
  void check_stopped();
  void notify_stopped();

  asio::io_context& io_;
  NodeIdentity id_;
  filters::FilterRegistry& filters_;
  NodeObserver* observer_;

  std::optional<Topology> topology_;
  std::optional<TreeView> view_;             // the live tree, with failure and adoption reports applied
  std::unique_ptr<Orphanhood> orphan_;       // set while the parent is lost and no adopter found
  std::uint64_t striped_attempts_ = 0;       // numbers striped connections to adopters
  PeerState parent_peer_ = PeerState::alive;
  asio::steady_timer heartbeat_timer_;
  bool heartbeats_started_ = false;
  LaunchPlan plan_;
  std::shared_ptr<transport::Link> parent_;
  // One listening socket per NIC address of this host, all on listen_port_; every
  // connection goes to striped_acceptor_, which hands plain ones back.
  std::vector<asio::ip::tcp::acceptor> acceptors_;
  std::unique_ptr<transport::StripedAcceptor> striped_acceptor_;
  std::uint16_t listen_port_ = 0;
  std::vector<std::shared_ptr<transport::Link>> pending_;  // accepted, no hello yet
  std::unordered_map<const transport::Link*, std::size_t> child_of_link_;
  // Closes an accepted connection that has not said hello in time.
  std::unordered_map<const transport::Link*, std::unique_ptr<asio::steady_timer>> hello_deadlines_;

  std::vector<Child> children_;                      // topology order
  std::unordered_map<Rank, std::size_t> child_index_;
  std::unordered_map<Rank, std::size_t> route_;      // back-end rank -> child index
  std::map<Rank, std::uint16_t> endpoints_;          // subtree commnode listen ports
  asio::steady_timer startup_timer_;
  bool ready_reported_ = false;

  std::unordered_map<StreamId, Stream> streams_;
  std::unordered_map<std::uint64_t, Request> requests_;

  bool stopping_ = false;
  bool stopped_ = false;
  bool stop_notified_ = false;
  std::string stop_reason_;
  asio::steady_timer stop_timer_;
};

}  // namespace canopy::core
