#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>
#include <thread>

#include "canopy/frontend.h"
#include "core/attach_file.h"
#include "core/codec.h"
#include "core/listener.h"
#include "core/log.h"
#include "core/reachable.h"
#include "core/loop_thread.h"
#include "core/process.h"
#include "services/runtime.h"
#include "transport/random.h"
#include "transport/tcp_link.h"
#include "launch_checks.h"
#include "programs.h"

namespace canopy {

namespace {

using Clock = std::chrono::steady_clock;
using frontend::absolute_program;
using frontend::find_commnode;
using frontend::on_path;
using frontend::self_directory;

// A TCP connection to `address`:`port` within `timeout`, as a descriptor, or why not.
Result<int> connect_within(const std::string& address, std::uint16_t port, std::chrono::milliseconds timeout) {
  boost::system::error_code ec;
  const auto ip = boost::asio::ip::make_address(address, ec);
  if (ec) return Error{"address '" + address + "': " + ec.message()};
  const boost::asio::ip::tcp::endpoint endpoint(ip, port);
  const int fd = ::socket(endpoint.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error{std::string("socket: ") + std::strerror(errno)};
  auto failed = [fd](const std::string& why) {
    ::close(fd);
    return Error{why};
  };
  if (::connect(fd, endpoint.data(), endpoint.size()) != 0 && errno != EINPROGRESS) {
    return failed(std::strerror(errno));
  }
  pollfd p{fd, POLLOUT, 0};
  int n;
  do {
    n = ::poll(&p, 1, static_cast<int>(timeout.count()));
  } while (n < 0 && errno == EINTR);
  if (n == 0) return failed("no answer within " + std::to_string(timeout.count()) + " ms");
  int error = 0;
  socklen_t length = sizeof error;
  if (n < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return failed(std::strerror(errno));
  if (error != 0) return failed(std::strerror(error));
  return fd;
}

}  // namespace

// The root's runtime reports to Impl, on the loop thread, through the observer
// interfaces of the node and of each service.
struct Network::Impl final : core::Node::Observer,
                             services::LaunchService::Observer,
                             services::StreamService::Observer,
                             services::RequestService::Observer {
  // A new network's front-end (a fresh id and secret), or, with `given`, the
  // front-end of a network that exists (re-attaching).
  explicit Impl(LaunchOptions opts, std::optional<core::NodeIdentity> given = std::nullopt)
      : options(std::move(opts)) {
    healing = options.fault_tolerance.enabled;
    if (given) {
      identity = *given;
    } else {
      identity.network_id = transport::random_u64();
      identity.secret = core::new_secret();
      identity.rank = options.topology.root().rank;
    }
    identity.role = Role::frontend;
    runtime = std::make_unique<services::Runtime>(
        loop.io(), identity, filters,
        services::Observers{.node = this, .launch = this, .streams = this, .requests = this});
  }

  ~Impl() override {
    // Stop the loop first: the node is only ever touched on it.
    loop.stop();
    runtime.reset();
  }

  // ---- NodeObserver, on the loop thread ----
  void on_launched(Rank rank) override {
    std::size_t up;
    {
      std::lock_guard lock(mutex);
      launched.insert(rank);
      up = launched.size() + 1;  // and the front-end itself
      changed.notify_all();      // wait_for_backends() counts them
    }
    if (options.on_progress) options.on_progress(up, options.topology.size());
  }
  void on_launch_failed(Rank, const std::string& reason) override {
    std::lock_guard lock(mutex);
    if (launch_error.empty()) launch_error = reason;
    changed.notify_all();
  }
  void on_ready() override {
    std::lock_guard lock(mutex);
    ready = true;
    changed.notify_all();
  }
  // Every public event (ServiceContext::publish), in the order the tree gave them.
  void on_public(const Event& public_event) override {
    Event event = public_event;
    if (event.kind == Event::Kind::failure) {
      const auto* node = options.topology.find(event.rank);
      // A lost commnode is healed; a lost back-end leaves the membership view
      // (on_view), and the streams go on with the others.
      if (node && node->role != Role::backend && !healing) {
        inbox.push(Error{"lost " + event.reason + "; results from now on are incomplete", ErrorKind::disconnected});
      }
    } else if (event.kind == Event::Kind::reattached) {
      // A re-attached front-end: how the tree outlived the one before it. Its streams
      // that are not state recoverable may have lost data. (What a commnode's recovery
      // cost a stream is told by its waves, each delivered complete or flagged: no
      // error stands in for them, docs/fault-tolerance.md, "Waves after a failure".)
      event.connect = reattach_connect;
      for (StreamId s : event.incomplete_streams) {
        inbox.push(Error{"stream " + std::to_string(s) + " may have lost data: the front-end was lost (" +
                             promotion_reason + "), and the stream's filter is not state recoverable (or "
                             "its output outgrew what the promoted root held back)",
                         ErrorKind::disconnected});
      }
    } else if (event.kind == Event::Kind::frontend_lost) {
      promotion_reason = event.reason;
    }
    events.push(std::move(event));
    if (public_event.kind == Event::Kind::reattached) {  // the last of the promotion's three
      std::lock_guard lock(mutex);
      promotion_heard = true;
      changed.notify_all();
    }
  }
  void on_stream_ack(StreamId stream, const std::string& error) override {
    std::lock_guard lock(mutex);
    acks[stream] = error;
    changed.notify_all();
  }
  void on_request_ack(std::uint64_t request, const std::string& error) override {
    std::lock_guard lock(mutex);
    request_acks[request] = error;
    changed.notify_all();
  }
  void on_traffic(std::uint64_t request, const TreeTraffic& t) override {
    std::lock_guard lock(mutex);
    traffic_answers[request] = t;
  }
  void on_stream_error(StreamId stream, const std::string& error) override {
    inbox.push(Error{"stream " + std::to_string(stream) + ": " + error});
  }
  void on_upstream(StreamId stream, Packet&& packet, const services::WaveVerdict& wave) override {
    // The program's inbox is the root's way up: above kInboxHigh the front-end reads
    // its children no more (as a commnode whose parent's link is full), until the
    // program has taken it down to kInboxLow. Not while the program waits on the tree
    // itself (an acknowledgement, a request's answer): that would wait for ever.
    const std::size_t cost = inbox_cost(packet);
    if (inbox_bytes.fetch_add(cost) + cost > kInboxHigh && !inbox_full.load() && waiting_on_tree.load() == 0) {
      inbox_full = true;
      runtime->node.hold_outlet(true);
    }
    inbox.push(Received{.stream = stream, .packet = std::move(packet), .view = runtime->membership.view_id(),
                        .wave = wave.wave, .holds = wave.holds, .complete = wave.complete});
  }
  void on_stopped(const std::string& reason) override {
    {
      std::lock_guard lock(mutex);
      stopped = true;
      // Taken for lost and replaced by an heir: the re-attach file is the next
      // front-end's way in, and the heir removes it when its grace period ends.
      replaced = runtime->node.declared_lost();
      changed.notify_all();
    }
    inbox.push(Error{"network stopped: " + reason, ErrorKind::stopped});
  }

  // Waits for `predicate` (checked under `mutex`) until `deadline`; false on
  // time-out. Runs the loop on this thread meanwhile when it is lent, else waits on
  // `changed`.
  template <typename P>
  bool wait_until(Clock::time_point deadline, P predicate) {
    ++waiting_on_tree;
    struct Done {
      std::atomic<int>& n;
      ~Done() { --n; }
    } done{waiting_on_tree};
    if (inbox_full.load()) open_outlet();
    if (auto hold = loop.try_hold(); hold && !hold->nested()) {
      return loop.run_until(
          [&] {
            std::lock_guard lock(mutex);
            return predicate();
          },
          deadline);
    }
    loop.kick();
    std::unique_lock lock(mutex);
    return changed.wait_until(lock, deadline, predicate);
  }

  // What receive() and try_receive() give for what the inbox gave.
  Result<std::optional<Received>> received(std::optional<std::variant<Received, Error>> item) {
    if (!item) return std::optional<Received>();
    if (auto* error = std::get_if<Error>(&*item)) {
      std::lock_guard lock(mutex);
      if (error->kind == ErrorKind::stopped) stop_reported = true;
      return *error;
    }
    auto& got = std::get<Received>(*item);
    const std::size_t cost = inbox_cost(got.packet);
    if (inbox_bytes.fetch_sub(cost) - cost < kInboxLow && inbox_full.load()) open_outlet();
    return std::optional<Received>(std::move(got));
  }

  // The memory a packet holds in the inbox: payload, values, and the entry.
  static std::size_t inbox_cost(const Packet& packet) {
    return core::packet_payload_bytes(packet) + packet.size() * sizeof(Value) + sizeof(Received) + 32;
  }
  // Reading the children again (on the loop): the program has taken the inbox down,
  // or waits on the tree.
  void open_outlet() {
    loop.post([this] {
      if (!inbox_full.exchange(false)) return;
      runtime->node.hold_outlet(false);
    });
  }

  std::string describe_missing() {
    std::lock_guard lock(mutex);
    std::string out;
    std::size_t missing = 0;
    for (const auto& n : options.topology.nodes()) {
      if (!n.parent || launched.count(n.rank)) continue;
      if (attach() && n.role == Role::backend) continue;
      if (++missing <= 5) {
        out += (out.empty() ? "" : ", ") + std::string(to_string(n.role)) + " " + std::to_string(n.rank) +
               " on " + n.host;
      }
    }
    if (missing > 5) out += " and " + std::to_string(missing - 5) + " more";
    return out.empty() ? "every process connected, but not every subtree reported ready" : "not up: " + out;
  }

  bool attach() const { return !options.attach_file.empty(); }

  // The caller-thread fast path of a send: runs `send` on this thread when it runs
  // the loop, or can hold it while every link is idle (the packet leaves at once);
  // false otherwise, and the caller posts it to the thread that runs the loop,
  // which coalesces a burst.
  template <typename Send>
  bool send_here(Send send) {
    auto hold = loop.try_hold();
    if (!hold || (!hold->nested() && !runtime->node.links_idle())) return false;
    send();
    return true;
  }

  // Sends a request down the tree and waits for the whole tree's answer.
  Result<void> request(const std::function<void(std::uint64_t)>& post, const std::string& what) {
    std::uint64_t id;
    {
      std::lock_guard lock(mutex);
      if (stopped) return Error{"the network has stopped", ErrorKind::stopped};
      id = next_request++;
    }
    post(id);
    auto deadline = Clock::now() + options.startup_timeout;
    bool acked = wait_until(deadline, [&] { return request_acks.count(id) || stopped; });
    std::lock_guard lock(mutex);
    if (!acked) return Error{what + ": not acknowledged by every node within " +
                             std::to_string(options.startup_timeout.count()) + " ms"};
    auto it = request_acks.find(id);
    if (it == request_acks.end()) return Error{what + ": the network stopped", ErrorKind::stopped};
    std::string error = std::move(it->second);
    request_acks.erase(it);
    if (!error.empty()) return Error{what + " failed: " + error};
    return {};
  }

  // Back-end ranks that have not attached yet, as ranges ("0-3, 7").
  std::string missing_backends() {
    std::vector<Rank> missing;
    {
      std::lock_guard lock(mutex);
      for (Rank b : options.topology.backends()) {
        if (!launched.count(b)) missing.push_back(b);
      }
    }
    std::string out;
    for (std::size_t i = 0; i < missing.size();) {
      std::size_t j = i;
      while (j + 1 < missing.size() && missing[j + 1] == missing[j] + 1) ++j;
      out += (out.empty() ? "" : ", ") + std::to_string(missing[i]) +
             (j > i ? "-" + std::to_string(missing[j]) : "");
      i = j + 1;
    }
    return out;
  }

  bool all_backends_attached() {
    for (Rank b : options.topology.backends()) {
      if (!launched.count(b)) return false;
    }
    return true;
  }

  // Re-attaching: asks commnode `c` to take this front-end as its parent; nothing if
  // it did, else why not.
  std::optional<std::string> ask_to_reattach(const attach::CommnodeEntry& c, Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const auto start = Clock::now();
    auto fd = connect_within(c.address, c.port, std::clamp(left, std::chrono::milliseconds(1),
                                                           std::chrono::milliseconds(1000)));
    if (!fd) return fd.error();
    {
      std::lock_guard lock(mutex);
      reattach_outcome.reset();
    }
    loop.call([&] {
      boost::asio::ip::tcp::socket socket(loop.io());
      boost::system::error_code ec;
      socket.assign(boost::asio::ip::make_address(c.address).is_v6() ? boost::asio::ip::tcp::v6()
                                                                        : boost::asio::ip::tcp::v4(),
                    *fd, ec);
      if (ec) {
        ::close(*fd);
        std::lock_guard lock(mutex);
        reattach_outcome = Error{ec.message()};
        return;
      }
      runtime->node.reattach(transport::TcpLink::create(std::move(socket)), c.rank, [this, start](Result<void> outcome) {
        std::lock_guard lock(mutex);
        reattach_connect = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
        reattach_outcome = std::move(outcome);
        changed.notify_all();
      });
    });
    if (!wait_until(deadline, [&] { return reattach_outcome.has_value(); })) return std::string("no answer");
    std::lock_guard lock(mutex);
    if (*reattach_outcome) return std::nullopt;
    return reattach_outcome->error();
  }

  LaunchOptions options;
  core::NodeIdentity identity;
  filters::FilterRegistry filters = filters::FilterRegistry::with_builtins();
  core::LoopThread loop;
  std::unique_ptr<services::Runtime> runtime;
  core::Inbox<std::variant<Received, Error>> inbox;
  core::Inbox<Event> events;

  std::mutex mutex;
  std::condition_variable changed;
  std::set<Rank> launched;
  std::string launch_error;
  bool ready = false;
  bool stopped = false;
  bool stop_reported = false;  // receive() has returned the "network stopped" error
  bool shut_down = false;
  bool attach_file_written = false;  // removed again at shutdown: it holds the secret
  bool reattach_file_written = false;  // the same
  bool replaced = false;  // a child took this front-end for lost (Node::declared_lost)
  // Healing on (fault tolerance at launch, and not switched off since: set_healing).
  std::atomic<bool> healing{false};
  // The inbox's bound (on_upstream): bytes of packets in it, whether the children
  // are held for it, and how many callers wait on the tree (then they are not).
  static constexpr std::size_t kInboxHigh = 16u << 20, kInboxLow = 4u << 20;
  std::atomic<std::size_t> inbox_bytes{0};
  std::atomic<bool> inbox_full{false};
  std::atomic<int> waiting_on_tree{0};
  // Re-attaching: the outcome of the request to the commnode asked, from the first
  // connection to the topology, and whether the heir's report has arrived.
  std::optional<Result<void>> reattach_outcome;
  std::chrono::microseconds reattach_connect{0};
  std::string promotion_reason;  // the lost front-end's (frontend_lost), for the re-attached event
  bool promotion_heard = false;
  std::map<StreamId, std::string> acks;
  std::map<std::uint64_t, std::string> request_acks;
  std::map<std::uint64_t, TreeTraffic> traffic_answers;  // before their request_acks
  StreamId next_stream = 1;
  std::uint64_t next_request = 1;
};

Network::Network(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Network::~Network() {
  if (impl_) (void)shutdown();
}

Result<std::unique_ptr<Network>> Network::launch(LaunchOptions options) {
  if (auto checked = frontend::check_launch_options(options); !checked) {
    return Error{checked.error(), checked.error_kind()};
  }
  const bool attach = !options.attach_file.empty();
  core::init_logging(Role::frontend, options.topology.root().rank);
  // An address of the front-end that its children on other hosts can reach, in the
  // topology every process gets (core/reachable.h).
  auto reachable = core::choose_reachable_address(options.topology, options.topology.root().rank, options.advertise);
  if (!reachable) return Error{reachable.error(), reachable.error_kind()};
  for (const auto& note : *reachable) core::log().info("{}", note);
  options.commnode_exe = absolute_program(find_commnode(options.commnode_exe));
  const auto& root = options.topology.root();
  const bool local_commnode = std::any_of(root.children.begin(), root.children.end(), [&](Rank r) {
    const auto& child = options.topology.at(r);
    return child.role == Role::commnode && child.host == root.host;
  });
  if (local_commnode && options.commnode_exe.find('/') == std::string::npos && !on_path(options.commnode_exe)) {
    return Error{"cannot find the commnode program '" + options.commnode_exe + "': it is not next to " +
                     self_directory() + " nor on PATH; set CANOPY_COMMNODE to its path (or LaunchOptions::commnode_exe)",
                 ErrorKind::invalid_input};
  }
  std::vector<std::string> programs{options.commnode_exe};
  if (!attach) {
    options.backend_argv[0] = absolute_program(options.backend_argv[0]);
    programs.push_back(options.backend_argv[0]);
  }
  for (const auto& program : programs) {
    if (program.find('/') != std::string::npos && access(program.c_str(), X_OK) != 0) {
      return Error{"cannot run '" + program + "': " + std::strerror(errno), ErrorKind::invalid_input};
    }
  }

  core::LaunchPlan plan;
  plan.commands.set().commnode_exe = options.commnode_exe;
  plan.commands.set().backend_argv = options.backend_argv;
  plan.mrnet_backend_args = options.mrnet_backend_args;
  plan.commands.set().launcher = options.launcher;
  plan.startup_timeout = options.startup_timeout;
  plan.attach = attach;
  plan.open_attach = options.open_attach;
  plan.bulk = options.method != LaunchMethod::spawn;
  plan.bulk_tool = options.method == LaunchMethod::mpirun ? core::LaunchPlan::BulkTool::mpirun
                                                           : core::LaunchPlan::BulkTool::srun;
  if (plan.bulk) {
    const auto task = std::filesystem::path(options.commnode_exe).parent_path() / "canopy-bulk-task";
    if (access(task.c_str(), X_OK) != 0) {
      return Error{"a bulk launch runs " + task.string() + " on the nodes: " + std::strerror(errno),
                   ErrorKind::invalid_input};
    }
  }
  plan.fault = options.fault_tolerance;
  // A member's gossip pauses while the tree between it and a peer heals: it needs the
  // whole tree (membership/gossip.h). Back-ends written for MRNet hold it, as MRNet's do.
  plan.whole_tree = options.whole_tree_at_backends || options.mrnet_backend_args ||
                    plan.fault.gossip.schedule != GossipSchedule::off;
  if (!options.reattach_file.empty()) plan.commands.set().reattach_file = std::filesystem::absolute(options.reattach_file).string();
  auto depth = std::max<std::size_t>(1, options.topology.depth());
  auto deadline = Clock::now() + options.startup_timeout * depth + std::chrono::seconds(2);

  // Before the loop's thread starts: growing the table of descriptors of a process
  // with threads waits for an RCU grace period (core/listener.h).
  core::reserve_listener_descriptor();
  std::unique_ptr<Network> network(new Network(std::make_unique<Impl>(std::move(options))));
  Impl& impl = *network->impl_;
  if (auto& on_progress = impl.options.on_progress) on_progress(1, impl.options.topology.size());
  core::log().info("launching {} processes", impl.options.topology.size());
  auto started = impl.loop.call([&] { return impl.runtime->node.start_as_root(impl.options.topology, plan); });
  if (!started) {
    (void)network->shutdown();
    return Error{"cannot start the front-end: " + started.error()};
  }
  bool done = impl.wait_until(deadline, [&] { return impl.ready || !impl.launch_error.empty(); });
  std::string error;
  {
    std::lock_guard lock(impl.mutex);
    if (!impl.launch_error.empty()) error = "launch failed: " + impl.launch_error;
  }
  if (error.empty() && !done) {
    error = "launch timed out after " +
            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                               impl.options.startup_timeout * depth + std::chrono::seconds(2)).count()) +
            " ms; " + impl.describe_missing();
  }
  if (!error.empty()) {
    core::log().error("{}", error);
    (void)network->shutdown();
    return Error{error};
  }
  // The topology with the listening ports chosen at start-up.
  impl.options.topology = impl.loop.call([&] { return *impl.runtime->node.topology(); });
  // The files that hold the secret (either may be asked for), removed again by shutdown().
  const auto& topology = impl.options.topology;
  const auto& id = impl.identity;
  struct SecretFile {
    const std::string& path;
    std::string text;
    const char* what;
    bool& written;
  };
  for (SecretFile f : {SecretFile{impl.options.reattach_file, attach::reattach_file_text(topology, id.network_id, id.secret),
                                  "re-attach file", impl.reattach_file_written},
                       SecretFile{impl.options.attach_file, attach::attach_file_text(topology, id.network_id, id.secret,
                                                                                     impl.options.open_attach),
                                  "attach file", impl.attach_file_written}}) {
    if (f.path.empty()) continue;
    if (auto ok = attach::write_secret_file(f.path, f.text, f.what); !ok) {
      (void)network->shutdown();
      return Error{ok.error()};
    }
    f.written = true;
  }
  if (attach) {
    core::log().info("commnodes up; attach file {} written", impl.options.attach_file);
    return network;
  }
  core::log().info("network up: {} processes", impl.options.topology.size());
  return network;
}

Result<std::unique_ptr<Network>> Network::reattach(ReattachOptions options) {
  auto file = attach::read_attach_file(options.reattach_file);
  if (!file) return Error{file.error(), ErrorKind::invalid_input};
  if (!file->frontend || file->commnodes.empty()) {
    return Error{options.reattach_file + " is not a re-attach file: it has no 'frontend' and 'commnode' lines (an "
                                         "attach file, for back-ends?)",
                 ErrorKind::invalid_input};
  }
  core::init_logging(Role::frontend, *file->frontend);
  LaunchOptions launch_options;
  launch_options.startup_timeout = options.timeout;
  launch_options.reattach_file = options.reattach_file;
  core::NodeIdentity identity{.rank = *file->frontend, .network_id = file->network_id, .secret = file->secret};
  core::reserve_listener_descriptor();  // before the loop's thread (as launch())
  std::unique_ptr<Network> network(new Network(std::make_unique<Impl>(std::move(launch_options), identity)));
  Impl& impl = *network->impl_;
  const auto deadline = Clock::now() + options.timeout;
  std::string refusals;
  bool accepted = false;
  // The heir is a commnode, most often the lowest-ranked live child of the lost
  // front-end: each is asked in rank order; the others refuse, saying why. Until the
  // time-out, rounds follow every 200 ms: the tree may not have found its front-end
  // lost yet (a hung one takes `lost` to be), nor promoted its heir.
  for (int round = 0; !accepted && Clock::now() < deadline; ++round) {
    if (round > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    refusals.clear();
    for (const auto& c : file->commnodes) {
      if (Clock::now() >= deadline) break;
      auto refused = impl.ask_to_reattach(c, deadline);
      if (!refused) {
        accepted = true;
        break;
      }
      refusals += "; " + std::to_string(c.rank) + ": " + *refused;
    }
  }
  auto give_up = [&](const std::string& why) {
    core::log().error("{}", why);
    (void)network->shutdown();
    return Error{why};
  };
  if (!accepted) {
    return give_up("no process of the tree took this front-end (" + (refusals.empty() ? "none asked" : refusals.substr(2)) +
                   "); has the tree's grace period (keep_tree_for) run out?");
  }
  // The heir's state, then its report, follow the topology.
  if (!impl.wait_until(deadline, [&] { return impl.promotion_heard || impl.stopped; })) {
    return give_up("re-attached, but the heir did not send its state within " +
                   std::to_string(options.timeout.count()) + " ms");
  }
  impl.options.topology = impl.loop.call([&] { return *impl.runtime->node.topology(); });
  const auto streams = impl.loop.call([&] { return impl.runtime->streams.stream_ids(); });
  std::lock_guard lock(impl.mutex);
  if (impl.stopped) return Error{"re-attached, but the tree stopped", ErrorKind::stopped};
  if (!streams.empty()) impl.next_stream = streams.back() + 1;  // the tree's streams keep their ids
  impl.ready = true;
  impl.reattach_file_written = true;  // kept for the next front-end; removed at an orderly shutdown
  core::log().info("re-attached: {} processes, {} streams", impl.options.topology.size(), streams.size());
  return network;
}

const Topology& Network::topology() const { return impl_->options.topology; }

Result<void> Network::load_filter(const std::string& path, const std::string& name) {
  Impl& impl = *impl_;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Error{"cannot load filter '" + name + "': no file " + path, ErrorKind::invalid_input};
  std::string absolute = absolute_program(path.find('/') == std::string::npos ? "./" + path : path);
  return impl.request(
      [&](std::uint64_t id) {
        impl.loop.run_or_post([&impl, id, absolute, name] { impl.runtime->requests.load_filter(id, absolute, name); });
      },
      "loading filter '" + name + "' from " + absolute);
}

Result<void> Network::set_healing(bool on) {
  Impl& impl = *impl_;
  if (on && !impl.options.fault_tolerance.enabled) {
    return Error{"cannot turn healing on: this tree was launched without fault tolerance (--no-healing); launch it "
                 "with fault tolerance, and turn healing off and on as needed",
                 ErrorKind::invalid_input};
  }
  // Off from now on here first: a commnode lost from now on is reported as data lost.
  if (!on) impl.healing = false;
  auto done = impl.request(
      [&](std::uint64_t id) { impl.loop.run_or_post([&impl, id, on] { impl.runtime->requests.set_healing(id, on); }); },
      std::string("turning healing ") + (on ? "on" : "off"));
  if (done && on) impl.healing = true;
  return done;
}

Result<TreeTraffic> Network::traffic() {
  Impl& impl = *impl_;
  std::uint64_t asked = 0;
  auto done = impl.request(
      [&](std::uint64_t id) {
        asked = id;
        impl.loop.run_or_post([&impl, id] { impl.runtime->requests.traffic(id); });
      },
      "gathering the traffic");
  std::lock_guard lock(impl.mutex);
  auto it = impl.traffic_answers.find(asked);
  if (it == impl.traffic_answers.end()) return done ? Error{"gathering the traffic: no answer"} : Error{done.error()};
  TreeTraffic out = it->second;
  impl.traffic_answers.erase(it);
  if (!done) return Error{done.error()};
  return out;
}

Result<void> Network::wait_for_backends(std::chrono::milliseconds timeout) {
  Impl& impl = *impl_;
  bool done = impl.wait_until(Clock::now() + timeout, [&] { return impl.all_backends_attached() || impl.stopped; });
  {
    std::lock_guard lock(impl.mutex);
    if (impl.stopped) return Error{"the network has stopped", ErrorKind::stopped};
  }
  if (done) return {};
  return Error{"back-ends did not attach within " + std::to_string(timeout.count()) +
               " ms: missing ranks " + impl.missing_backends()};
}

Result<void> Network::set_filter_params(StreamId stream, FilterSlot slot, const Packet& params) {
  Impl& impl = *impl_;
  if (slot == FilterSlot::sync) {
    if (auto ok = services::sync_timeout_param(params); !ok) return Error{ok.error(), ErrorKind::invalid_input};
  }
  return impl.request(
      [&](std::uint64_t id) {
        impl.loop.run_or_post([&impl, id, stream, slot, params] { impl.runtime->requests.set_params(id, stream, slot, params); });
      },
      "setting parameters of stream " + std::to_string(stream));
}

Result<StreamId> Network::create_stream(const StreamOptions& options) {
  Impl& impl = *impl_;
  if (options.sync == SyncMode::time_out) {
    if (auto ok = services::sync_timeout_param(Packet(0, {std::int64_t(options.sync_timeout.count())})); !ok) {
      return Error{ok.error(), ErrorKind::invalid_input};
    }
  }
  if (options.joiners && !options.backends.empty()) {
    return Error{"cannot create stream: a stream that takes in joiners is made of every back-end; give no list of them",
                 ErrorKind::invalid_input};
  }
  if (impl.attach()) {
    // Streams are made of the back-ends present when they are created.
    if (auto ok = wait_for_backends(impl.options.startup_timeout); !ok) {
      return Error{"cannot create stream: " + ok.error()};
    }
  }
  services::StreamSpec spec(options);
  {
    std::lock_guard lock(impl.mutex);
    if (impl.stopped) return Error{"the network has stopped", ErrorKind::stopped};
    if (impl.next_stream > kMaxStreams) {
      return Error{"cannot create stream: the network has " + std::to_string(kMaxStreams) +
                       " streams, the most it can have (streams are never closed)",
                   ErrorKind::invalid_input};
    }
    spec.id = impl.next_stream++;
  }
  // Those attached now: the topology names none of those that joined.
  auto present = [&impl] {
    std::vector<Rank> out;
    if (const core::TreeView* view = impl.runtime->node.live_tree()) {
      for (Rank b : view->backends_below(view->root())) {
        if (view->attached(b)) out.push_back(b);
      }
    }
    return out;
  };
  std::vector<Rank> backends = options.backends;
  if (backends.empty() && impl.options.open_attach) {
    if (!spec.joiners) {  // a stream with joiners takes those present where it is created, below
      backends = impl.loop.call(present);
      if (backends.empty()) {
        return Error{"cannot create stream: no back-end has attached yet (a stream with joiners takes them in as they come)",
                     ErrorKind::invalid_input};
      }
    }
  } else if (backends.empty()) {
    backends = impl.options.topology.backends();
  }
  spec.backends = core::RankSet::of(std::move(backends));
  impl.loop.run_or_post([&impl, spec, present]() mutable {
    // Taken again where the joins are applied, so that none falls between the two.
    if (spec.joiners && impl.options.open_attach) spec.backends = core::RankSet::of(present());
    impl.runtime->streams.create_stream(spec);
  });
  auto deadline = Clock::now() + impl.options.startup_timeout;
  bool acked = impl.wait_until(deadline, [&] { return impl.acks.count(spec.id) || impl.stopped; });
  std::lock_guard lock(impl.mutex);
  if (!acked) return Error{"stream " + std::to_string(spec.id) + " was not acknowledged in time"};
  if (!impl.acks.count(spec.id)) return Error{"the network stopped while creating a stream", ErrorKind::stopped};
  std::string error = impl.acks[spec.id];
  impl.acks.erase(spec.id);
  if (!error.empty()) return Error{"cannot create stream: " + error};
  return spec.id;
}

Result<void> Network::broadcast(StreamId stream, const Packet& packet) {
  Impl& impl = *impl_;
  if (auto too_big = core::oversized(packet)) return Error{*too_big, ErrorKind::invalid_input};
  {
    std::lock_guard lock(impl.mutex);
    if (impl.stopped) return Error{"the network has stopped", ErrorKind::stopped};
  }
  if (!impl.send_here([&] { impl.runtime->streams.send_down(stream, packet, std::nullopt); })) {
    impl.loop.post([&impl, stream, packet] { impl.runtime->streams.send_down(stream, packet, std::nullopt); });
  }
  return {};
}

Result<void> Network::send_to(StreamId stream, Rank backend, const Packet& packet) {
  Impl& impl = *impl_;
  if (auto too_big = core::oversized(packet)) return Error{*too_big, ErrorKind::invalid_input};
  const auto* node = impl.options.topology.find(backend);
  bool known = node && node->role == Role::backend;
  if (!known && impl.options.open_attach) {
    // One that joined (open attach) is in the live tree only, and in the streams made
    // after it joined only: its answers on another would be dropped on the way up.
    std::optional<Error> refused;
    known = impl.loop.call([&impl, &refused, backend, stream] {
      const core::TreeView* view = impl.runtime->node.live_tree();
      if (!view || !view->contains(backend) || view->role(backend) != Role::backend) return false;
      if (!impl.runtime->streams.made_with(stream, backend)) {
        refused = Error{"back-end " + std::to_string(backend) + " joined after stream " + std::to_string(stream) +
                            " was made: it is not one of its back-ends",
                        ErrorKind::invalid_input};
      }
      return true;
    });
    if (refused) return *refused;
  }
  if (!known) {
    return Error{"rank " + std::to_string(backend) + " is not a back-end of this network", ErrorKind::invalid_input};
  }
  {
    std::lock_guard lock(impl.mutex);
    if (impl.stopped) return Error{"the network has stopped", ErrorKind::stopped};
  }
  if (!impl.send_here([&] { impl.runtime->streams.send_down(stream, packet, backend); })) {
    impl.loop.post([&impl, stream, backend, packet] { impl.runtime->streams.send_down(stream, packet, backend); });
  }
  return {};
}

Result<std::optional<Received>> Network::receive(std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock(impl_->mutex);
    // Once stopped, and the stop itself reported, fail at once rather than wait.
    if (impl_->stopped && impl_->stop_reported) return Error{"the network has stopped", ErrorKind::stopped};
  }
  return impl_->received(impl_->loop.receive(impl_->inbox, timeout));
}

Result<std::optional<Received>> Network::try_receive() {
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopped && impl_->stop_reported) return Error{"the network has stopped", ErrorKind::stopped};
  }
  return impl_->received(impl_->inbox.pop(std::chrono::milliseconds::zero()));
}

int Network::event_fd() const { return impl_->inbox.fd(); }

std::optional<Event> Network::next_event(std::chrono::milliseconds timeout) {
  return impl_->loop.receive(impl_->events, timeout);
}

int Network::events_fd() const { return impl_->events.fd(); }

View Network::view() const {
  Impl& impl = *impl_;
  return impl.loop.call([&impl] { return impl.runtime->membership.view(); });
}

std::vector<NodeStatus> Network::status() const {
  Impl& impl = *impl_;
  return impl.loop.call([&impl] { return services::tree_status(*impl.runtime, impl.options.topology); });
}

bool Network::replaced() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->replaced;
}

Result<void> Network::shutdown() {
  Impl& impl = *impl_;
  {
    std::lock_guard lock(impl.mutex);
    if (impl.shut_down) return {};
    impl.shut_down = true;
  }
  // No back-end can join a tree that is stopping; the file's secret goes with it.
  if (impl.attach_file_written) std::remove(impl.options.attach_file.c_str());
  if (impl.reattach_file_written && !impl.replaced) std::remove(impl.options.reattach_file.c_str());
  impl.loop.run_or_post([&impl] { impl.runtime->node.shutdown("front-end shut down"); });
  // Each node gives its children a grace period, longer with height, then kills them.
  auto limit = core::Node::stop_grace_for_height(impl.options.topology.depth()) + std::chrono::seconds(3);
  bool clean = impl.wait_until(Clock::now() + limit, [&] { return impl.stopped; });
  impl.loop.stop();
  impl.runtime.reset();  // kills and reaps any child process still running
  {
    std::lock_guard lock(impl.mutex);
    impl.stopped = true;
  }
  if (!clean) {
    return Error{"the tree did not stop within " + std::to_string(limit.count() / 1000) +
                 " s; the front-end's remaining children were killed"};
  }
  return {};
}

}  // namespace canopy
