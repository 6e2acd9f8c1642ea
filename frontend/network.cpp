#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "canopy/frontend.h"
#include "core/log.h"
#include "core/loop_thread.h"
#include "core/node.h"

namespace canopy {

namespace {

using Clock = std::chrono::steady_clock;

std::string self_directory() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  buf[n] = 0;
  return std::filesystem::path(buf).parent_path().string();
}

// Resolves the commnode program: an explicit path, $CANOPY_COMMNODE, a sibling of
// the running executable, or a bare name for PATH.
std::string find_commnode(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("CANOPY_COMMNODE"); env && *env) return env;
  auto sibling = std::filesystem::path(self_directory()) / "canopy-commnode";
  if (access(sibling.c_str(), X_OK) == 0) return sibling.string();
  return "canopy-commnode";
}

// Makes a program path absolute so children started elsewhere find it; bare names
// are left for PATH.
std::string absolute_program(const std::string& program) {
  if (program.find('/') == std::string::npos) return program;
  std::error_code ec;
  auto abs = std::filesystem::absolute(program, ec);
  return ec ? program : abs.lexically_normal().string();
}

}  // namespace

struct Network::Impl final : core::NodeObserver {
  explicit Impl(LaunchOptions opts) : options(std::move(opts)) {
    std::random_device random;
    identity.network_id = (std::uint64_t(random()) << 32) | random();
    identity.rank = options.topology.root().rank;
    identity.role = Role::frontend;
    node = std::make_unique<core::Node>(loop.io(), identity, filters, this);
  }

  ~Impl() override {
    // Stop the loop first: the node is only ever touched on it.
    loop.stop();
    node.reset();
  }

  // ---- NodeObserver, on the loop thread ----
  void on_launched(Rank rank) override {
    std::size_t up;
    {
      std::lock_guard lock(mutex);
      launched.insert(rank);
      up = launched.size() + 1;  // and the front-end itself
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
  void on_node_lost(Rank, const std::string& reason) override {
    inbox.push(Error{"lost " + reason + "; results from now on are incomplete"});
  }
  void on_stream_ack(StreamId stream, const std::string& error) override {
    std::lock_guard lock(mutex);
    acks[stream] = error;
    changed.notify_all();
  }
  void on_stream_error(StreamId stream, const std::string& error) override {
    inbox.push(Error{"stream " + std::to_string(stream) + ": " + error});
  }
  void on_upstream(StreamId stream, Packet&& packet) override {
    inbox.push(Received{stream, std::move(packet)});
  }
  void on_stopped(const std::string& reason) override {
    {
      std::lock_guard lock(mutex);
      stopped = true;
      changed.notify_all();
    }
    inbox.push(Error{"network stopped: " + reason});
  }

  // Waits on `changed` for `predicate` until `deadline`; false on time-out.
  template <typename P>
  bool wait_until(Clock::time_point deadline, P predicate) {
    std::unique_lock lock(mutex);
    return changed.wait_until(lock, deadline, predicate);
  }

  std::string describe_missing() {
    std::lock_guard lock(mutex);
    std::string out;
    std::size_t missing = 0;
    for (const auto& n : options.topology.nodes()) {
      if (!n.parent || launched.count(n.rank)) continue;
      if (++missing <= 5) {
        out += (out.empty() ? "" : ", ") + std::string(to_string(n.role)) + " " + std::to_string(n.rank) +
               " on " + n.host;
      }
    }
    if (missing > 5) out += " and " + std::to_string(missing - 5) + " more";
    return out.empty() ? "every process connected, but not every subtree reported ready" : "not up: " + out;
  }

  LaunchOptions options;
  core::NodeIdentity identity;
  filters::FilterRegistry filters = filters::FilterRegistry::with_builtins();
  core::LoopThread loop;
  std::unique_ptr<core::Node> node;
  core::Inbox<std::variant<Received, Error>> inbox;

  std::mutex mutex;
  std::condition_variable changed;
  std::set<Rank> launched;
  std::string launch_error;
  bool ready = false;
  bool stopped = false;
  bool stop_reported = false;  // receive() has returned the "network stopped" error
  bool shut_down = false;
  std::map<StreamId, std::string> acks;
  StreamId next_stream = 1;
};

Network::Network(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Network::~Network() {
  if (impl_) (void)shutdown();
}

Result<std::unique_ptr<Network>> Network::launch(LaunchOptions options) {
  if (options.backend_argv.empty() || options.backend_argv[0].empty()) {
    return Error{"no back-end program given (LaunchOptions::backend_argv)"};
  }
  core::init_logging(Role::frontend, options.topology.root().rank);
  options.commnode_exe = absolute_program(find_commnode(options.commnode_exe));
  options.backend_argv[0] = absolute_program(options.backend_argv[0]);
  for (const auto& program : {options.commnode_exe, options.backend_argv[0]}) {
    if (program.find('/') != std::string::npos && access(program.c_str(), X_OK) != 0) {
      return Error{"cannot run '" + program + "': " + std::strerror(errno)};
    }
  }

  core::LaunchPlan plan;
  plan.commnode_exe = options.commnode_exe;
  plan.backend_argv = options.backend_argv;
  plan.launcher = options.launcher;
  plan.startup_timeout = options.startup_timeout;
  auto depth = std::max<std::size_t>(1, options.topology.depth());
  auto deadline = Clock::now() + options.startup_timeout * depth + std::chrono::seconds(2);

  std::unique_ptr<Network> network(new Network(std::make_unique<Impl>(std::move(options))));
  Impl& impl = *network->impl_;
  if (auto& on_progress = impl.options.on_progress) on_progress(1, impl.options.topology.size());
  core::log().info("launching {} processes", impl.options.topology.size());
  auto started = impl.loop.call([&] { return impl.node->start_as_root(impl.options.topology, plan); });
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
  core::log().info("network up: {} processes", impl.options.topology.size());
  return network;
}

const Topology& Network::topology() const { return impl_->options.topology; }

Result<StreamId> Network::create_stream(const StreamOptions& options) {
  Impl& impl = *impl_;
  core::StreamSpec spec;
  {
    std::lock_guard lock(impl.mutex);
    if (impl.stopped) return Error{"the network has stopped"};
    spec.id = impl.next_stream++;
  }
  spec.backends = options.backends.empty() ? impl.options.topology.backends() : options.backends;
  std::sort(spec.backends.begin(), spec.backends.end());
  spec.backends.erase(std::unique(spec.backends.begin(), spec.backends.end()), spec.backends.end());
  spec.upstream_filter = options.upstream_filter;
  spec.sync = options.sync;
  spec.downstream_filter = options.downstream_filter;
  impl.loop.post([&impl, spec] { impl.node->create_stream(spec); });
  auto deadline = Clock::now() + impl.options.startup_timeout;
  bool acked = impl.wait_until(deadline, [&] { return impl.acks.count(spec.id) || impl.stopped; });
  std::lock_guard lock(impl.mutex);
  if (!acked) return Error{"stream " + std::to_string(spec.id) + " was not acknowledged in time"};
  if (!impl.acks.count(spec.id)) return Error{"the network stopped while creating a stream"};
  std::string error = impl.acks[spec.id];
  impl.acks.erase(spec.id);
  if (!error.empty()) return Error{"cannot create stream: " + error};
  return spec.id;
}

Result<void> Network::broadcast(StreamId stream, const Packet& packet) {
  Impl& impl = *impl_;
  {
    std::lock_guard lock(impl.mutex);
    if (impl.stopped) return Error{"the network has stopped"};
  }
  impl.loop.post([&impl, stream, packet] { impl.node->send_down(stream, packet, std::nullopt); });
  return {};
}

Result<void> Network::send_to(StreamId stream, Rank backend, const Packet& packet) {
  Impl& impl = *impl_;
  const auto* node = impl.options.topology.find(backend);
  if (!node || node->role != Role::backend) {
    return Error{"rank " + std::to_string(backend) + " is not a back-end of this network"};
  }
  {
    std::lock_guard lock(impl.mutex);
    if (impl.stopped) return Error{"the network has stopped"};
  }
  impl.loop.post([&impl, stream, backend, packet] { impl.node->send_down(stream, packet, backend); });
  return {};
}

Result<std::optional<Received>> Network::receive(std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock(impl_->mutex);
    // Once stopped, and the stop itself reported, fail at once rather than wait.
    if (impl_->stopped && impl_->stop_reported) return Error{"the network has stopped"};
  }
  auto item = impl_->inbox.pop(timeout);
  if (!item) return std::optional<Received>();
  if (auto* error = std::get_if<Error>(&*item)) {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopped && error->message.rfind("network stopped", 0) == 0) impl_->stop_reported = true;
    return *error;
  }
  return std::optional<Received>(std::move(std::get<Received>(*item)));
}

int Network::event_fd() const { return impl_->inbox.fd(); }

Result<void> Network::shutdown() {
  Impl& impl = *impl_;
  {
    std::lock_guard lock(impl.mutex);
    if (impl.shut_down) return {};
    impl.shut_down = true;
  }
  impl.loop.post([&impl] { impl.node->shutdown("front-end shut down"); });
  // Each node gives its children a grace period, longer with height, then kills them.
  auto limit = core::Node::stop_grace_for_height(impl.options.topology.depth()) + std::chrono::seconds(3);
  bool clean = impl.wait_until(Clock::now() + limit, [&] { return impl.stopped; });
  impl.loop.stop();
  impl.node.reset();  // kills and reaps any child process still running
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
