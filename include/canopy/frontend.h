// The front-end API: launch a Canopy tree, open streams, send down, receive results.
//
//   auto topology = canopy::generate_topology("b:4^2");
//   canopy::LaunchOptions options{.topology = *topology, .backend_argv = {"/path/to/be"}};
//   auto network = canopy::Network::launch(std::move(options));
//   if (!network) { std::cerr << network.error() << "\n"; return 1; }
//   auto stream = (*network)->create_stream({.upstream_filter = "sum"});
//   (*network)->broadcast(*stream, canopy::Packet{1, {}});
//   auto result = (*network)->receive(std::chrono::seconds(5));
//
// Every method is thread-safe. The network's event loop has a thread of its own,
// and runs on the caller's thread while it waits in receive() (a broadcast made
// while nothing else is being written goes out on the caller's thread too): a round
// trip wakes no second thread (docs/architecture.md, "Threads"). Destroying the
// Network shuts the tree down and leaves no process behind.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "canopy/event.h"
#include "canopy/fault_tolerance.h"
#include "canopy/packet.h"
#include "canopy/result.h"
#include "canopy/stream.h"
#include "canopy/topology.h"
#include "canopy/traffic.h"
#include "canopy/view.h"

namespace canopy {

// How the processes of the tree are started (docs/launch.md).
enum class LaunchMethod : std::uint8_t {
  // Each parent starts its children: a local process, or the launcher template
  // (ssh, srun -w {host}, ...) for another host, one command per child.
  spawn,
  // Inside a Slurm allocation, the front-end starts every process not on its
  // parent's host itself, one srun step per level of the tree (tasks placed on their topology hosts, which must be
  // the allocation's node names; canopy run --tree spreads a generated tree over
  // them, see slurm.h).
  slurm,
  // Where no Slurm is present, the same with one Open MPI `mpirun` per level (a
  // rank file places the tasks; mpirun reaches other hosts as it is configured to,
  // ssh by default).
  mpirun,
};

struct LaunchOptions {
  Topology topology;
  LaunchMethod method = LaunchMethod::spawn;
  // The back-end program and its arguments, started once per back-end of the tree.
  // It must use Canopy::backend (canopy::Backend::connect()).
  std::vector<std::string> backend_argv;
  // Appends MRNet's five arguments to each back-end's command line, after
  // backend_argv's: its parent's host and port, its parent's rank, its own host and
  // its own rank, for back-ends written for MRNet (docs/mrnet.md). The back-end still
  // connects as any Canopy back-end does (Backend::connect()).
  bool mrnet_backend_args = false;
  // The commnode program. Default: $CANOPY_COMMNODE, else canopy-commnode next to
  // the running executable, else canopy-commnode from PATH.
  std::string commnode_exe;
  // How a parent starts a child on another host; {host} and {command} are replaced.
  std::string launcher = "ssh {host} {command}";
  // The address the front-end listens on and its children are told (numeric, one of
  // this host's). Empty: the topology's address for its host, if it gives one; else
  // its host name's, unless that is a loopback address and processes run on other
  // hosts: then the address this host reaches them from (docs/launch.md, "Which
  // address the children are told"). `canopy run --advertise`.
  std::string advertise;
  // How long each parent waits for its children to connect.
  std::chrono::milliseconds startup_timeout{10000};
  // Called, on the thread that runs the network's event loop, each time a process
  // comes up: (up, total).
  std::function<void(std::size_t, std::size_t)> on_progress;

  // Attach mode: the back-ends of the topology are not started by Canopy. launch()
  // starts the commnodes, writes `attach_file` (docs/attach.md), and returns; the
  // back-ends, started by someone else (e.g. inside the ranks of an MPI job), call
  // Backend::attach(attach_file, rank). The file is removed again by shutdown()
  // (and the destructor). Use wait_for_backends() before creating
  // streams. Empty = normal mode: every back-end is started by its parent.
  std::string attach_file;
  // Attach mode, open (docs/attach.md, "Open attach"): back-ends the topology does
  // not name may join too, as MRNet's attach mode lets them: each under a rank of its
  // own below kFirstInternalRank (not one the tree has), under any commnode with no
  // commnode below it (the attach file lists them), at any time. The topology may then
  // have no back-ends at all. A stream created without a list of back-ends is made of
  // those attached at that moment.
  bool open_attach = false;

  // With fault_tolerance.keep_tree_for: where launch() writes the re-attach file
  // (network id, secret, every commnode's endpoint; mode 0600), with which a new
  // front-end can carry on if this one dies (Network::reattach). Removed again by an
  // orderly shutdown(). Empty: none is written.
  std::string reattach_file;

  // What each back-end holds of the tree (docs/scale.md). By default its part: its
  // ancestors and their children, with their endpoints (what it needs to find an
  // adopter), so that a launch sends each back-end O(fan-out x depth) bytes whatever
  // the tree's size; Backend::status() then lists only that part. True: every
  // back-end holds the whole tree, as MRNet's do (its NetworkTopology on a back-end
  // sets this, and so does mrnet_backend_args). The gossip detector needs the whole
  // tree and turns it on.
  bool whole_tree_at_backends = false;

  // How the tree detects failures and heals (docs/fault-tolerance.md), and the
  // gossip detector among the back-ends (docs/gossip.md): with gossip off here, the
  // topology's `gossip:` settings apply, if it has them (to launch without gossip
  // from such a topology, clear them: topology.set_gossip(std::nullopt)).
  FaultToleranceOptions fault_tolerance;
};

// How a new front-end re-attaches to a tree that outlived its own
// (FaultToleranceOptions::keep_tree_for; docs/fault-tolerance.md).
struct ReattachOptions {
  // The re-attach file the lost front-end wrote (LaunchOptions::reattach_file). The
  // new front-end keeps it, and removes it at its own orderly shutdown.
  std::string reattach_file;
  // How long to look for the process that stands in the root's place and receive
  // its state.
  std::chrono::milliseconds timeout{10000};
};

class Network {
 public:
  // Launches the tree and returns once every process is up, or fails with an error
  // naming a node that did not come up and why. Nothing is left running on failure.
  static Result<std::unique_ptr<Network>> launch(LaunchOptions options);
  // Re-attaches a new front-end to a tree whose front-end was lost, within the grace
  // period it was launched with: asks each commnode of the re-attach file, in rank
  // order, to take it as its parent, in rounds every 200 ms until options.timeout
  // (the tree may not have found its front-end lost yet); the one promoted in the
  // root's place accepts. It
  // returns once that process has sent the topology, the live tree, the membership
  // view and the state of every stream: receive() then gives, first, each
  // state-recoverable stream's output regenerated from the whole tree's state (the
  // complete union so far, say), then what the tree held back meanwhile, then new
  // results; next_event() gives frontend_lost, promoted and reattached (with
  // timings), and a stream that is not state recoverable is reported by receive() as
  // an error (it may have lost data). Streams created from now on get new ids. The
  // front-end must run on the lost front-end's host (it listens there for orphans).
  static Result<std::unique_ptr<Network>> reattach(ReattachOptions options);
  ~Network();

  const Topology& topology() const;

  // Loads filter `name` (symbol canopy_filter_<name>) from the shared object `path`
  // in the front-end and every commnode, so that streams can name it. Back-ends load
  // it only when a stream uses it as a state-recoverable upstream filter (they keep
  // its state over their own packets; docs/filters.md, "Where filters run"). `path`
  // must be valid on every host that loads it. Fails, naming each node and its reason, if any node could not
  // load it; the tree keeps running either way. Loading the same file and name
  // again is harmless.
  Result<void> load_filter(const std::string& path, const std::string& name);

  // Healing on or off from now on, at every process; returns once each has switched.
  // Off, a lost commnode ends its subtree (its back-ends stop and leave the view, and
  // receive() reports the loss), as when the tree was launched without fault
  // tolerance; on again, the tree heals once more. Turning it on fails for a tree
  // launched without fault tolerance (FaultToleranceOptions::enabled).
  Result<void> set_healing(bool on);

  // What every process of the tree has sent and received since it started (frames,
  // as its links carry them: canopy/traffic.h), summed, and the most any one process
  // sent and received; gathered by a request down the tree, which it counts too.
  // Processes lost meanwhile are not counted (`processes` says how many are).
  Result<TreeTraffic> traffic();

  // Attach mode: waits until every back-end of the topology has attached, or fails
  // after `timeout` naming the back-ends that have not.
  Result<void> wait_for_backends(std::chrono::milliseconds timeout);

  // Creates a stream over `options.backends` and waits until every node of it has
  // acknowledged. Errors name the node and the problem (unknown filter, rank...).
  Result<StreamId> create_stream(const StreamOptions& options = {});

  // Changes the parameters of one of a stream's filters at every node of the stream;
  // returns once every node has applied them, or with the nodes that refused them.
  Result<void> set_filter_params(StreamId stream, FilterSlot slot, const Packet& params);

  // Sends `packet` down `stream` to all its back-ends, or to one.
  Result<void> broadcast(StreamId stream, const Packet& packet);
  Result<void> send_to(StreamId stream, Rank backend, const Packet& packet);

  // The next aggregated packet, waiting at most `timeout`: nothing if the time ran
  // out; an error if data was lost (a commnode without fault tolerance, or a
  // recovered stream whose filter is not state recoverable; the error names the
  // node and why), a filter failed, or the network has stopped. A back-end that
  // fails is not an error: it leaves the membership view (next_event, view()) and
  // the streams go on with the others.
  Result<std::optional<Received>> receive(std::chrono::milliseconds timeout);
  // What has already arrived, if anything, without running the network (no system
  // call): to take the rest of a batch after a receive() without polling for more.
  Result<std::optional<Received>> try_receive();

  // Readable while receive() would return at once (for poll/epoll users).
  int event_fd() const;

  // The next failure, adoption, recovery or view event, waiting at most `timeout`.
  // With fault tolerance on, the loss of a commnode is an event, not an error: the
  // tree heals and, for state-recoverable filters, no aggregated data is lost. The
  // loss of a back-end is a failure event and then a new membership view
  // (Event::Kind::view, docs/membership.md), once every process holds it.
  std::optional<Event> next_event(std::chrono::milliseconds timeout);
  // Readable while next_event() would return at once (for poll/epoll users).
  int events_fd() const;

  // The membership view: the live back-ends, as of which view (docs/membership.md).
  // The newest view, which may not be acknowledged by every process yet.
  View view() const;

  // The live tree: every process with its current parent, children, incarnation
  // and whether it is alive; the root first, then breadth-first, then lost ones.
  std::vector<NodeStatus> status() const;

  // Whether this front-end was taken for lost by a child (it was stopped longer than
  // `lost` where the child could not see its process) and has left the tree, which
  // went on under an heir for keep_tree_for: receive() then fails with `stopped`, the
  // re-attach file is kept, and a front-end may re-attach (reattach()) within the
  // grace period (docs/fault-tolerance.md, "A stopped front-end").
  bool replaced() const;

  // Tears the tree down: every commnode and back-end exits. Idempotent. A replaced
  // front-end's tree is not its own any more: it is left running.
  Result<void> shutdown();

 private:
  struct Impl;
  explicit Network(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace canopy
