#include "canopy/backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "core/attach_file.h"
#include "core/code_layout.h"
#include "core/codec.h"
#include "core/log.h"
#include "core/loop_thread.h"
#include "services/runtime.h"

namespace canopy {

namespace asio = boost::asio;

// The leaf's runtime reports to Impl, on the loop thread.
struct Backend::Impl final : core::Node::Observer, services::StreamService::Observer {
  explicit Impl(core::NodeIdentity identity)
      : runtime(std::make_unique<services::Runtime>(loop.io(), identity, filters,
                                                    services::Observers{.node = this, .streams = this})) {}
  ~Impl() override {
    loop.stop();
    runtime.reset();
  }

  void on_downstream(StreamId stream, Packet&& packet) override {
    Received received{stream, std::move(packet), runtime->membership.view_id()};
    if (handler && handler(*owner, received)) return;
    inbox.push(std::move(received));
  }
  // Failures, adoptions, its own recovery, views, gossip, its services' own events.
  void on_public(const Event& event) override { events.push(event); }
  void on_stopped(const std::string& reason) override {
    {
      std::lock_guard lock(flow_mutex);
      stopped.store(true);
    }
    flow.notify_all();
    inbox.push(Error{"network stopped: " + reason, ErrorKind::stopped});
  }
  void on_upstream_full(bool full) override {
    {
      std::lock_guard lock(flow_mutex);
      upstream_full = full;
    }
    flow.notify_all();
    // A drain that stopped at the high-water mark goes on (posted: this runs inside
    // the link's write completion).
    if (!full) loop.post([this] { drain(); });
  }

  // Back-pressure (docs/protocol.md, "Resource bounds"): a caller's packet waits
  // while the link to the parent is full or while the packets handed to the loop and
  // not yet sent hold more than kHandOffBytes of memory; never in a handler (a
  // handler's send goes out at once). Sends `packet` on `stream`, up (or to back-end
  // `to`, sent down by the tree): on this thread when it runs the loop (a handler),
  // or can hold it while the way up is idle (the caller-thread fast path: the packet
  // leaves at once), else queued for the thread that runs the loop, which sends what
  // is queued in slices (drain()): one wake-up for a burst, not one per packet. False
  // if the network stopped meanwhile (nothing was sent).
  template <typename P>  // const Packet& or Packet&&: queued by copy or by move
  bool send(StreamId stream, std::optional<Rank> to, P&& packet) {
    {
      // try_hold() refuses while a drain is posted and unrun: nothing queued is
      // overtaken.
      auto hold = loop.try_hold();
      if (hold && (hold->nested() || runtime->node.links_idle())) {
        if (stopped.load()) return false;
        deliver(stream, to, packet);
        return true;
      }
    }
    const std::size_t bytes = queued_cost(packet);
    loop.kick();  // someone must run the loop for room to come
    std::unique_lock lock(flow_mutex);
    flow.wait(lock, [&] { return stopped.load() || (!upstream_full && posted_bytes <= kHandOffBytes); });
    if (stopped.load()) return false;
    posted_bytes += bytes;
    queued.push_back({std::forward<P>(packet), stream, to, bytes});
    // The first of a burst posts the drain, under the lock: a later packet finds the
    // drain posted (or running) and joins the queue.
    if (queued.size() == 1) loop.post([this] { drain(); });
    return true;
  }

  void deliver(StreamId stream, std::optional<Rank> to, const Packet& packet) {
    if (to) {
      runtime->streams.send_to_backend(*to, stream, packet);
    } else {
      runtime->streams.send_up(stream, packet);
    }
  }

  // What a queued packet holds in memory: its payload, its values, and its place in
  // the queue. A packet of one int is 4 bytes of payload and about 150 of memory:
  // bounding the payload alone let a back-end that outran its parent hold millions
  // of them (268 MB).
  static std::size_t queued_cost(const Packet& packet) {
    return core::packet_payload_bytes(packet) + packet.size() * sizeof(Value) + sizeof(QueuedSend) + 32;
  }

  // On the loop: sends what is queued, in order, a slice (kDrainSliceBytes) at a
  // time, posting itself again for the rest, so that the loop runs its timers,
  // reads and writes between two slices (one drain of a million packets held a
  // busy back-end's loop for seconds: nothing was written meanwhile, and its parent
  // declared it lost). It stops while the link to the parent is above its
  // high-water mark and goes on when it is back down (on_upstream_full).
  void drain() {
    if (stopped.load()) return;  // nobody waits for what is queued: send() said so
    {
      std::lock_guard lock(flow_mutex);
      if (draining_at == draining.size()) {
        draining.clear();  // keeps its capacity for the next burst
        draining_at = 0;
        draining.swap(queued);
      }
    }
    std::size_t bytes = 0;
    for (; draining_at < draining.size() && bytes < kDrainSliceBytes && !runtime->node.upstream_full();
         ++draining_at) {
      const auto& q = draining[draining_at];
      deliver(q.stream, q.to, q.packet);
      bytes += q.bytes;
    }
    bool more = false;
    {
      std::lock_guard lock(flow_mutex);
      posted_bytes -= bytes;
      more = draining_at < draining.size() || !queued.empty();
    }
    flow.notify_all();
    if (more && !runtime->node.upstream_full()) loop.post([this] { drain(); });
  }

  struct QueuedSend {
    Packet packet;
    StreamId stream;
    std::optional<Rank> to;
    std::size_t bytes;
  };
  // Handed to the loop before a caller waits for room: some 7,000 small packets.
  static constexpr std::size_t kHandOffBytes = 1u << 20;
  static constexpr std::size_t kDrainSliceBytes = 64u << 10;
  std::vector<QueuedSend> queued;    // under flow_mutex; a drain() posted while not empty
  std::vector<QueuedSend> draining;  // taken from queued; sent up to draining_at
  std::size_t draining_at = 0;

  // What receive() and try_receive() give for what the inbox gave.
  Result<std::optional<Received>> received(std::optional<std::variant<Received, Error>> item);

  Backend::Handler handler;  // set before the node starts; called on the loop thread
  Backend* owner = nullptr;
  filters::FilterRegistry filters = filters::FilterRegistry::with_builtins();
  core::LoopThread loop;
  std::unique_ptr<services::Runtime> runtime;
  core::Inbox<std::variant<Received, Error>> inbox;
  core::Inbox<Event> events;
  std::atomic<bool> stopped{false};
  std::mutex stop_mutex;
  std::mutex flow_mutex;
  std::condition_variable flow;
  bool upstream_full = false;    // under flow_mutex
  std::size_t posted_bytes = 0;  // under flow_mutex
  std::optional<Error> stop_error;  // sticky: returned by every receive() after the stop
};

namespace {

Result<std::uint64_t> parse_number(const char* name, int base) {
  const char* text = std::getenv(name);
  if (!text || !*text) {
    return Error{std::string(name) + " is not set: this program is a Canopy back-end and must be started "
                 "by a Canopy parent (canopy run --backend PROGRAM, or canopy::Network::launch)",
                 ErrorKind::invalid_input};
  }
  char* end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text, &end, base);
  if (errno || *end) return Error{std::string(name) + "='" + text + "' is not a valid number", ErrorKind::invalid_input};
  return value;
}

}  // namespace

Backend::Backend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Backend::~Backend() = default;

Result<std::unique_ptr<Backend>> Backend::connect(Handler handler) {
  auto rank = parse_number(core::kEnvRank, 10);
  if (!rank) return Error{rank.error(), rank.error_kind()};
  auto network = parse_number(core::kEnvNetworkId, 16);
  if (!network) return Error{network.error(), network.error_kind()};
  auto secret = core::secret_from_environment();
  if (!secret) return Error{secret.error(), secret.error_kind()};
  const char* parent = std::getenv(core::kEnvParent);
  return start(static_cast<Rank>(*rank), *network, std::string(secret->begin(), secret->end()),
               parent ? parent : "", std::getenv(core::kEnvParentLink),
               std::move(handler));
}

Result<std::unique_ptr<Backend>> Backend::start(Rank rank, std::uint64_t network_id, const std::string& secret,
                                                const std::string& parent, const char* parent_link,
                                                Handler handler) {
  auto link = core::parent_link_from(parent.c_str(), parent_link);
  if (!link) return Error{link.error(), ErrorKind::invalid_input};
  core::NodeIdentity identity;
  identity.rank = rank;
  identity.role = Role::backend;
  identity.network_id = network_id;
  if (secret.size() != identity.secret.size()) return Error{"a network secret is 32 bytes", ErrorKind::invalid_input};
  std::copy(secret.begin(), secret.end(), identity.secret.begin());
  core::init_logging(Role::backend, identity.rank);
  core::map_recovery_code();  // before a storm needs it (core/code_layout.h)
  auto impl = std::make_unique<Impl>(identity);
  Impl& i = *impl;
  std::unique_ptr<Backend> backend(new Backend(std::move(impl)));
  i.owner = backend.get();
  i.handler = std::move(handler);
  auto connected = i.loop.call([&] { return i.runtime->node.start_as_child(*link); });
  if (!connected) return Error{connected.error()};
  return backend;
}

Result<std::unique_ptr<Backend>> Backend::attach(const std::string& attach_file, Rank rank, Handler handler,
                                                 std::optional<Rank> under) {
  // The whole file is checked before anything starts: a damaged file is refused by
  // every back-end alike, wherever the damage is.
  auto file = attach::read_attach_file(attach_file);
  if (!file) return Error{file.error(), file.error_kind()};
  const std::string secret(file->secret.begin(), file->secret.end());
  if (const attach::BackendEntry* me = file->find(rank)) {
    return start(rank, file->network_id, secret, me->address + ":" + std::to_string(me->port), nullptr,
                 std::move(handler));
  }
  if (!file->open()) {
    return Error{"rank " + std::to_string(rank) + " is not a back-end of the tree in " + attach_file + " (it lists " +
                     std::to_string(file->backends.size()) + " back-ends)",
                 ErrorKind::invalid_input};
  }
  // Open attach: it joins under a commnode of the file.
  if (rank >= kFirstInternalRank) {
    return Error{"rank " + std::to_string(rank) + " cannot be a back-end's: back-end ranks are below " +
                     std::to_string(kFirstInternalRank),
                 ErrorKind::invalid_input};
  }
  const Rank parent = under.value_or(file->commnodes[rank % file->commnodes.size()].rank);
  auto at = std::find_if(file->commnodes.begin(), file->commnodes.end(),
                         [&](const attach::CommnodeEntry& c) { return c.rank == parent; });
  if (at == file->commnodes.end()) {
    return Error{"rank " + std::to_string(parent) + " is not a commnode back-ends join under in " + attach_file,
                 ErrorKind::invalid_input};
  }
  return start(rank, file->network_id, secret, at->address + ":" + std::to_string(at->port), nullptr,
               std::move(handler));
}

Rank Backend::rank() const { return impl_->runtime->node.identity().rank; }

Result<std::optional<Received>> Backend::receive(std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock(impl_->stop_mutex);
    if (impl_->stop_error) return *impl_->stop_error;
  }
  return impl_->received(impl_->loop.receive(impl_->inbox, timeout));
}

Result<std::optional<Received>> Backend::try_receive() {
  {
    std::lock_guard lock(impl_->stop_mutex);
    if (impl_->stop_error) return *impl_->stop_error;
  }
  return impl_->received(impl_->inbox.pop(std::chrono::milliseconds::zero()));
}

Result<std::optional<Received>> Backend::Impl::received(std::optional<std::variant<Received, Error>> item) {
  if (!item) return std::optional<Received>();
  if (auto* error = std::get_if<Error>(&*item)) {
    std::lock_guard lock(stop_mutex);
    stop_error = *error;
    return *error;
  }
  return std::optional<Received>(std::move(std::get<Received>(*item)));
}

Result<void> Backend::send(StreamId stream, const Packet& packet) {
  if (impl_->stopped.load()) return Error{"the network has stopped", ErrorKind::stopped};
  if (auto too_big = core::oversized(packet)) return Error{*too_big, ErrorKind::invalid_input};
  // On this thread when it runs the loop (a handler) or can hold it while the way
  // up is idle; else queued, after waiting while the way up is full (Impl::send).
  if (!impl_->send(stream, std::nullopt, packet)) return Error{"the network has stopped", ErrorKind::stopped};
  return {};
}

Result<void> Backend::send(StreamId stream, Packet&& packet) {
  if (impl_->stopped.load()) return Error{"the network has stopped", ErrorKind::stopped};
  if (auto too_big = core::oversized(packet)) return Error{*too_big, ErrorKind::invalid_input};
  if (!impl_->send(stream, std::nullopt, std::move(packet))) return Error{"the network has stopped", ErrorKind::stopped};
  return {};
}

Result<void> Backend::send_to(Rank backend, StreamId stream, const Packet& packet) {
  if (impl_->stopped.load()) return Error{"the network has stopped", ErrorKind::stopped};
  if (auto too_big = core::oversized(packet)) return Error{*too_big, ErrorKind::invalid_input};
  Impl& i = *impl_;
  if (!i.send(stream, backend, packet)) {
    return Error{"the network has stopped", ErrorKind::stopped};
  }
  return {};
}

int Backend::event_fd() const { return impl_->inbox.fd(); }

std::optional<Event> Backend::next_event(std::chrono::milliseconds timeout) {
  return impl_->loop.receive(impl_->events, timeout);
}

int Backend::events_fd() const { return impl_->events.fd(); }

GossipOptions Backend::gossip() const {
  Impl& impl = *impl_;
  return impl.loop.call([&impl] { return impl.runtime->gossip.options(); });
}

View Backend::view() const {
  Impl& impl = *impl_;
  return impl.loop.call([&impl] { return impl.runtime->membership.view(); });
}

std::vector<NodeStatus> Backend::status() const {
  Impl& impl = *impl_;
  return impl.loop.call([&impl] {
    const auto& topology = impl.runtime->node.topology();
    return topology ? services::tree_status(*impl.runtime, *topology) : std::vector<NodeStatus>{};
  });
}

}  // namespace canopy
