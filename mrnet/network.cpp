// MRN::Network on Canopy (docs/mrnet.md): creation of the front-end and back-end,
// communicators, filters, streams and receiving.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <atomic>
#include <mutex>

#include "mrnet/assignment.h"
#include "mrnet/attach_place.h"
#include "mrnet/backend_args.h"
#include "mrnet/conventions.h"
#include "mrnet/live_topology.h"
#include "mrnet/network_impl.h"
#include "mrnet/packet_codec.h"

namespace MRN {

namespace {

using namespace std::chrono_literals;

std::string local_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// The directory this library was loaded from (the MRNet plug-in and, in the build
// tree and installed alike, the commnode are found from it).
std::filesystem::path library_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&library_directory), &info) == 0 || !info.dli_fname) return {};
  std::error_code ec;
  auto path = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? std::filesystem::path() : path.parent_path();
}

// canopy_mrnet_filters.so: $CANOPY_MRNET_FILTERS, else next to this library.
std::string filter_plugin() {
  if (const char* env = std::getenv("CANOPY_MRNET_FILTERS"); env && *env) return env;
  return (library_directory() / layer::kFilterPlugin).string();
}

// canopy-commnode: $CANOPY_COMMNODE (Canopy's own rule), else in the programs'
// directory of the installation or build tree this library belongs to.
std::string commnode_program() {
  if (const char* env = std::getenv("CANOPY_COMMNODE"); env && *env) return env;
  const auto dir = library_directory();
  for (const char* relative : {"../bin", CANOPY_MRNET_BIN_FROM_LIB}) {
    auto candidate = dir / relative / "canopy-commnode";
    if (std::filesystem::exists(candidate)) return std::filesystem::weakly_canonical(candidate).string();
  }
  return "";  // Canopy's default: next to the program, else PATH
}

std::optional<canopy::SyncMode> sync_mode(int id) {
  if (id == SFILTER_WAITFORALL) return canopy::SyncMode::wait_for_all;
  if (id == SFILTER_DONTWAIT) return canopy::SyncMode::dont_wait;
  if (id == SFILTER_TIMEOUT) return canopy::SyncMode::time_out;
  return std::nullopt;
}

// An attribute's whole text as a number from 1 up, or nothing.
std::optional<unsigned long> positive_number(const std::string& text) {
  char* end = nullptr;
  const unsigned long n = std::strtoul(text.c_str(), &end, 10);
  if (end == text.c_str() || *end || n == 0 || text.find('-') != std::string::npos) return std::nullopt;
  return n;
}

// Canopy's "stream N ..." in the tool's terms: MRNet's id of the stream.
std::string in_mrnet_terms(const std::string& message) {
  unsigned long id = 0;
  int used = 0;
  if (std::sscanf(message.c_str(), "stream %lu %n", &id, &used) != 1 || used == 0) return message;
  const std::string which = id == layer::kPerBackendStream
                                ? std::string("the per-back-end streams")
                                : "stream " + std::to_string(layer::mrnet_stream_id(static_cast<canopy::StreamId>(id), 0));
  return which + " " + message.substr(static_cast<std::size_t>(used));
}

}  // namespace

// ---- errors ----

ErrorDef errors[] = {
    {ERR_NONE, ERR_INFO, ERR_IGNORE, "MRNet: no error"},
    {ERR_TOPOLOGY_FORMAT, ERR_CRIT, ERR_ABORT, "MRNet: topology error: the file has an incorrect format"},
    {ERR_TOPOLOGY_CYCLE, ERR_CRIT, ERR_ABORT, "MRNet: topology error: a cycle"},
    {ERR_TOPOLOGY_NOTCONNECTED, ERR_CRIT, ERR_ABORT, "MRNet: topology error: not connected"},
    {ERR_NETWORK_FAILURE, ERR_CRIT, ERR_ABORT, "MRNet: network failure"},
    {ERR_FORMATSTR, ERR_ERR, ERR_ALERT, "MRNet: format string mismatch"},
    {ERR_PACKING, ERR_CRIT, ERR_ABORT, "MRNet: packet encoding or decoding failure"},
    {ERR_INTERNAL, ERR_CRIT, ERR_ABORT, "MRNet: internal failure"},
    {ERR_SYSTEM, ERR_ERR, ERR_ABORT, "MRNet: system or library call failure"},
    {ERR_CODE_LAST, ERR_LEVEL_LAST, ERR_RESPONSE_LAST, "MRNet: bad error code"},
};

void Error::perror(const char* str) const {
  std::fprintf(stderr, "%s: %s%s%s\n", str ? str : "", get_ErrorStr(MRN_errno), detail_.empty() ? "" : ": ",
               detail_.c_str());
}

void Error::error(ErrorCode code, Rank, const char* format, ...) const {
  MRN_errno = code;
  char text[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  detail_ = text;
}

const int MIN_OUTPUT_LEVEL = 0;
const int MAX_OUTPUT_LEVEL = 5;
int CUR_OUTPUT_LEVEL = 1;
char* MRN_DEBUG_LOG_DIRECTORY = nullptr;

void get_Version(int& major, int& minor, int& revision) {
  major = MRNET_VERSION_MAJOR;
  minor = MRNET_VERSION_MINOR;
  revision = MRNET_VERSION_REV;
}
void set_OutputLevel(int level) { CUR_OUTPUT_LEVEL = std::clamp(level, MIN_OUTPUT_LEVEL, MAX_OUTPUT_LEVEL); }

void layer::say_no_performance_data() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fputs("MRNet: performance data is not collected on Canopy (docs/mrnet.md); use canopy run --status or "
               "the dashboard\n",
               stderr);
  });
}

void Network::print_PerformanceData(perfdata_metric_t, perfdata_context_t) { layer::say_no_performance_data(); }

// ---- the network's state ----

int Network::Impl::fail(ErrorCode code, const std::string& why) {
  self->error(code, rank, "%s", why.c_str());
  return -1;
}

canopy::Result<void> Network::Impl::find_plugin() {
  if (plugin.empty()) plugin = filter_plugin();
  if (!std::filesystem::exists(plugin)) {
    return canopy::Error{"the MRNet filter plug-in " + plugin +
                         " is missing (it is installed next to libcanopy_mrnet; CANOPY_MRNET_FILTERS names another)"};
  }
  return {};
}

canopy::Result<void> Network::Impl::load_builtins() {
  if (auto found = find_plugin(); !found) return found;
  // One request per filter, all at once: the tree answers them together.
  std::vector<std::string> names;
  for (FilterId id : {TFILTER_SUM, TFILTER_AVG, TFILTER_MAX, TFILTER_MIN, TFILTER_ARRAY_CONCAT, TFILTER_INT_EQ_CLASS}) {
    names.push_back(layer::builtin_filter_name(id));
  }
  std::vector<std::future<canopy::Result<void>>> loads;
  for (const auto& name : names) {
    loads.push_back(std::async(std::launch::async, [this, name] { return frontend->load_filter(plugin, name); }));
  }
  canopy::Result<void> result;
  for (std::size_t i = 0; i < loads.size(); ++i) {
    auto r = loads[i].get();
    if (r) {
      loaded.push_back(names[i]);
    } else if (result) {
      result = r;
    }
  }
  return result;
}

canopy::Result<void> Network::Impl::ensure_loaded(const std::string& name) {
  if (name == "pass" || std::find(loaded.begin(), loaded.end(), name) != loaded.end()) return {};
  if (auto found = find_plugin(); !found) return found;
  if (auto r = frontend->load_filter(plugin, name); !r) return r;
  loaded.push_back(name);
  return {};
}

canopy::Result<void> Network::Impl::open_per_backend_stream() {
  if (per_backend_open.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(per_backend_mutex);  // once, whichever thread asks first
  if (per_backend_open.load(std::memory_order_relaxed)) return {};
  // In an open attach it takes in the back-ends that join later, as MRNet's
  // per-back-end streams are made for any back-end the front-end knows.
  auto made = frontend->create_stream(
      {.joiners = open_attach, .upstream_filter = "pass", .sync = canopy::SyncMode::dont_wait});
  if (!made) return canopy::Error{"cannot open the per-back-end streams: " + made.error()};
  if (*made != layer::kPerBackendStream) {
    return canopy::Error{"the per-back-end streams must be Canopy's first stream, not " + std::to_string(*made)};
  }
  per_backend_open.store(true, std::memory_order_release);
  return {};
}

Stream* Network::Impl::stream_for(unsigned int id, canopy::StreamId canopy_id, Rank backend_rank) {
  auto it = streams.find(id);
  if (it != streams.end()) return it->second.get();
  std::set<Rank> ends;
  if (canopy_id == layer::kPerBackendStream) ends.insert(backend_rank);
  auto stream = std::unique_ptr<Stream>(new Stream(self, id, canopy_id, std::move(ends)));
  auto* raw = stream.get();
  streams.emplace(id, std::move(stream));
  return raw;
}

void Network::Impl::file(canopy::Received&& received) {
  const Rank end = is_frontend() ? received.packet.source() : rank;
  const unsigned int id = layer::mrnet_stream_id(received.stream, end);
  const Rank source = received.packet.source();
  auto packet = codec::from_canopy(std::move(received.packet), id);
  if (!packet) {
    fail(ERR_PACKING, "a packet on stream " + std::to_string(id) + " from rank " +
                          std::to_string(source) + ": " + packet.error());
    return;
  }
  if (received.wave) {
    auto& impl = (*packet)->impl();
    impl.wave = received.wave;
    impl.wave_backends = received.holds;
    impl.complete = received.complete;
  }
  Stream* stream = stream_for(id, received.stream, end);
  stream->queue_.push_back(*packet);
  if (stream->data_fd_[1] >= 0) {
    const char byte = 1;
    [[maybe_unused]] auto n = ::write(stream->data_fd_[1], &byte, 1);
  }
  if (data_events_wanted) {
    post(std::make_unique<DataEvent>(DataEvent::DATA_AVAILABLE, new DataEvent::DataEventData(stream)));
  }
}

bool Network::Impl::pump(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds timeout) {
  pumping = true;
  lock.unlock();
  // Only the pumping thread touches `batch` (empty between pumps; kept, so that its
  // storage is reused).
  std::optional<canopy::Error> failure;
  // One receive; false once nothing more is there, or Canopy reported something.
  auto take = [&](auto got) {
    if (!got) failure = canopy::Error{got.error(), got.error_kind()};
    if (!got || !*got) return false;
    batch.push_back(std::move(**got));
    return true;
  };
  // What has arrived already comes along, without polling the network again (the
  // first receive read what was ready); a report met on the way is kept, never
  // dropped.
  if (take(frontend ? frontend->receive(timeout) : backend->receive(timeout))) {
    for (int more = 0; more < 64 && take(frontend ? frontend->try_receive() : backend->try_receive()); ++more) {
    }
  }
  lock.lock();
  pumping = false;
  for (auto& received : batch) file(std::move(received));
  batch.clear();
  bool fine = true;
  if (failure && failure->kind == canopy::ErrorKind::disconnected) {
    // A stream whose filter could not recover its state after a failure may lack
    // data: MRNet's recv goes on after recovery, so this is an error event (and the
    // network's error), not a failed recv.
    const std::string message = in_mrnet_terms(failure->message);
    self->error(ERR_NETWORK_FAILURE, rank, "%s", message.c_str());
    post(std::make_unique<ErrorEvent>(ErrorEvent::ERROR_INTERNAL, new ErrorEvent::ErrorEventData(rank, message)));
  } else if (failure) {
    if (failure->kind == canopy::ErrorKind::stopped || backend) stopped = true;
    fail(failure->kind == canopy::ErrorKind::stopped ? ERR_NETWORK_FAILURE : ERR_INTERNAL, failure->message);
    fine = false;
  }
  arrived.notify_all();
  return fine;
}

int Network::Impl::receive(Stream* only, int* tag, PacketPtr& packet, Stream** from, bool blocking) {
  std::unique_lock lock(mutex);
  bool polled = false;
  while (true) {
    Stream* ready = nullptr;
    if (only) {
      if (!only->queue_.empty()) ready = only;
    } else if (!streams.empty()) {
      // Round robin over the streams, as MRNet does, so that none starves.
      auto it = streams.upper_bound(round_robin);
      for (std::size_t n = 0; n < streams.size() && !ready; ++n, ++it) {
        if (it == streams.end()) it = streams.begin();
        if (!it->second->queue_.empty()) ready = it->second.get();
      }
      if (ready) round_robin = ready->id_;
    }
    if (ready) {
      packet = std::move(ready->queue_.front());
      ready->queue_.pop_front();
      if (ready->data_fd_[0] >= 0) {
        char byte;
        [[maybe_unused]] auto n = ::read(ready->data_fd_[0], &byte, 1);
      }
      if (tag) *tag = packet->get_Tag();
      if (from) *from = ready;
      return 1;
    }
    if (stopped) return -1;
    if (!blocking && polled) return 0;
    if (pumping) {
      if (!blocking) {
        arrived.wait_for(lock, 1ms);
        polled = true;
      } else {
        arrived.wait(lock);
      }
      continue;
    }
    const bool received = pump(lock, blocking ? 200ms : 0ms);
    polled = true;
    if (!received && !stopped) return -1;  // a filter failed: the tool hears of it
  }
}

int Network::Impl::send(canopy::StreamId canopy_id, Rank to, const Packet& packet) {
  if (packet.has_Error()) return fail(ERR_PACKING, packet.impl().error);
  return send(canopy_id, to, codec::to_canopy(packet));
}

int Network::Impl::send(canopy::StreamId canopy_id, Rank to, canopy::Packet&& out) {
  if (frontend) {
    if (auto r = open_per_backend_stream(); !r) return fail(ERR_NETWORK_FAILURE, r.error());
  }
  canopy::Result<void> sent;
  if (backend) {
    sent = backend->send(canopy_id, std::move(out));
  } else if (to != UnknownRank) {
    sent = frontend->send_to(canopy_id, to, out);
  } else {
    sent = frontend->broadcast(canopy_id, out);
  }
  if (!sent) return fail(ERR_NETWORK_FAILURE, sent.error());
  return 0;
}

// ---- creation ----

Network::Network() : impl_(std::make_unique<Impl>()) {
  impl_->self = this;
  impl_->host = local_host();
}

Network* Network::CreateNetworkFE(const char* topology_text, const char* backend_exe, const char** backend_argv,
                                  const std::map<std::string, std::string>* attrs, bool, bool using_mem_buf) {
  auto* network = new Network();
  auto& impl = *network->impl_;
  if (!topology_text) {
    network->error(ERR_TOPOLOGY_FORMAT, UnknownRank, "no topology given");
    return network;
  }
  canopy::LaunchOptions options;
  const bool attach = backend_exe == nullptr;
  const auto leaves = attach ? canopy::Leaves::commnodes : canopy::Leaves::backends;
  auto topology = using_mem_buf ? canopy::parse_topology(topology_text, "<topology buffer>", leaves)
                                : canopy::load_topology(topology_text, leaves);
  if (!topology) {
    network->error(ERR_TOPOLOGY_FORMAT, UnknownRank, "%s", topology.error().c_str());
    return network;
  }
  auto attribute = [&](const std::string& key) -> std::optional<std::string> {
    if (attrs) {
      if (auto it = attrs->find(key); it != attrs->end()) return it->second;
    }
    return std::nullopt;
  };
  if (attach) {
    // Attach mode (decision 6). As MRNet's: back-ends join as they come, each under
    // the rank and parent its arguments give (Canopy's open attach). With the number
    // of back-ends given (CANOPY_BACKENDS), they take ranks 0..N-1 instead, spread
    // over the leaves. The secret is in the attach file, which CANOPY_ATTACH names to
    // the processes this one starts, and which an open attach links under each
    // commnode's host and port in the user's attach directory (attach_place.h).
    auto count = attribute("CANOPY_BACKENDS");
    if (!count) {
      if (const char* env = std::getenv("CANOPY_BACKENDS")) count = env;
    }
    if (count) {
      const auto n = positive_number(*count);
      if (!n) {
        network->error(ERR_INTERNAL, UnknownRank, "CANOPY_BACKENDS '%s' is not a number of back-ends",
                       count->c_str());
        return network;
      }
      auto with_backends = canopy::attach_backends(*topology, *n);
      if (!with_backends) {
        network->error(ERR_TOPOLOGY_FORMAT, UnknownRank, "%s", with_backends.error().c_str());
        return network;
      }
      topology = std::move(with_backends);
    } else {
      options.open_attach = impl.open_attach = true;
    }
    // An open attach's file goes in the attach directory, if it can be made (else in
    // the temporary directory, which only CANOPY_ATTACH tells back-ends).
    std::string dir = std::filesystem::temp_directory_path().string();
    if (impl.open_attach) {
      if (auto made = layer::make_attach_dir()) dir = *made;
    }
    static std::atomic<unsigned> made{0};
    options.attach_file = attribute("CANOPY_ATTACH_FILE").value_or(
        dir + "/canopy-mrnet-attach-" + std::to_string(getpid()) + "-" + std::to_string(made++));
  } else {
    options.backend_argv.push_back(backend_exe);
    for (const char** arg = backend_argv; arg && *arg; ++arg) options.backend_argv.push_back(*arg);
    options.mrnet_backend_args = true;
  }
  options.topology = std::move(*topology);
  // MRNet's back-ends hold the whole tree (their NetworkTopology).
  options.whole_tree_at_backends = true;
  options.commnode_exe = commnode_program();
  if (auto timeout = attribute("MRNET_STARTUP_TIMEOUT")) {
    const auto seconds = positive_number(*timeout);
    if (!seconds) {
      network->error(ERR_INTERNAL, UnknownRank, "MRNET_STARTUP_TIMEOUT '%s' is not a number of seconds",
                     timeout->c_str());
      return network;
    }
    options.startup_timeout = std::chrono::seconds(*seconds);
  }
  if (auto recovery = attribute("MRNET_FAILURE_RECOVERY")) {
    impl.recovery = !(*recovery == "false" || *recovery == "0" || *recovery == "no" || *recovery == "off");
  }
  if (auto rsh = attribute("XPLAT_RSH")) options.launcher = *rsh + " {host} {command}";
  // Launched with fault tolerance whatever the attribute says, so that
  // set_FailureRecovery(true) can turn healing on later; off, it is turned off below
  // before the program sees the network.
  options.fault_tolerance.enabled = true;
  const std::string attach_file = options.attach_file;
  auto launched = canopy::Network::launch(std::move(options));
  if (!launched) {
    network->error(ERR_NETWORK_FAILURE, UnknownRank, "%s", launched.error().c_str());
    return network;
  }
  impl.frontend = std::move(*launched);
  impl.rank = impl.frontend->topology().root().rank;
  if (!impl.recovery) {
    if (auto off = impl.frontend->set_healing(false); !off) {
      network->error(ERR_NETWORK_FAILURE, UnknownRank, "MRNET_FAILURE_RECOVERY: %s", off.error().c_str());
      return network;
    }
  }
  if (attach) {
    setenv("CANOPY_ATTACH", attach_file.c_str(), 1);
    impl.attach_file = attach_file;
  }
  if (impl.open_attach) {
    // Back-ends started elsewhere (not by this process) find the file by their
    // parent's host and port. Without the links they still can through CANOPY_ATTACH.
    auto places = layer::make_attach_places(impl.frontend->topology(), attach_file);
    if (places) {
      impl.attach_places = std::move(*places);
    } else {
      std::fprintf(stderr, "mrnet: %s; back-ends started elsewhere need CANOPY_ATTACH=%s\n", places.error().c_str(),
                   attach_file.c_str());
    }
  }
  // The built-in filters are loaded into the tree now, as MRNet's commnodes have
  // theirs built in, so that a tool's first stream costs no load; and, launched or
  // in an open attach, the per-back-end streams are opened meanwhile (with a number
  // of back-ends to attach, once they have: at the first stream or send).
  auto opened = std::async(std::launch::async, [&impl, attach]() -> canopy::Result<void> {
    return attach && !impl.open_attach ? canopy::Result<void>{} : impl.open_per_backend_stream();
  });
  auto loaded = impl.load_builtins();
  auto open = opened.get();
  if (!loaded || !open) {
    network->error(ERR_INTERNAL, UnknownRank, "%s", (!loaded ? loaded : open).error().c_str());
    (void)impl.frontend->shutdown();
    return network;
  }
  const auto& tree = impl.frontend->topology();
  auto broadcast = std::unique_ptr<Communicator>(new Communicator(network));
  for (Rank backend : tree.backends()) {
    auto node = std::make_unique<CommunicationNode>(tree.at(backend).host, UnknownPort, backend);
    broadcast->endpoints_.insert(node.get());
    impl.endpoints.emplace(backend, std::move(node));
  }
  impl.broadcast = broadcast.get();
  impl.communicators.push_back(std::move(broadcast));
  return network;
}

Network* Network::CreateNetworkBE(int argc, char* argv[]) {
  auto* network = new Network();
  auto& impl = *network->impl_;
  auto backend = layer::connect_backend(argc, argv);
  if (!backend) {
    network->error(ERR_NETWORK_FAILURE, UnknownRank, "%s", backend.error().c_str());
    return network;
  }
  impl.backend = std::move(*backend);
  impl.rank = impl.backend->rank();
  std::lock_guard lock(impl.mutex);
  impl.stream_for(impl.rank, layer::kPerBackendStream, impl.rank);
  return network;
}

Network::~Network() {
  impl_->stop_event_thread();
  // The streams go first, while the network they tell of their end still stands.
  auto streams = std::move(impl_->streams);
  impl_->streams.clear();
  streams.clear();
  layer::remove_attach_places(impl_->attach_places, impl_->attach_file);
  if (impl_->frontend) (void)impl_->frontend->shutdown();
  // The attach file is gone with the tree: processes started later must not look for it.
  if (const char* named = std::getenv("CANOPY_ATTACH"); named && !impl_->attach_file.empty() &&
                                                        impl_->attach_file == named) {
    unsetenv("CANOPY_ATTACH");
  }
  impl_->backend.reset();
  impl_->frontend.reset();
}

// ---- local node ----

NetworkTopology* Network::get_NetworkTopology() const {
  auto& impl = *impl_;
  if (!impl.topology) impl.topology = std::make_unique<NetworkTopology>();
  // The live tree as this process knows it: a back-end hears every failure and
  // adoption too.
  const auto status = impl.frontend  ? impl.frontend->status()
                      : impl.backend ? impl.backend->status()
                                     : std::vector<canopy::NodeStatus>{};
  std::lock_guard lock(impl.mutex);
  layer::reset_topology(*impl.topology, status, impl.attached);
  return impl.topology.get();
}

bool Network::is_ShutDown() const {
  auto& impl = *impl_;
  std::unique_lock lock(impl.mutex);
  if (!impl.frontend && !impl.backend) return true;
  // Looks at what has arrived first, unless another thread is receiving: a back-end
  // that only polls this (while (!stream->is_Closed()) sleep(1), as MRNet's examples
  // do) sees the shut-down too, also when no parent of its own launch is left to
  // end it. What arrives meanwhile is kept for recv.
  if (!impl.stopped && !impl.pumping) impl.pump(lock, std::chrono::milliseconds::zero());
  return impl.stopped;
}

void Network::waitfor_ShutDown() const {
  auto& impl = *impl_;
  if (!impl.backend) return;
  // Packets that still arrive are kept for recv; the loop ends when Canopy stops.
  std::unique_lock lock(impl.mutex);
  while (!impl.stopped) {
    if (impl.pumping) {
      impl.arrived.wait(lock);
    } else {
      impl.pump(lock, 500ms);
    }
  }
}

void Network::print_error(const char* str) {
  if (has_Error()) perror(str);
}

std::string Network::get_LocalHostName() const { return impl_->host; }
Rank Network::get_LocalRank() const { return impl_->rank; }
bool Network::is_LocalNodeFrontEnd() const { return impl_->frontend != nullptr; }

// ---- communicators ----

bool Communicator::add_EndPoint(Rank rank) {
  auto& endpoints = network_->impl_->endpoints;
  auto it = endpoints.find(rank);
  if (it == endpoints.end()) {
    (void)network_->get_BroadcastCommunicator();  // open attach: back-ends that attached since
    it = endpoints.find(rank);
  }
  if (it == endpoints.end()) return false;
  std::lock_guard lock(mutex_);
  endpoints_.insert(it->second.get());
  return true;
}

bool Communicator::add_EndPoint(CommunicationNode* node) { return node && add_EndPoint(node->get_Rank()); }

Communicator* Network::get_BroadcastCommunicator() const {
  auto& impl = *impl_;
  if (impl.open_attach && impl.frontend && impl.broadcast) {
    // As MRNet's: the back-ends attached so far (members of the view).
    for (const auto& node : impl.frontend->status()) {
      if (node.role != canopy::Role::backend || !node.alive || !node.member || impl.endpoints.count(node.rank)) continue;
      auto made = std::make_unique<CommunicationNode>(node.host, UnknownPort, node.rank);
      impl.broadcast->endpoints_.insert(made.get());
      impl.endpoints.emplace(node.rank, std::move(made));
    }
  }
  return impl.broadcast;
}

Communicator* Network::new_Communicator() {
  if (!impl_->frontend) return nullptr;
  impl_->communicators.push_back(std::unique_ptr<Communicator>(new Communicator(this)));
  return impl_->communicators.back().get();
}

Communicator* Network::new_Communicator(Communicator& copy) {
  auto* made = new_Communicator();
  if (made) made->endpoints_ = copy.endpoints_;
  return made;
}

Communicator* Network::new_Communicator(const std::set<Rank>& backends) {
  auto* made = new_Communicator();
  if (!made) return nullptr;
  for (Rank rank : backends) {
    if (!made->add_EndPoint(rank)) {
      error(ERR_INTERNAL, rank, "new_Communicator: %u is not a back-end of the network", rank);
      return nullptr;
    }
  }
  return made;
}

Communicator* Network::new_Communicator(std::set<CommunicationNode*>& backends) {
  std::set<Rank> ranks;
  for (auto* node : backends) ranks.insert(node->get_Rank());
  return new_Communicator(ranks);
}

CommunicationNode* Network::get_EndPoint(Rank rank) const {
  auto it = impl_->endpoints.find(rank);
  return it == impl_->endpoints.end() ? nullptr : it->second.get();
}

// ---- filters ----

int Network::load_FilterFunc(const char* so_file, const char* function) {
  auto& impl = *impl_;
  if (!impl.frontend) return impl.fail(ERR_INTERNAL, "load_FilterFunc: only the front-end loads filters");
  if (!so_file || !function) return impl.fail(ERR_INTERNAL, "load_FilterFunc: no file or no function name");
  std::error_code ec;
  const auto path = std::filesystem::absolute(so_file, ec).string();
  // Checked here first, so that the tool hears of a bad file at once and at one
  // place; the tree checks again when a stream uses it.
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!handle) return impl.fail(ERR_SYSTEM, std::string("load_FilterFunc: ") + dlerror());
  const bool has_function = dlsym(handle, function) != nullptr;
  const bool has_format = dlsym(handle, (std::string(function) + "_format_string").c_str()) != nullptr;
  const bool recoverable = dlsym(handle, (std::string(function) + "_get_state").c_str()) != nullptr;
  dlclose(handle);
  if (!has_function) return impl.fail(ERR_SYSTEM, "load_FilterFunc: " + path + " has no function " + function);
  if (!has_format) {
    return impl.fail(ERR_SYSTEM, "load_FilterFunc: " + path + " has no " + function + "_format_string");
  }
  FilterInfo info{recoverable ? layer::kRecoverableFunctionFilter : layer::kFunctionFilter, path, function};
  if (auto r = impl.ensure_loaded(info.canopy_name); !r) return impl.fail(ERR_SYSTEM, r.error());
  const int id = impl.next_filter_id++;
  impl.filters.emplace(id, std::move(info));
  return id;
}

int Network::load_FilterFuncs(const char* so_file, const std::vector<const char*>& functions, std::vector<int>& ids) {
  int loaded = 0;
  ids.clear();
  for (const char* function : functions) {
    ids.push_back(load_FilterFunc(so_file, function));
    if (ids.back() >= 0) ++loaded;
  }
  return loaded;
}

// ---- streams ----

namespace {

// The Canopy filter and parameters of MRNet filter `id`, or why there is none.
canopy::Result<FilterInfo> canopy_filter(Network::Impl& impl, int id) {
  auto it = impl.filters.find(id);
  if (it != impl.filters.end()) return it->second;
  const std::string name = id >= 0 && id <= 0xffff ? layer::builtin_filter_name(static_cast<FilterId>(id)) : "";
  if (name.empty()) {
    return canopy::Error{"filter id " + std::to_string(id) +
                         " is neither a built-in filter nor one load_FilterFunc returned (docs/mrnet.md)"};
  }
  if (auto r = impl.ensure_loaded(name); !r) return canopy::Error{r.error(), r.error_kind()};
  return FilterInfo{name, "", ""};
}

// The parameters a stream's filter starts with: a tool's function is named by them.
canopy::Packet initial_params(const FilterInfo& info) {
  if (info.so_file.empty()) return {};
  return canopy::Packet{0, {info.so_file, info.function}};
}

}  // namespace

Stream* Network::new_Stream(Communicator* communicator, int upstream, int sync, int downstream) {
  return impl_->new_stream(communicator, upstream, sync, downstream, {});
}

Stream* Network::Impl::new_stream(Communicator* communicator, int upstream, int sync, int downstream,
                                  const std::map<Rank, int>& upstream_at) {
  auto& impl = *this;
  if (!impl.frontend) {
    impl.fail(ERR_INTERNAL, "new_Stream: only the front-end creates streams");
    return nullptr;
  }
  if (!communicator || communicator->size() == 0) {
    impl.fail(ERR_INTERNAL, "new_Stream: the communicator has no back-ends");
    return nullptr;
  }
  if (auto r = impl.open_per_backend_stream(); !r) {
    impl.fail(ERR_NETWORK_FAILURE, "new_Stream: " + r.error());
    return nullptr;
  }
  canopy::StreamOptions options;
  std::set<Rank> ends;
  for (auto* node : communicator->get_EndPoints()) ends.insert(node->get_Rank());
  options.backends.assign(ends.begin(), ends.end());
  auto up = canopy_filter(impl, upstream);
  if (!up) {
    impl.fail(ERR_INTERNAL, "new_Stream: upstream " + up.error());
    return nullptr;
  }
  options.upstream_filter = up->canopy_name;
  options.upstream_params = initial_params(*up);
  for (const auto& [rank, id] : upstream_at) {
    auto own = canopy_filter(impl, id);
    if (!own) {
      impl.fail(ERR_INTERNAL, "new_Stream: the upstream filter of rank " + std::to_string(rank) + ": " + own.error());
      return nullptr;
    }
    options.upstream_filter_at[rank] = canopy::NodeFilter{own->canopy_name, initial_params(*own)};
  }
  auto mode = sync_mode(sync);
  if (!mode) {
    impl.fail(ERR_INTERNAL, "new_Stream: " + std::to_string(sync) +
                                " is not a synchronisation filter (SFILTER_WAITFORALL, SFILTER_DONTWAIT, SFILTER_TIMEOUT)");
    return nullptr;
  }
  options.sync = *mode;
  options.fold_state = true;  // every result one wave, as MRNet delivers them (docs/mrnet.md)
  std::optional<FilterInfo> down_info;
  if (downstream != TFILTER_NULL) {
    auto down = canopy_filter(impl, downstream);
    if (!down) {
      impl.fail(ERR_INTERNAL, "new_Stream: downstream " + down.error());
      return nullptr;
    }
    options.downstream_filter = down->canopy_name;
    options.downstream_params = initial_params(*down);
    down_info = *down;
  }
  auto created = impl.frontend->create_stream(options);
  if (!created) {
    impl.fail(ERR_NETWORK_FAILURE, "new_Stream: " + created.error());
    return nullptr;
  }
  FilterInfo& kept = impl.stream_filters[{*created, canopy::FilterSlot::upstream}] = *up;
  kept.per_node = !upstream_at.empty();
  if (down_info) impl.stream_filters[{*created, canopy::FilterSlot::downstream}] = *down_info;
  const unsigned int id = layer::mrnet_stream_id(*created, UnknownRank);
  auto stream = std::unique_ptr<Stream>(new Stream(self, id, *created, std::move(ends)));
  auto* raw = stream.get();
  std::lock_guard lock(impl.mutex);
  impl.streams[id] = std::move(stream);
  return raw;
}

// Each node's own upstream filter, as MRNet's strings give them; synchronisation and
// the downstream filter must be one for every node (docs/mrnet.md).
Stream* Network::new_Stream(Communicator* communicator, std::string upstream, std::string sync,
                            std::string downstream) {
  auto& impl = *impl_;
  auto up = layer::parse_assignment(upstream);
  auto sy = layer::parse_assignment(sync);
  auto down = layer::parse_assignment(downstream);
  for (const auto& [parsed, text] : {std::pair{&up, &upstream}, {&sy, &sync}, {&down, &downstream}}) {
    if (!*parsed) {
      impl.fail(ERR_INTERNAL, "new_Stream: cannot read the filter assignment \"" + *text +
                                  "\": give statements \"ID => RANK;\" and \"ID => *;\"");
      return nullptr;
    }
  }
  const auto one_sync = sy->uniform(SFILTER_WAITFORALL);
  const auto one_down = down->uniform(TFILTER_NULL);
  if (!one_sync || !one_down) {
    impl.fail(ERR_INTERNAL, std::string("new_Stream: the ") + (one_sync ? "downstream" : "synchronisation") +
                                " filter must be the same for every node in Canopy (docs/mrnet.md): \"" +
                                (one_sync ? downstream : sync) + "\"");
    return nullptr;
  }
  // The filter of every node not named ('*', else MRNet's default); a back-end named
  // runs its own over the packets it sends, as in MRNet.
  const int others = up->others.value_or(TFILTER_NULL);
  std::map<Rank, int> own;
  for (const auto& [rank, id] : up->nodes) {
    if (id != others || impl.endpoints.count(rank)) own[rank] = id;
  }
  return impl.new_stream(communicator, others, *one_sync, *one_down, own);
}

Stream* Network::get_Stream(unsigned int id) const {
  auto& impl = *impl_;
  if (impl.open_attach && !layer::is_user_stream_id(id) && !impl.endpoints.count(id)) {
    (void)get_BroadcastCommunicator();  // a back-end that attached since
  }
  std::lock_guard lock(impl.mutex);
  auto it = impl.streams.find(id);
  if (it != impl.streams.end()) return it->second.get();
  // The front-end's per-back-end stream of back-end `id`.
  if (impl.frontend && !layer::is_user_stream_id(id) && impl.endpoints.count(id)) {
    return impl.stream_for(id, layer::kPerBackendStream, id);
  }
  return nullptr;
}

int Network::recv(int* tag, PacketPtr& packet, Stream** stream, bool blocking) {
  return impl_->receive(nullptr, tag, packet, stream, blocking);
}

int Network::send(Rank backend, int tag, const char* format, ...) {
  va_list values;
  va_start(values, format);
  Packet packet(format, values, backend, tag);
  va_end(values);
  return impl_->send(layer::kPerBackendStream, backend, packet);
}

int Network::send(Rank backend, const char* format, va_list values, int tag) {
  va_list copy;
  va_copy(copy, values);
  Packet packet(format, copy, backend, tag);
  va_end(copy);
  return impl_->send(layer::kPerBackendStream, backend, packet);
}

int Network::send(Rank backend, int tag, const void** values, const char* format) {
  Packet packet(backend, tag, values, format);
  return impl_->send(layer::kPerBackendStream, backend, packet);
}

int Network::send(Rank backend, PacketPtr& packet) {
  if (!packet) return impl_->fail(ERR_PACKING, "send: a null packet");
  return impl_->send(layer::kPerBackendStream, backend, *packet);
}

// Sends have gone out already (Canopy queues each at once): -1 only once the network
// is known to have stopped, without looking for news (is_ShutDown looks): a flush
// right after the last send must not fail because the front-end, answered, has
// already shut the tree down.
int Network::flush() const { return impl_->known_stopped() ? -1 : 0; }

bool Network::set_FailureRecovery(bool enable) {
  if (impl_->backend) {
    impl_->fail(ERR_INTERNAL, "set_FailureRecovery: only the front-end turns failure recovery on or off");
    return false;
  }
  if (impl_->frontend) {
    if (auto done = impl_->frontend->set_healing(enable); !done) {
      impl_->fail(ERR_NETWORK_FAILURE, "set_FailureRecovery: " + done.error());
      return false;
    }
  }
  impl_->recovery = enable;
  return true;
}

}  // namespace MRN
