#include "core/node.h"

#include <signal.h>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <random>
#include <sstream>

#include <capnp/serialize.h>

#include "core/codec.h"
#include "core/log.h"
#include "transport/tcp_link.h"

namespace canopy::core {

using transport::Link;
using transport::TcpLink;
using Body = wire::Message::Body;

namespace {

// How long a stopping node lets its children exit before killing them. A parent
// must wait longer than its children do, or it would kill a commnode just before that
// commnode kills its own stubborn children, leaving them orphaned: so the grace grows
// by kStopGraceStep with each level of the subtree below the node.
constexpr auto kStopGrace = std::chrono::seconds(2);
constexpr auto kStopGraceStep = std::chrono::seconds(1);
// After a child's connection closes, how long to wait for its exit status so that the
// report can say "exited with status 3" rather than just "connection closed".
constexpr auto kExitStatusWait = std::chrono::milliseconds(300);

}  // namespace

const char* Node::peer_state_name(PeerState state) {
  switch (state) {
    case PeerState::alive: return "alive";
    case PeerState::suspect: return "suspect";
    case PeerState::lost: return "lost";
  }
  return "?";
}

const char* Node::state_name(ChildState state) {
  switch (state) {
    case ChildState::starting: return "starting";
    case ChildState::connected: return "connected";
    case ChildState::ready: return "ready";
    case ChildState::gone: return "gone";
  }
  return "?";
}

namespace {

std::string role_name(Role role) {
  switch (role) {
    case Role::frontend: return "front-end";
    case Role::commnode: return "commnode";
    case Role::backend: return "back-end";
  }
  return "node";
}

wire::SyncMode to_wire(SyncMode mode) {
  switch (mode) {
    case SyncMode::wait_for_all: return wire::SyncMode::WAIT_FOR_ALL;
    case SyncMode::dont_wait: return wire::SyncMode::DONT_WAIT;
    case SyncMode::time_out: return wire::SyncMode::TIME_OUT;
  }
  return wire::SyncMode::WAIT_FOR_ALL;
}

SyncMode from_wire(wire::SyncMode mode) {
  switch (mode) {
    case wire::SyncMode::WAIT_FOR_ALL: return SyncMode::wait_for_all;
    case wire::SyncMode::DONT_WAIT: return SyncMode::dont_wait;
    case wire::SyncMode::TIME_OUT: return SyncMode::time_out;
  }
  return SyncMode::wait_for_all;
}

}  // namespace

Result<std::chrono::milliseconds> sync_timeout_param(const Packet& params) {
  constexpr std::int64_t kMax = 3600 * 1000;
  std::optional<std::int64_t> ms;
  if (params.size() == 1) {
    std::visit(
        [&](const auto& v) {
          using T = std::remove_cvref_t<decltype(v)>;
          if constexpr (std::is_integral_v<T>) {
            if (v > 0 && static_cast<std::uint64_t>(v) <= static_cast<std::uint64_t>(kMax)) ms = v;
          }
        },
        params[0]);
  }
  if (!ms) {
    return Error{"the sync parameter is one integer, the time-out in milliseconds (1 to " +
                 std::to_string(kMax) + "); got \"" + params.format() + "\""};
  }
  return std::chrono::milliseconds(*ms);
}

namespace {

// The inverse of Node::write_stream_spec.
StreamSpec read_stream_spec(wire::StreamCreate::Reader c) {
  StreamSpec spec;
  spec.id = c.getStreamId();
  for (auto b : c.getBackends()) spec.backends.push_back(b);
  spec.upstream_filter = c.getUpstreamFilter();
  spec.upstream_params = decode_values(c.getUpstreamParams());
  spec.sync = from_wire(c.getSyncMode());
  spec.sync_timeout = std::chrono::milliseconds(std::max<std::uint32_t>(1, c.getSyncTimeoutMs()));
  spec.downstream_filter = c.getDownstreamFilter();
  spec.downstream_params = decode_values(c.getDownstreamParams());
  return spec;
}

}  // namespace

// One outgoing protocol message, stamped with the sender's identity.
class Node::Message {
 public:
  explicit Message(const NodeIdentity& id) : root_(builder_.initRoot<wire::Message>()) {
    root_.setSenderRank(id.rank);
    root_.setSenderIncarnation(id.incarnation);
  }
  Body::Builder body() { return root_.getBody(); }
  capnp::MessageBuilder& builder() { return builder_; }

 private:
  capnp::MallocMessageBuilder builder_;
  wire::Message::Builder root_;
};

Node::Node(asio::io_context& io, NodeIdentity identity, filters::FilterRegistry& filters,
           NodeObserver* observer)
    : io_(io), id_(identity), filters_(filters), observer_(observer), heartbeat_timer_(io),
      startup_timer_(io), stop_timer_(io) {}

Node::~Node() {
  if (parent_) parent_->detach();
  if (orphan_ && orphan_->trying) orphan_->trying->detach();
  for (auto& link : pending_) link->detach();
  for (auto& child : children_) {
    if (child.link) child.link->detach();
  }
  // ChildProcess destructors kill and reap whatever is still running.
}

// ---- start-up ----

Result<void> Node::start_as_root(Topology topology, LaunchPlan plan) {
  plan_ = std::move(plan);
  adopt_topology(std::move(topology));
  if (auto r = listen(); !r) return r;
  launch_children();
  start_heartbeats();
  return {};
}

transport::StripedOptions striped_options(const LinkSettings& links) {
  transport::StripedOptions options;
  switch (links.checksum) {
    case LinkChecksum::crc32c: options.checksum = transport::ChecksumKind::crc32c; break;
    case LinkChecksum::additive: options.checksum = transport::ChecksumKind::additive; break;
    case LinkChecksum::none: options.checksum = transport::ChecksumKind::none; break;
  }
  options.reliable = links.reliable;
  options.corrupt_fraction = links.corrupt_fraction;
  // Every process of a tree corrupts differently.
  options.fault_seed = std::random_device{}();
  options.log = logger();  // the process's log, also when taken before init_logging()
  return options;
}

std::string encode_parent_link(const LinkSettings& links, const std::vector<transport::PathEndpoints>& paths) {
  char corrupt[32];
  auto end = std::to_chars(corrupt, corrupt + sizeof corrupt, links.corrupt_fraction).ptr;  // shortest exact
  std::string text = "checksum=" + std::string(to_string(links.checksum)) + " reliable=" +
                     (links.reliable ? "1" : "0") + " corrupt=" + std::string(corrupt, end) + " paths=";
  for (std::size_t i = 0; i < paths.size(); ++i) {
    text += (i ? "," : "") + paths[i].local_address + ">" + paths[i].remote_address;
  }
  return text;
}

Result<ParentLink> parent_link_from(const char* parent, const char* parent_link) {
  ParentLink link;
  std::string endpoint = parent ? parent : "";
  auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Error{std::string(kEnvParent) + "='" + endpoint + "' is not address:port"};
  }
  unsigned port = 0;
  auto [end, ec] = std::from_chars(endpoint.data() + colon + 1, endpoint.data() + endpoint.size(), port);
  if (ec != std::errc() || end != endpoint.data() + endpoint.size() || port == 0 || port > 65535) {
    return Error{std::string(kEnvParent) + "='" + endpoint + "' has no valid port"};
  }
  link.address = endpoint.substr(0, colon);
  link.port = static_cast<std::uint16_t>(port);
  if (!parent_link || !*parent_link) return link;

  auto bad = [&](const std::string& why) {
    return Error{std::string(kEnvParentLink) + "='" + parent_link + "': " + why};
  };
  LinkSettings settings;
  std::istringstream words(parent_link);
  std::string word;
  while (words >> word) {
    auto eq = word.find('=');
    if (eq == std::string::npos) return bad("'" + word + "' is not key=value");
    std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    if (key == "checksum") {
      auto checksum = link_checksum_from(value);
      if (!checksum) return bad("unknown checksum '" + value + "'");
      settings.checksum = *checksum;
    } else if (key == "reliable" && (value == "0" || value == "1")) {
      settings.reliable = value == "1";
    } else if (key == "corrupt") {
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), settings.corrupt_fraction);
      if (ec != std::errc() || end != value.data() + value.size() || !(settings.corrupt_fraction >= 0) ||
          settings.corrupt_fraction >= 1) {
        return bad("corrupt must be a fraction in [0, 1)");
      }
    } else if (key == "paths") {
      std::istringstream list(value);
      std::string pair;
      while (std::getline(list, pair, ',')) {
        auto arrow = pair.find('>');
        if (arrow == std::string::npos || arrow == 0 || arrow + 1 == pair.size()) {
          return bad("path '" + pair + "' is not LOCAL>REMOTE");
        }
        link.paths.push_back({pair.substr(0, arrow), pair.substr(arrow + 1), link.port});
      }
    } else {
      return bad("unknown key '" + key + "'");
    }
  }
  if (link.paths.empty()) return bad("no paths");
  link.striped = striped_options(settings);
  return link;
}

Result<void> Node::start_as_child(const ParentLink& parent) {
  std::string where = parent.address + ":" + std::to_string(parent.port);
  if (parent.paths.empty()) {
    boost::system::error_code ec;
    auto socket = transport::connect_tcp(io_, parent.address, parent.port, ec);
    if (ec) return Error{"cannot connect to parent at " + where + ": " + ec.message()};
    attach_parent(TcpLink::create(std::move(socket)));
  } else {
    auto link = transport::StripedLink::connect(io_, parent.paths, parent.striped);
    if (!link) return Error{"cannot connect to parent at " + where + " (striped): " + link.error()};
    where += " over " + std::to_string(parent.paths.size()) + " striped paths";
    attach_parent(std::move(*link));
  }
  send_hello(*parent_, false);
  log().info("connected to parent {}, hello sent", where);
  return {};
}

void Node::send_hello(Link& link, bool adopt) {
  Message hello(id_);
  auto h = hello.body().initHello();
  h.setProtocolVersion(wire::PROTOCOL_VERSION);
  h.setNetworkId(id_.network_id);
  h.setRole(core::to_wire(id_.role));
  h.setRank(id_.rank);
  h.setIncarnation(adopt ? std::max(id_.incarnation, view_->incarnation(id_.rank)) + 1 : id_.incarnation);
  h.setPid(getpid());
  h.setAdopt(adopt);
  link.send(hello.builder());
}

// Listens on every NIC address of this node's host, all on one port: the
// topology's, or one the kernel picks for the first address and the others then
// share (tried again a few times if another process holds it on some address).
Result<void> Node::listen() {
  const auto& me = topology_->at(id_.rank);
  std::vector<asio::ip::address> addresses;
  for (const std::string& name : topology_->nics_of(me.host)) {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(name, ec);
    if (ec) {
      asio::ip::tcp::resolver resolver(io_);
      auto results = resolver.resolve(name, "0", ec);
      if (ec || results.empty()) {
        return Error{"cannot resolve host '" + me.host + "' (" + name + ") to listen on: " + ec.message()};
      }
      addr = results.begin()->endpoint().address();
    }
    addresses.push_back(addr);
  }
  Result<void> listening;
  for (int attempt = 0; attempt < 8; ++attempt) {
    listening = listen_on(addresses, me.port);
    if (listening || me.port != 0 || addresses.size() == 1) break;
  }
  if (!listening) return listening;

  auto options = striped_options(topology_->links());
  options.hello_timeout = plan_.startup_timeout;  // as for a plain connection's hello
  striped_acceptor_ = std::make_unique<transport::StripedAcceptor>(
      io_, options, [this](std::shared_ptr<transport::StripedLink> link) { accept_link(std::move(link)); },
      [this](asio::ip::tcp::socket socket) { accept_link(TcpLink::create(std::move(socket))); });
  endpoints_[id_.rank] = listen_port_;
  std::string where;
  for (const auto& a : addresses) where += (where.empty() ? "" : ", ") + a.to_string();
  log().info("listening on {} port {}", where, listen_port_);
  for (auto& acceptor : acceptors_) accept_next(acceptor);
  return {};
}

Result<void> Node::listen_on(const std::vector<asio::ip::address>& addresses, std::uint16_t port) {
  acceptors_.clear();
  for (const auto& address : addresses) {
    asio::ip::tcp::endpoint endpoint(address, port);
    auto& acceptor = acceptors_.emplace_back(io_);
    boost::system::error_code ec;
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      acceptors_.clear();
      return Error{"cannot listen on " + address.to_string() + ":" + std::to_string(port) + ": " + ec.message()};
    }
    if (port == 0) port = acceptor.local_endpoint().port();
  }
  listen_port_ = port;
  return {};
}

void Node::accept_next(asio::ip::tcp::acceptor& acceptor) {
  acceptor.async_accept([this, &acceptor](const boost::system::error_code& ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted || stopped_) return;
    if (ec) {
      log().warn("accept failed: {}", ec.message());
    } else {
      striped_acceptor_->take(std::move(socket));
    }
    accept_next(acceptor);
  });
}

// A new connection, plain or striped: it has until the startup time-out to say hello.
void Node::accept_link(std::shared_ptr<Link> link) {
  if (stopped_) return link->abort("stopped");
  pending_.push_back(link);
  const Link* raw = link.get();
  auto& deadline = hello_deadlines_[raw];
  deadline = std::make_unique<asio::steady_timer>(io_, plan_.startup_timeout);
  deadline->async_wait([this, weak = std::weak_ptr<Link>(link)](const boost::system::error_code& ec) {
    auto l = weak.lock();
    if (ec || !l || child_of_link_.count(l.get())) return;
    log().warn("closing connection from {}: no hello within {} ms", l->peer(), plan_.startup_timeout.count());
    l->close("no hello in time");
  });
  link->start([this, raw](capnp::MessageReader& m) { on_accepted_message(raw, m.getRoot<wire::Message>()); },
              [this, raw](std::string_view reason) { on_accepted_closed(raw, reason); });
}

void Node::on_accepted_message(const Link* link, wire::Message::Reader msg) {
  if (auto it = child_of_link_.find(link); it != child_of_link_.end()) {
    on_child_message(it->second, msg);
    return;
  }
  auto it = std::find_if(pending_.begin(), pending_.end(), [&](auto& l) { return l.get() == link; });
  if (it == pending_.end()) return;
  std::shared_ptr<Link> held = *it;  // on_hello erases it from pending_
  on_hello(held, msg);
}

void Node::on_accepted_closed(const Link* link, std::string_view reason) {
  hello_deadlines_.erase(link);
  if (auto it = child_of_link_.find(link); it != child_of_link_.end()) {
    std::size_t index = it->second;
    child_of_link_.erase(it);
    on_child_closed(index, reason);
    return;
  }
  std::erase_if(pending_, [&](auto& l) { return l.get() == link; });
}

void Node::on_hello(const std::shared_ptr<Link>& link, wire::Message::Reader msg) {
  auto refuse = [&](const std::string& why) {
    log().warn("refusing connection from {}: {}", link->peer(), why);
    link->close(why);
  };
  if (msg.getBody().which() != Body::HELLO) return refuse("first message is not a hello");
  auto hello = msg.getBody().getHello();
  if (hello.getProtocolVersion() != wire::PROTOCOL_VERSION) {
    return refuse("protocol version " + std::to_string(hello.getProtocolVersion()) + ", expected " +
                  std::to_string(wire::PROTOCOL_VERSION));
  }
  if (hello.getNetworkId() != id_.network_id) return refuse("hello from another network");
  if (hello.getAdopt()) {
    accept_orphan(link, hello);
    return;
  }
  auto it = child_index_.find(hello.getRank());
  if (it == child_index_.end()) {
    return refuse("rank " + std::to_string(hello.getRank()) + " is not a child of this node");
  }
  Child& child = children_[it->second];
  if (from_wire(hello.getRole()) != child.role) return refuse("role does not match the topology");
  if (child.state != ChildState::starting || stopping_) {
    return refuse("rank " + std::to_string(child.rank) + " is already connected or gone");
  }

  child.link = link;
  child.state = ChildState::connected;
  child_of_link_[link.get()] = it->second;
  hello_deadlines_.erase(link.get());
  std::erase(pending_, link);
  log().info("child {} connected from {} (pid {}): starting -> connected", child.rank, link->peer(),
             hello.getPid());
  send_topology(*link, false);
  report_launched(child.rank);
}

void Node::send_topology(Link& link, bool update) {
  Message message(id_);
  auto t = message.body().initTopology();
  encode_topology(*topology_, t);
  t.setIsUpdate(update);
  t.setStartupTimeoutMs(static_cast<std::uint32_t>(plan_.startup_timeout.count()));
  t.setLauncher(plan_.launcher);
  t.setCommnodeExe(plan_.commnode_exe);
  auto argv = t.initBackendArgv(plan_.backend_argv.size());
  for (std::size_t i = 0; i < plan_.backend_argv.size(); ++i) argv.set(i, plan_.backend_argv[i]);
  t.setAttachMode(plan_.attach);
  auto ft = t.initFaultTolerance();
  ft.setEnabled(plan_.fault.enabled);
  ft.setHeartbeatMs(static_cast<std::uint32_t>(plan_.fault.heartbeat.count()));
  ft.setSuspectMs(static_cast<std::uint32_t>(plan_.fault.suspect.count()));
  ft.setLostMs(static_cast<std::uint32_t>(plan_.fault.lost.count()));
  ft.setAdoptionTimeoutMs(static_cast<std::uint32_t>(plan_.fault.adoption_timeout.count()));
  link.send(message.builder());
}

std::string Node::describe(Rank rank) const {
  const canopy::Node* n = topology_ ? topology_->find(rank) : nullptr;
  if (!n) return "node " + std::to_string(rank);
  return role_name(n->role) + " " + std::to_string(rank) + " on " + n->host;
}

void Node::adopt_topology(Topology topology) {
  topology_ = std::move(topology);
  view_.emplace(*topology_);
  const auto& me = topology_->at(id_.rank);
  for (Rank r : me.children) {
    child_index_[r] = children_.size();
    Child child;
    child.rank = r;
    child.role = topology_->at(r).role;
    children_.push_back(std::move(child));
  }
  for (std::size_t i = 0; i < children_.size(); ++i) {
    for (Rank b : topology_->backends_below(children_[i].rank)) route_[b] = i;
  }
  log().info("topology: {} processes, {} children, {} back-ends below", topology_->size(),
             children_.size(), route_.size());
}

// ---- launching children ----

void Node::launch_children() {
  bool waiting = false;
  for (auto& child : children_) {
    if (plan_.attach && child.role == Role::backend) {
      log().info("back-end {} will attach by itself", child.rank);
      continue;
    }
    waiting = true;
    if (auto r = launch_child(child); !r) {
      child.state = ChildState::gone;
      child.loss_reported = true;
      report_launch_failed(child.rank, r.error());
    }
  }
  if (waiting) {
    startup_timer_.expires_after(plan_.startup_timeout);
    startup_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) on_startup_timeout();
    });
  }
  check_subtree_ready();
}

Result<void> Node::launch_child(Child& child) {
  const auto& node = topology_->at(child.rank);
  const auto& me = topology_->at(id_.rank);
  std::vector<std::string> command;
  if (child.role == Role::commnode) {
    command = {plan_.commnode_exe};
  } else {
    command = plan_.backend_argv;
  }
  if (command.empty() || command[0].empty()) {
    return Error{"no program to run for " + describe(child.rank)};
  }
  char network[17];
  std::snprintf(network, sizeof network, "%016" PRIx64, id_.network_id);
  Environment env = {
      {kEnvParent, topology_->address_of(me.host) + ":" + std::to_string(listen_port_)},
      {kEnvRank, std::to_string(child.rank)},
      {kEnvNetworkId, network},
  };
  // Empty for a plain link: a child inherits its parent's environment, and with it
  // the description of the parent's own link.
  std::string link;
  if (topology_->link_between(node, me) == LinkKind::striped) {
    auto paths = transport::paths_between(topology_->nics_of(node.host), topology_->nics_of(me.host), listen_port_);
    link = encode_parent_link(topology_->links(), paths);
  }
  env.emplace_back(kEnvParentLink, link);
  std::vector<std::string> argv = command;
  if (node.host != me.host) {
    // Another host: its environment does not come with it, so pass ours on.
    for (const char* name : {"CANOPY_LOG_DIR", "CANOPY_LOG_LEVEL"}) {
      if (const char* v = std::getenv(name)) env.emplace_back(name, v);
    }
    argv = launcher_argv(plan_.launcher, node.host, command, env);
  }
  auto process = ChildProcess::spawn(io_, argv, env);
  if (!process) return Error{"cannot start " + describe(child.rank) + ": " + process.error()};
  child.process = std::move(*process);
  std::size_t index = child_index_.at(child.rank);
  child.process->watch([this, index](int status) { on_child_exit(index, status); });
  log().info("started {} as pid {}", describe(child.rank), child.process->pid());
  return {};
}

void Node::on_startup_timeout() {
  for (std::size_t i = 0; i < children_.size(); ++i) {
    Child& child = children_[i];
    if (child.state != ChildState::starting) continue;
    if (plan_.attach && child.role == Role::backend) continue;  // the front-end waits for those
    child.state = ChildState::gone;
    child.loss_reported = true;
    if (child.process) child.process->kill(SIGKILL);
    report_launch_failed(child.rank, describe(child.rank) + " did not connect within " +
                                         std::to_string(plan_.startup_timeout.count()) + " ms");
  }
}

void Node::check_subtree_ready() {
  if (ready_reported_ || stopping_) return;
  for (const auto& child : children_) {
    // In attach mode the tree is up once its commnodes are; back-ends come later.
    if (plan_.attach && child.role == Role::backend) continue;
    if (child.state != ChildState::ready) return;
  }
  ready_reported_ = true;
  startup_timer_.cancel();
  log().info("subtree ready ({} endpoints)", endpoints_.size());
  if (parent_) {
    Message message(id_);
    auto eps = message.body().initReady().initEndpoints(endpoints_.size());
    std::size_t i = 0;
    for (auto [rank, port] : endpoints_) {
      eps[i].setRank(rank);
      eps[i].setPort(port);
      ++i;
    }
    parent_->send(message.builder());
    return;
  }
  // Root: every listening endpoint is now known; tell the whole tree.
  std::vector<canopy::Node> nodes = topology_->nodes();
  for (auto& n : nodes) {
    if (auto it = endpoints_.find(n.rank); it != endpoints_.end()) n.port = it->second;
  }
  if (auto updated = Topology::make(std::move(nodes), topology_->hosts()); updated) {
    (void)updated->set_links(topology_->links());  // already checked
    topology_ = std::move(*updated);
  }
  // Back-ends too: an orphaned back-end needs the endpoints of its potential adopters.
  for (auto& child : children_) {
    if (child.link) send_topology(*child.link, true);
  }
  if (observer_) observer_->on_ready();
}

// ---- messages from the parent ----

void Node::on_parent_message(wire::Message::Reader msg) {
  auto body = msg.getBody();
  switch (body.which()) {
    case Body::TOPOLOGY: {
      auto t = body.getTopology();
      auto topology = decode_topology(t);
      if (!topology) {
        log().error("parent sent an invalid topology: {}", topology.error());
        begin_stop("invalid topology from parent");
        return;
      }
      if (t.getIsUpdate()) {
        // Endpoints only: the live shape (view_) keeps the reports applied so far.
        topology_ = std::move(*topology);
        for (auto& child : children_) {
          if (child.link) send_topology(*child.link, true);
        }
        log().debug("topology updated with listening endpoints");
        return;
      }
      if (topology_) {
        log().warn("ignoring a second topology from the parent");
        return;
      }
      if (!topology->find(id_.rank)) {
        log().error("parent's topology does not contain this node's rank {}", id_.rank);
        begin_stop("rank not in topology");
        return;
      }
      plan_.startup_timeout = std::chrono::milliseconds(t.getStartupTimeoutMs());
      plan_.launcher = t.getLauncher();
      plan_.commnode_exe = t.getCommnodeExe();
      plan_.attach = t.getAttachMode();
      auto ft = t.getFaultTolerance();
      plan_.fault.enabled = ft.getEnabled();
      plan_.fault.heartbeat = std::chrono::milliseconds(std::max<std::uint32_t>(10, ft.getHeartbeatMs()));
      plan_.fault.suspect = std::chrono::milliseconds(std::max<std::uint32_t>(20, ft.getSuspectMs()));
      plan_.fault.lost = std::chrono::milliseconds(std::max<std::uint32_t>(30, ft.getLostMs()));
      plan_.fault.adoption_timeout = std::chrono::milliseconds(ft.getAdoptionTimeoutMs());
      plan_.backend_argv.clear();
      for (auto a : t.getBackendArgv()) plan_.backend_argv.emplace_back(a);
      adopt_topology(std::move(*topology));
      if (!children_.empty()) {
        if (auto r = listen(); !r) {
          log().error("{}", r.error());
          report_launch_failed(id_.rank, describe(id_.rank) + ": " + r.error());
          begin_stop(r.error());
          return;
        }
      }
      launch_children();
      start_heartbeats();
      return;
    }
    case Body::HEARTBEAT:
      return;
    case Body::FAILURE_REPORT: {
      auto f = body.getFailureReport();
      on_failure_report(f.getRank(), f.getReason(), parent_.get());
      return;
    }
    case Body::ADOPTION_REPORT: {
      auto a = body.getAdoptionReport();
      on_adoption_report(a.getOrphan(), a.getAdopter(), a.getIncarnation(), parent_.get());
      return;
    }
    case Body::STREAM_CREATE: {
      open_stream(read_stream_spec(body.getStreamCreate()));
      return;
    }
    case Body::LOAD_FILTER: {
      auto l = body.getLoadFilter();
      do_load_filter(l.getRequestId(), l.getPath(), l.getName());
      return;
    }
    case Body::SET_PARAMS: {
      auto p = body.getSetParams();
      FilterSlot slot = FilterSlot::upstream;
      switch (p.getSlot()) {
        case wire::FilterSlot::UPSTREAM: slot = FilterSlot::upstream; break;
        case wire::FilterSlot::SYNC: slot = FilterSlot::sync; break;
        case wire::FilterSlot::DOWNSTREAM: slot = FilterSlot::downstream; break;
      }
      do_set_params(p.getRequestId(), p.getStreamId(), slot, decode_values(p.getParams()));
      return;
    }
    case Body::DATA: {
      auto d = body.getData();
      deliver_down(d.getStreamId(), d);
      return;
    }
    case Body::SHUTDOWN:
      begin_stop("shutdown: " + std::string(body.getShutdown().getReason()));
      return;
    default:
      log().warn("ignoring unexpected message {} from parent", static_cast<int>(body.which()));
  }
}

// ---- messages from children ----

void Node::on_child_message(std::size_t index, wire::Message::Reader msg) {
  Child& child = children_[index];
  auto body = msg.getBody();
  switch (body.which()) {
    case Body::DATA: {
      auto d = body.getData();
      if (d.getPointToPoint()) {
        route_point_to_point(d);
        return;
      }
      accept_upstream(index, d.getStreamId(), decode_packet(d));
      return;
    }
    case Body::REQUEST_ACK: {
      auto a = body.getRequestAck();
      request_acked(a.getRequestId(), index, a.getError());
      return;
    }
    case Body::HEARTBEAT:
      return;
    case Body::FAILURE_REPORT: {
      auto f = body.getFailureReport();
      on_failure_report(f.getRank(), f.getReason(), child.link.get());
      return;
    }
    case Body::ADOPTION_REPORT: {
      auto a = body.getAdoptionReport();
      on_adoption_report(a.getOrphan(), a.getAdopter(), a.getIncarnation(), child.link.get());
      return;
    }
    case Body::RECOVERED: {
      auto r = body.getRecovered();
      RecoveryReport report;
      report.orphan = r.getOrphan();
      report.adopter = r.getAdopter();
      report.failed_parent = r.getFailedParent();
      report.incarnation = r.getIncarnation();
      report.choose = std::chrono::microseconds(r.getChooseUs());
      report.connect = std::chrono::microseconds(r.getConnectUs());
      report.compensate = std::chrono::microseconds(r.getCompensateUs());
      report.cleanup = std::chrono::microseconds(r.getCleanupUs());
      report.attempts = r.getAttempts();
      for (auto s : r.getIncompleteStreams()) report.incomplete_streams.push_back(s);
      report_recovered(report);
      return;
    }
    case Body::STREAM_JOIN: {
      join_stream(index, read_stream_spec(body.getStreamJoin()));
      return;
    }
    case Body::LAUNCHED:
      report_launched(body.getLaunched().getRank());
      return;
    case Body::READY:
      for (auto ep : body.getReady().getEndpoints()) endpoints_[ep.getRank()] = ep.getPort();
      if (child.state == ChildState::connected) {
        child.state = ChildState::ready;
        log().info("child {}: connected -> ready", child.rank);
      }
      check_subtree_ready();
      return;
    case Body::LAUNCH_FAILED: {
      auto f = body.getLaunchFailed();
      report_launch_failed(f.getRank(), f.getReason());
      return;
    }
    case Body::NODE_LOST: {
      auto l = body.getNodeLost();
      report_node_lost(l.getRank(), l.getReason());
      return;
    }
    case Body::STREAM_ACK: {
      auto a = body.getStreamAck();
      auto it = streams_.find(a.getStreamId());
      if (it == streams_.end()) return;
      Stream& stream = it->second;
      if (a.getError().size() > 0) {
        stream.ack_error += (stream.ack_error.empty() ? "" : "; ") + std::string(a.getError().cStr());
      }
      auto& waiting = stream.awaiting_ack;
      auto pos = std::find(waiting.begin(), waiting.end(), index);
      if (pos == waiting.end()) return;
      waiting.erase(pos);
      if (waiting.empty()) report_stream_ack(stream.spec.id, stream.ack_error);
      return;
    }
    case Body::STREAM_ERROR: {
      auto e = body.getStreamError();
      report_stream_error(e.getStreamId(), e.getMessage());
      return;
    }
    default:
      log().warn("ignoring unexpected message {} from child {}", static_cast<int>(body.which()),
                 child.rank);
  }
}

void Node::on_child_closed(std::size_t index, std::string_view reason) {
  Child& child = children_[index];
  child.link.reset();
  if (stopping_) {
    log().info("child {}: {} -> gone ({})", child.rank, state_name(child.state), reason);
    child.state = ChildState::gone;
    check_stopped();
    return;
  }
  log().warn("child {}: {} -> gone ({})", child.rank, state_name(child.state), reason);
  child.state = ChildState::gone;
  child.close_reason = std::string(reason);
  // Streams keep waiting for it until the loss has been reported (finish_child_loss),
  // so that the front-end hears of the loss before any aggregate that lacks it.
  if (child.process && child.process->running()) {
    // Wait briefly for the exit status, which makes a better report.
    child.loss_timer = std::make_unique<asio::steady_timer>(io_, kExitStatusWait);
    child.loss_timer->async_wait([this, index](const boost::system::error_code& ec) {
      if (!ec) finish_child_loss(index);
    });
  } else {
    finish_child_loss(index);
  }
}

void Node::on_child_exit(std::size_t index, int status) {
  Child& child = children_[index];
  child.exit_status = status;
  log().info("{} (pid {}) {}", describe(child.rank), child.process->pid(), describe_wait_status(status));
  if (stopping_) {
    check_stopped();
    return;
  }
  if (child.state == ChildState::starting) {
    child.state = ChildState::gone;
    child.close_reason = "never connected";
    finish_child_loss(index);
  } else if (child.state == ChildState::gone) {
    finish_child_loss(index);
  }
  // Otherwise the connection is still open; its closing will report the loss.
}

void Node::finish_child_loss(std::size_t index) {
  Child& child = children_[index];
  if (child.loss_reported || stopping_) return;
  child.loss_reported = true;
  if (child.loss_timer) child.loss_timer->cancel();
  std::string what = describe(child.rank) + " " +
                     (child.exit_status ? describe_wait_status(*child.exit_status) : child.close_reason);
  if (!ready_reported_) {
    report_launch_failed(child.rank, what + (child.close_reason == "never connected" ? " before connecting" : " during start-up"));
  } else {
    report_node_lost(child.rank, what);
  }
  // Reports and data share the ordered link up, so from here on aggregates without
  // this child follow the report of its loss.
  for (auto& [id, stream] : streams_) drop_member(stream, index);
  if (view_ && view_->apply_failure(child.rank)) {
    loosen_waves();
    Message report(id_);
    auto f = report.body().initFailureReport();
    f.setRank(child.rank);
    f.setReason(what);
    flood(report, nullptr);
  }
  std::vector<std::uint64_t> pending;
  for (const auto& [id, request] : requests_) pending.push_back(id);
  for (auto id : pending) request_acked(id, index, describe(child.rank) + " was lost");
}

// ---- streams ----

void Node::create_stream(const StreamSpec& spec) {
  for (Rank b : spec.backends) {
    const canopy::Node* n = topology_->find(b);
    if (!n || n->role != Role::backend) {
      report_stream_ack(spec.id, "rank " + std::to_string(b) + " is not a back-end of this network");
      return;
    }
  }
  open_stream(spec);
}

void Node::open_stream(const StreamSpec& spec) {
  if (streams_.count(spec.id)) {
    report_stream_ack(spec.id, describe(id_.rank) + ": stream " + std::to_string(spec.id) + " already exists");
    return;
  }
  Stream stream;
  stream.spec = spec;
  if (auto made = make_filters(stream); !made) {
    report_stream_ack(spec.id, describe(id_.rank) + ": " + made.error());
    return;
  }
  if (!children_.empty()) {
    std::vector<bool> member(children_.size(), false);
    for (Rank b : spec.backends) {
      if (auto it = route_.find(b); it != route_.end()) member[it->second] = true;
    }
    for (std::size_t i = 0; i < children_.size(); ++i) {
      if (member[i] && children_[i].link) stream.members.push_back(i);
    }
    stream.queues.resize(stream.members.size());
    stream.awaiting_ack = stream.members;
  }
  auto [it, inserted] = streams_.emplace(spec.id, std::move(stream));
  log().info("stream {} opened: filter {}, sync {}, {} member children", spec.id, spec.upstream_filter,
             static_cast<int>(spec.sync), it->second.members.size());
  if (it->second.members.empty()) {
    report_stream_ack(spec.id, "");
    return;
  }
  Message message(id_);
  auto c = message.body().initStreamCreate();
  c.setStreamId(spec.id);
  auto list = c.initBackends(spec.backends.size());
  for (std::size_t i = 0; i < spec.backends.size(); ++i) list.set(i, spec.backends[i]);
  c.setUpstreamFilter(spec.upstream_filter);
  c.setSyncMode(to_wire(spec.sync));
  c.setSyncTimeoutMs(static_cast<std::uint32_t>(spec.sync_timeout.count()));
  c.setDownstreamFilter(spec.downstream_filter);
  encode_values(spec.upstream_params.values(), c.initUpstreamParams(spec.upstream_params.size()));
  encode_values(spec.downstream_params.values(), c.initDownstreamParams(spec.downstream_params.size()));
  for (std::size_t i : it->second.members) children_[i].link->send(message.builder());
}

void Node::send_down(StreamId stream, const Packet& packet, std::optional<Rank> destination) {
  forward_down(stream, packet, destination);
}

void Node::deliver_down(StreamId stream, wire::DataPacket::Reader packet) {
  std::optional<Rank> destination;
  if (packet.getPointToPoint()) destination = packet.getDestination();
  if (children_.empty()) {
    if (destination && *destination != id_.rank) {
      log().warn("dropping a packet for rank {} delivered to rank {}", *destination, id_.rank);
      return;
    }
    if (observer_) observer_->on_downstream(stream, decode_packet(packet));
    return;
  }
  forward_down(stream, decode_packet(packet), destination);
}

void Node::forward_down(StreamId id, const Packet& input, std::optional<Rank> destination) {
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    if (is_root() && observer_) observer_->on_stream_error(id, "no such stream " + std::to_string(id));
    log().warn("dropping a packet for unknown stream {}", id);
    return;
  }
  Stream& stream = it->second;
  const Packet* packet = &input;
  std::vector<Packet> filtered;
  if (stream.downstream) {
    if (auto r = stream.downstream->execute(std::span<const Packet>(&input, 1), filtered); !r) {
      report_stream_error(id, describe(id_.rank) + ": " + r.error());
      return;
    }
    if (filtered.empty()) return;
    packet = &filtered.front();
  }
  Message message(id_);
  auto d = message.body().initData();
  d.setStreamId(id);
  encode_packet(*packet, d);
  if (destination) {
    d.setPointToPoint(true);
    d.setDestination(*destination);
    auto r = route_.find(*destination);
    if (r == route_.end() || !children_[r->second].link) {
      report_stream_error(id, describe(id_.rank) + ": no route to back-end " + std::to_string(*destination));
      return;
    }
    children_[r->second].link->send(message.builder());
    return;
  }
  for (std::size_t i : stream.members) {
    if (children_[i].link) children_[i].link->send(message.builder());
  }
}

Result<void> Node::make_filters(Stream& stream) {
  const StreamSpec& spec = stream.spec;
  std::uint32_t live = 0;
  for (const auto& child : children_) live += child.link != nullptr;
  const FilterContext context{.rank = id_.rank, .stream = spec.id, .upstream = true, .children = live};
  auto filter = filters_.create(spec.upstream_filter, context, spec.upstream_params);
  if (children_.empty()) {
    // A back-end keeps an instance of a state-recoverable upstream filter over its
    // own packets: its state is what it sends a new parent if its parent dies.
    if (filter && (*filter)->state_recoverable()) stream.filter = std::move(*filter);
    return {};
  }
  if (!filter) return Error{filter.error()};
  stream.filter = std::move(*filter);
  if (!spec.downstream_filter.empty()) {
    const FilterContext down_context{.rank = id_.rank, .stream = spec.id, .upstream = false, .children = live};
    auto downstream = filters_.create(spec.downstream_filter, down_context, spec.downstream_params);
    if (!downstream) return Error{"downstream " + downstream.error()};
    stream.downstream = std::move(*downstream);
  }
  if (spec.sync == SyncMode::time_out && !stream.wave_timer) {
    stream.wave_timer = std::make_unique<asio::steady_timer>(io_);
  }
  return {};
}

void Node::send_up(StreamId stream, Packet packet) {
  packet.set_source(id_.rank);
  packet.set_contributors(1);
  if (auto it = streams_.find(stream); it != streams_.end() && it->second.filter) {
    it->second.wave.clear();
    it->second.wave.push_back(std::move(packet));
    emit_wave(it->second);
    return;
  }
  report_upstream(stream, packet);
}

void Node::accept_upstream(std::size_t child, StreamId id, Packet packet) {
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    log().warn("dropping a packet from child {} for unknown stream {}", children_[child].rank, id);
    return;
  }
  Stream& stream = it->second;
  auto pos = std::find(stream.members.begin(), stream.members.end(), child);
  if (pos == stream.members.end()) {
    log().warn("dropping a packet on stream {} from non-member child {}", id, children_[child].rank);
    return;
  }
  if (stream.spec.sync == SyncMode::dont_wait) {
    stream.wave.clear();
    stream.wave.push_back(std::move(packet));
    emit_wave(stream);
    return;
  }
  auto& queue = stream.queues[pos - stream.members.begin()];
  if (queue.empty()) ++stream.nonempty;
  queue.push_back(std::move(packet));
  run_waves(stream);
}

void Node::run_waves(Stream& stream) {
  bool emitted = false;
  while (!stream.members.empty() && stream.nonempty == stream.members.size()) {
    stream.wave.clear();
    for (auto& queue : stream.queues) {
      stream.wave.push_back(std::move(queue.front()));
      queue.pop_front();
      if (queue.empty()) --stream.nonempty;
    }
    emit_wave(stream);
    emitted = true;
  }
  if (stream.wave_timer) {
    // time_out mode: the timer measures from the first packet of the open wave.
    if (emitted || stream.nonempty == 0) {
      stream.timer_armed = false;
      stream.wave_timer->cancel();
    }
    if (stream.nonempty > 0 && !stream.timer_armed) arm_wave_timer(stream);
  }
}

void Node::arm_wave_timer(Stream& stream) {
  stream.timer_armed = true;
  // After the tree changed shape, wait-for-all tolerates stragglers for the suspect
  // threshold (see loosen_waves).
  stream.wave_timer->expires_after(stream.spec.sync == SyncMode::time_out ? stream.spec.sync_timeout
                                                                          : plan_.fault.suspect);
  stream.wave_timer->async_wait([this, id = stream.spec.id](const boost::system::error_code& ec) {
    if (!ec) run_partial_wave(id);
  });
}

// time_out mode: the time is up for the open wave; filter what has arrived.
void Node::run_partial_wave(StreamId id) {
  auto it = streams_.find(id);
  if (it == streams_.end() || !it->second.timer_armed) return;
  Stream& stream = it->second;
  stream.timer_armed = false;
  // Everything queued has waited at least the time-out: close waves until the
  // queues are empty, or a backlog left by a failure would drain one wave per
  // time-out.
  while (stream.nonempty > 0) {
    stream.wave.clear();
    for (auto& queue : stream.queues) {
      if (queue.empty()) continue;
      stream.wave.push_back(std::move(queue.front()));
      queue.pop_front();
      if (queue.empty()) --stream.nonempty;
    }
    log().debug("stream {}: wave closed by time-out with {} of {} children", id, stream.wave.size(),
                stream.members.size());
    emit_wave(stream);
  }
  run_waves(stream);
}

// Once a child has left or joined, the packets in flight at the moment of the
// failure (lost, or compensated by filter state) leave the children's packet counts
// unequal for good, so a wave could wait forever for a packet that will never come.
// From the first failure or adoption this node hears of, its wait-for-all streams
// close a wave that has waited longer than the suspect threshold with the packets
// present. Every node floods the reports, so every node loosens its streams.
void Node::loosen_waves() {
  for (auto& [id, stream] : streams_) {
    if (stream.wave_timer || !stream.filter || children_.empty()) continue;
    stream.wave_timer = std::make_unique<asio::steady_timer>(io_);
    log().info("stream {}: the tree changed; waves wait at most {} ms for stragglers", id, plan_.fault.suspect.count());
    run_waves(stream);
  }
}

void Node::emit_wave(Stream& stream) {
  auto& out = stream.output;
  out.clear();
  if (auto r = stream.filter->execute(stream.wave, out); !r) {
    report_stream_error(stream.spec.id, describe(id_.rank) + ": " + r.error());
    return;
  }
  for (auto& packet : out) {
    packet.set_source(id_.rank);
    report_upstream(stream.spec.id, packet);
  }
}

// ---- point-to-point between back-ends ----

void Node::send_to_backend(Rank destination, StreamId stream, Packet packet) {
  packet.set_source(id_.rank);
  packet.set_contributors(1);
  capnp::MallocMessageBuilder builder;
  auto d = builder.initRoot<wire::DataPacket>();
  d.setStreamId(stream);
  encode_packet(packet, d);
  d.setPointToPoint(true);
  d.setDestination(destination);
  route_point_to_point(d.asReader());
}

// Down towards `destination` if it is below this node, else up; the first node on the
// way up that has it below is the nearest common ancestor.
void Node::route_point_to_point(wire::DataPacket::Reader packet) {
  const Rank destination = packet.getDestination();
  if (destination == id_.rank && children_.empty()) {
    if (observer_) observer_->on_downstream(packet.getStreamId(), decode_packet(packet));
    return;
  }
  std::shared_ptr<Link> next;
  if (auto r = route_.find(destination); r != route_.end()) {
    next = children_[r->second].link;
    if (!next) {
      report_stream_error(packet.getStreamId(),
                          describe(id_.rank) + ": point-to-point packet from rank " +
                              std::to_string(packet.getSourceRank()) + " to back-end " +
                              std::to_string(destination) + " dropped: its subtree is gone");
      return;
    }
  } else if (!is_root()) {
    Message message(id_);
    message.body().setData(packet);
    send_to_parent(message);  // held back while orphaned
    return;
  } else {
    report_stream_error(packet.getStreamId(),
                        "point-to-point packet from rank " + std::to_string(packet.getSourceRank()) +
                            " dropped: " + std::to_string(destination) + " is not a back-end of this network");
    return;
  }
  Message message(id_);
  message.body().setData(packet);
  next->send(message.builder());
}

// ---- requests: filter loading and parameters ----

void Node::load_filter(std::uint64_t request, const std::string& path, const std::string& name) {
  do_load_filter(request, path, name);
}

void Node::do_load_filter(std::uint64_t request, const std::string& path, const std::string& name) {
  std::string error;
  {
    if (auto r = filters_.load(path, name); !r) {
      error = describe(id_.rank) + ": " + r.error();
      log().error("load filter {} from {}: {}", name, path, r.error());
    } else {
      log().info("loaded filter {} from {}", name, path);
    }
  }
  // Back-ends too: they keep state-recoverable filters over their own packets.
  std::vector<std::size_t> targets;
  for (std::size_t i = 0; i < children_.size(); ++i) {
    if (children_[i].link) targets.push_back(i);
  }
  start_request(request, std::move(targets), std::move(error), [&](Message& message) {
    auto l = message.body().initLoadFilter();
    l.setRequestId(request);
    l.setPath(path);
    l.setName(name);
  });
}

void Node::set_params(std::uint64_t request, StreamId stream, FilterSlot slot, const Packet& params) {
  do_set_params(request, stream, slot, params);
}

void Node::do_set_params(std::uint64_t request, StreamId id, FilterSlot slot, const Packet& params) {
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    report_request_ack(request, describe(id_.rank) + ": no stream " + std::to_string(id));
    return;
  }
  Stream& stream = it->second;
  Result<void> applied;
  if (!children_.empty()) {
    switch (slot) {
      case FilterSlot::upstream:
        applied = stream.filter->set_params(params);
        break;
      case FilterSlot::downstream:
        if (stream.downstream) {
          applied = stream.downstream->set_params(params);
        } else if (params.size() != 0) {
          applied = Error{"the stream has no downstream filter"};
        }
        break;
      case FilterSlot::sync: {
        auto timeout = sync_timeout_param(params);
        if (!timeout) {
          applied = Error{timeout.error()};
        } else {
          stream.spec.sync_timeout = *timeout;
        }
        break;
      }
    }
  }
  std::string error = applied ? "" : describe(id_.rank) + ": " + applied.error();
  std::vector<std::size_t> targets;
  for (std::size_t i : stream.members) {
    if (children_[i].link && children_[i].role == Role::commnode) targets.push_back(i);
  }
  start_request(request, std::move(targets), std::move(error), [&](Message& message) {
    auto p = message.body().initSetParams();
    p.setRequestId(request);
    p.setStreamId(id);
    p.setSlot(slot == FilterSlot::upstream ? wire::FilterSlot::UPSTREAM
              : slot == FilterSlot::sync   ? wire::FilterSlot::SYNC
                                           : wire::FilterSlot::DOWNSTREAM);
    encode_values(params.values(), p.initParams(params.size()));
  });
}

void Node::start_request(std::uint64_t request, std::vector<std::size_t> children, std::string error,
                         const std::function<void(Message&)>& fill) {
  if (children.empty()) {
    report_request_ack(request, error);
    return;
  }
  Message message(id_);
  fill(message);
  for (std::size_t i : children) children_[i].link->send(message.builder());
  requests_[request] = Request{std::move(children), std::move(error)};
}

void Node::request_acked(std::uint64_t request, std::size_t child, const std::string& error) {
  auto it = requests_.find(request);
  if (it == requests_.end()) return;
  auto& awaiting = it->second.awaiting;
  auto pos = std::find(awaiting.begin(), awaiting.end(), child);
  if (pos == awaiting.end()) return;
  awaiting.erase(pos);
  auto& all = it->second.error;
  // Keep reports bounded however many nodes fail the same way.
  constexpr std::size_t kMaxErrorText = 4096;
  if (!error.empty() && all.size() < kMaxErrorText) all += (all.empty() ? "" : "; ") + error;
  if (all.size() >= kMaxErrorText && all.find("(more errors omitted)") == std::string::npos) {
    all += "; (more errors omitted)";
  }
  if (!awaiting.empty()) return;
  std::string result = std::move(all);
  requests_.erase(it);
  report_request_ack(request, result);
}

void Node::report_request_ack(std::uint64_t request, const std::string& error) {
  if (is_root()) {
    if (observer_) observer_->on_request_ack(request, error);
    return;
  }
  Message message(id_);
  auto a = message.body().initRequestAck();
  a.setRequestId(request);
  a.setError(error);
  send_to_parent(message);
}

void Node::drop_member(Stream& stream, std::size_t child) {
  auto pos = std::find(stream.members.begin(), stream.members.end(), child);
  if (pos != stream.members.end()) {
    auto q = stream.queues.begin() + (pos - stream.members.begin());
    if (!q->empty()) --stream.nonempty;
    stream.queues.erase(q);
    stream.members.erase(pos);
  }
  auto& waiting = stream.awaiting_ack;
  if (auto w = std::find(waiting.begin(), waiting.end(), child); w != waiting.end()) {
    waiting.erase(w);
    stream.ack_error += (stream.ack_error.empty() ? "" : "; ") + describe(children_[child].rank) + " was lost";
    if (waiting.empty()) report_stream_ack(stream.spec.id, stream.ack_error);
  }
  run_waves(stream);
}

// ---- reports travelling up ----

void Node::send_to_parent(Message& message) {
  if (parent_) {
    parent_->send(message.builder());
    return;
  }
  if (!orphan_) return;
  // Orphaned: hold the message back until a new parent adopts us, within a bound.
  constexpr std::size_t kMaxHeldBytes = 64u << 20;
  auto words = capnp::messageToFlatArray(message.builder());
  if (orphan_->held_bytes + words.size() * sizeof(capnp::word) > kMaxHeldBytes) {
    auto body = message.builder().getRoot<wire::Message>().getBody();
    if (body.isData()) orphan_->overflowed.push_back(body.getData().getStreamId());
    log().warn("orphan: dropping held-back output beyond {} MiB", kMaxHeldBytes >> 20);
    return;
  }
  orphan_->held_bytes += words.size() * sizeof(capnp::word);
  orphan_->held.push_back(std::move(words));
}

void Node::report_launched(Rank rank) {
  if (is_root()) {
    if (observer_) observer_->on_launched(rank);
    return;
  }
  Message message(id_);
  message.body().initLaunched().setRank(rank);
  send_to_parent(message);
}

void Node::report_launch_failed(Rank rank, const std::string& reason) {
  log().error("launch failed: {}", reason);
  if (is_root()) {
    if (observer_) observer_->on_launch_failed(rank, reason);
    return;
  }
  Message message(id_);
  auto f = message.body().initLaunchFailed();
  f.setRank(rank);
  f.setReason(reason);
  send_to_parent(message);
}

void Node::report_node_lost(Rank rank, const std::string& reason) {
  if (is_root()) {
    if (observer_) observer_->on_node_lost(rank, reason);
    return;
  }
  Message message(id_);
  auto l = message.body().initNodeLost();
  l.setRank(rank);
  l.setReason(reason);
  send_to_parent(message);
}

void Node::report_stream_ack(StreamId stream, const std::string& error) {
  if (is_root()) {
    if (observer_) observer_->on_stream_ack(stream, error);
    return;
  }
  Message message(id_);
  auto a = message.body().initStreamAck();
  a.setStreamId(stream);
  a.setError(error);
  send_to_parent(message);
}

void Node::report_stream_error(StreamId stream, const std::string& error) {
  log().error("stream {}: {}", stream, error);
  if (is_root()) {
    if (observer_) observer_->on_stream_error(stream, error);
    return;
  }
  Message message(id_);
  auto e = message.body().initStreamError();
  e.setStreamId(stream);
  e.setRank(id_.rank);
  e.setMessage(error);
  send_to_parent(message);
}

void Node::report_upstream(StreamId stream, const Packet& packet) {
  if (is_root()) {
    if (observer_) observer_->on_upstream(stream, Packet(packet));
    return;
  }
  if (orphan_) {
    // The filter state of a recoverable stream subsumes its pending output: the
    // state goes to the new parent instead.
    auto it = streams_.find(stream);
    if (it != streams_.end() && it->second.filter && it->second.filter->state_recoverable()) return;
  }
  Message message(id_);
  auto d = message.body().initData();
  d.setStreamId(stream);
  encode_packet(packet, d);
  send_to_parent(message);
}

// ---- fault tolerance: event detection ----

void Node::attach_parent(std::shared_ptr<Link> link) {
  const Link* raw = link.get();
  link->start(
      [this, raw](capnp::MessageReader& m) {
        auto msg = m.getRoot<wire::Message>();
        if (parent_.get() == raw) {
          on_parent_message(msg);
        } else if (orphan_ && orphan_->trying.get() == raw && msg.getBody().isAdopted()) {
          on_adopted(msg.getBody().getAdopted());
        } else if (orphan_ && orphan_->trying.get() == raw && msg.getBody().isShutdown()) {
          // The adopter is stopping because the network is: stop with it rather than
          // look for a parent until the adoption time-out.
          begin_stop("shutdown while orphaned: " + std::string(msg.getBody().getShutdown().getReason()));
        }
      },
      [this, raw](std::string_view reason) {
        if (parent_.get() == raw) {
          on_parent_closed(reason);
        } else if (orphan_ && orphan_->trying.get() == raw) {
          log().warn("adopter {} refused or failed: {}", orphan_->trying_rank, reason);
          orphan_->attempt.cancel();
          orphan_->trying.reset();
          asio::post(io_, [this] { try_next_adopter(); });
        }
      });
  if (!orphan_) parent_ = std::move(link);
}

void Node::on_parent_closed(std::string_view reason) {
  if (stopping_) {
    if (stopped_) notify_stopped();  // the parent link's flush is done
    return;
  }
  const bool parent_is_root = view_ && view_->parent(id_.rank) == view_->root();
  if (!plan_.fault.enabled || !view_ || !topology_ || parent_is_root) {
    // The front-end is gone (or healing is off): nothing to rejoin.
    begin_stop("lost parent: " + std::string(reason));
    return;
  }
  become_orphan(std::string(reason));
}

void Node::start_heartbeats() {
  if (!plan_.fault.enabled || heartbeats_started_) return;
  heartbeats_started_ = true;
  heartbeat_timer_.expires_after(plan_.fault.heartbeat / 2);
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) heartbeat_tick();
  });
}

void Node::heartbeat_tick() {
  if (stopping_) return;
  const auto now = std::chrono::steady_clock::now();
  if (parent_) watch_peer(*parent_, parent_peer_, "parent " + describe(view_->parent(id_.rank)), now);
  for (auto& child : children_) {
    if (!child.link || !child.link->is_open()) continue;
    watch_peer(*child.link, child.peer, "child " + describe(child.rank), now);
    if (child.peer == PeerState::lost && child.process && child.process->running()) {
      // Fence it: a hung process must not wake up later and rejoin a healed tree.
      child.process->kill(SIGKILL);
    }
  }
  heartbeat_timer_.expires_after(plan_.fault.heartbeat / 2);
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) heartbeat_tick();
  });
}

// Heartbeats go only on links idle for a heartbeat interval; a peer silent for the
// suspect threshold is suspect, for the lost threshold lost, and its link is cut.
void Node::watch_peer(Link& link, PeerState& state, const std::string& who,
                      std::chrono::steady_clock::time_point now) {
  if (now - link.last_sent() >= plan_.fault.heartbeat) {
    Message beat(id_);
    beat.body().setHeartbeat();
    link.send(beat.builder());
  }
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - link.last_received());
  PeerState next = silent >= plan_.fault.lost      ? PeerState::lost
                   : silent >= plan_.fault.suspect ? PeerState::suspect
                                                   : PeerState::alive;
  if (next == state) return;
  log().warn("{}: {} -> {} (silent for {} ms)", who, peer_state_name(state), peer_state_name(next), silent.count());
  state = next;
  if (next == PeerState::lost) link.abort("no message or heartbeat for " + std::to_string(silent.count()) + " ms");
}

// ---- fault tolerance: topology reports ----

void Node::flood(Message& message, const Link* except) {
  if (parent_ && parent_.get() != except) parent_->send(message.builder());
  for (auto& child : children_) {
    if (child.link && child.link.get() != except) child.link->send(message.builder());
  }
}

void Node::on_failure_report(Rank rank, const std::string& reason, const Link* from) {
  if (!view_ || !view_->contains(rank) || !view_->apply_failure(rank)) return;  // not news
  log().info("failure report: {} ({})", describe(rank), reason);
  loosen_waves();
  Message message(id_);
  auto f = message.body().initFailureReport();
  f.setRank(rank);
  f.setReason(reason);
  flood(message, from);
}

void Node::on_adoption_report(Rank orphan, Rank adopter, std::uint32_t incarnation, const Link* from) {
  if (!view_ || !view_->apply_adoption(orphan, adopter, incarnation)) return;  // stale or known
  log().info("adoption report: {} adopted by {} (incarnation {})", orphan, adopter, incarnation);
  update_routes(orphan);
  loosen_waves();
  if (is_root() && observer_) observer_->on_adoption(orphan, adopter, incarnation);
  Message message(id_);
  auto a = message.body().initAdoptionReport();
  a.setOrphan(orphan);
  a.setAdopter(adopter);
  a.setIncarnation(incarnation);
  flood(message, from);
}

// The back-ends below a re-adopted orphan are reached through whichever child of
// this node is now its ancestor, if any.
void Node::update_routes(Rank orphan) {
  Rank via = TreeView::kNone;
  std::size_t steps = 0;
  for (Rank r = orphan; r != TreeView::kNone && steps < 64; r = view_->parent(r), ++steps) {
    if (view_->parent(r) == id_.rank) {
      via = r;
      break;
    }
  }
  auto child = via == TreeView::kNone ? child_index_.end() : child_index_.find(via);
  for (Rank b : view_->backends_below(orphan)) {
    if (child != child_index_.end()) {
      route_[b] = child->second;
    } else {
      route_.erase(b);
    }
  }
}

// ---- fault tolerance: adopting an orphan ----

void Node::accept_orphan(const std::shared_ptr<Link>& link, wire::Hello::Reader hello) {
  const Rank orphan = hello.getRank();
  auto refuse = [&](const std::string& why) {
    log().warn("refusing to adopt {}: {}", orphan, why);
    link->close("adoption refused: " + why);
  };
  if (!plan_.fault.enabled || !view_) return refuse("fault tolerance is off");
  if (stopping_) {
    // Tell the orphan why, so that it stops too instead of trying others.
    Message stop(id_);
    stop.body().initShutdown().setReason(stop_reason_);
    link->send(stop.builder());
    return refuse("this node is stopping");
  }
  if (orphan_) return refuse("this node is itself an orphan");
  if (!view_->contains(orphan) || orphan == view_->root()) return refuse("unknown rank");
  if (from_wire(hello.getRole()) != view_->role(orphan)) return refuse("role does not match the topology");
  if (view_->in_subtree(id_.rank, orphan)) return refuse("this node is inside the orphan's subtree");
  if (view_->role(id_.rank) == Role::backend) return refuse("a back-end adopts no one");
  if (view_->height(id_.rank) < view_->height(orphan) + 1) return refuse("adoption would make the tree deeper");
  const std::uint32_t incarnation = hello.getIncarnation();
  if (incarnation <= view_->incarnation(orphan)) return refuse("stale incarnation");

  std::size_t index;
  if (auto it = child_index_.find(orphan); it != child_index_.end()) {
    if (children_[it->second].link) return refuse("already connected");
    index = it->second;  // a former child of ours coming back
  } else {
    index = children_.size();
    Child fresh;
    fresh.rank = orphan;
    fresh.role = view_->role(orphan);
    children_.push_back(std::move(fresh));
    child_index_[orphan] = index;
  }
  Child& child = children_[index];
  child.link = link;
  child.state = ChildState::ready;  // its subtree is already up
  child.adopted = true;
  child.peer = PeerState::alive;
  child.loss_reported = false;
  child.close_reason.clear();
  child_of_link_[link.get()] = index;
  hello_deadlines_.erase(link.get());
  std::erase(pending_, link);
  log().info("adopted {} from {} (pid {}, incarnation {})", describe(orphan), link->peer(), hello.getPid(),
             incarnation);

  Message reply(id_);
  auto a = reply.body().initAdopted();
  a.setAdopter(id_.rank);
  a.setIncarnation(incarnation);
  link->send(reply.builder());
  on_adoption_report(orphan, id_.rank, incarnation, link.get());
}

// A stream of an adopted orphan: join it to the local stream, creating the stream
// here (and asking upwards) if this node was not on it.
void Node::join_stream(std::size_t child, const StreamSpec& spec) {
  auto it = streams_.find(spec.id);
  if (it == streams_.end()) {
    Stream stream;
    stream.spec = spec;
    if (auto made = make_filters(stream); !made) {
      report_stream_error(spec.id, describe(id_.rank) + ": cannot join stream for an adopted orphan: " + made.error());
      return;
    }
    it = streams_.emplace(spec.id, std::move(stream)).first;
    if (parent_ || orphan_) {
      Message join(id_);
      write_stream_spec(join.body().initStreamJoin(), spec);
      send_to_parent(join);
    }
    log().info("stream {} created here for an adopted orphan", spec.id);
    loosen_waves();
  }
  Stream& stream = it->second;
  if (std::find(stream.members.begin(), stream.members.end(), child) == stream.members.end()) {
    stream.members.push_back(child);
    stream.queues.emplace_back();
  }
}

void Node::write_stream_spec(wire::StreamCreate::Builder c, const StreamSpec& spec) const {
  c.setStreamId(spec.id);
  auto list = c.initBackends(spec.backends.size());
  for (std::size_t i = 0; i < spec.backends.size(); ++i) list.set(i, spec.backends[i]);
  c.setUpstreamFilter(spec.upstream_filter);
  c.setSyncMode(to_wire(spec.sync));
  c.setSyncTimeoutMs(static_cast<std::uint32_t>(spec.sync_timeout.count()));
  c.setDownstreamFilter(spec.downstream_filter);
  encode_values(spec.upstream_params.values(), c.initUpstreamParams(spec.upstream_params.size()));
  encode_values(spec.downstream_params.values(), c.initDownstreamParams(spec.downstream_params.size()));
}

// ---- fault tolerance: being an orphan ----

void Node::become_orphan(const std::string& reason) {
  const Rank failed = view_->parent(id_.rank);
  log().info("parent {} lost ({}): orphaned, looking for an adopter", describe(failed), reason);
  orphan_ = std::make_unique<Orphanhood>(io_);
  orphan_->failed = failed;
  orphan_->since = std::chrono::steady_clock::now();
  parent_.reset();
  parent_peer_ = PeerState::alive;
  on_failure_report(failed, describe(failed) + ": " + reason, nullptr);
  orphan_->deadline.expires_after(plan_.fault.adoption_timeout);
  orphan_->deadline.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !orphan_) return;
    begin_stop("no adopter accepted this node within " + std::to_string(plan_.fault.adoption_timeout.count()) + " ms");
  });
  start_adoption_round();
}

void Node::start_adoption_round() {
  if (!orphan_ || stopping_) return;
  auto t0 = std::chrono::steady_clock::now();
  orphan_->candidates = view_->potential_adopters(id_.rank, 16);
  orphan_->choose += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  orphan_->next = 0;
  std::string list;
  for (Rank r : orphan_->candidates) list += (list.empty() ? "" : " ") + std::to_string(r);
  log().info("potential adopters: {}", list.empty() ? "none" : list);
  try_next_adopter();
}

void Node::try_next_adopter() {
  if (!orphan_ || stopping_ || orphan_->trying || orphan_->socket || orphan_->striped_connecting) return;
  auto& o = *orphan_;
  while (o.next < o.candidates.size()) {
    Rank candidate = o.candidates[o.next++];
    const canopy::Node* n = topology_->find(candidate);
    if (!n || n->port == 0 || !view_->alive(candidate)) continue;
    boost::system::error_code ec;
    auto address = asio::ip::make_address(topology_->address_of(n->host), ec);
    if (ec) {
      asio::ip::tcp::resolver resolver(io_);
      auto results = resolver.resolve(topology_->address_of(n->host), "0", ec);
      if (ec || results.empty()) continue;
      address = results.begin()->endpoint().address();
    }
    if (o.attempts++ == 0) o.connect_start = std::chrono::steady_clock::now();
    o.trying_rank = candidate;
    log().info("asking {} to adopt this node", describe(candidate));
    // Bounded: an adopter that does not answer in time is skipped.
    o.attempt.expires_after(std::max(std::chrono::milliseconds(500), plan_.fault.lost));
    o.attempt.async_wait([this](const boost::system::error_code& ec) {
      if (ec || !orphan_) return;
      log().warn("adopter {} did not answer in time", orphan_->trying_rank);
      if (orphan_->trying) {
        orphan_->trying->abort("no answer to the adoption request");
      } else if (orphan_->socket) {
        boost::system::error_code ignored;
        orphan_->socket->close(ignored);
      } else if (orphan_->striped_connecting) {
        // Its handshake cannot be cancelled: forget it (a late link is aborted).
        orphan_->attempt_id = 0;
        orphan_->striped_connecting = false;
        asio::post(io_, [this] { try_next_adopter(); });
      }
    });
    if (topology_->link_between(topology_->at(id_.rank), *n) == LinkKind::striped) {
      auto paths = transport::paths_between(topology_->nics_of(topology_->at(id_.rank).host),
                                            topology_->nics_of(n->host), n->port);
      o.striped_connecting = true;
      o.attempt_id = ++striped_attempts_;
      transport::StripedLink::async_connect(
          io_, std::move(paths), striped_options(topology_->links()),
          [this, candidate, id = o.attempt_id](Result<std::shared_ptr<transport::StripedLink>> link) {
            bool current = orphan_ && orphan_->attempt_id == id && !stopping_;
            if (!current) {
              if (link) (*link)->abort("adoption attempt abandoned");
              return;
            }
            orphan_->striped_connecting = false;
            if (!link) {
              log().warn("cannot reach potential adopter {}: {}", candidate, link.error());
              orphan_->attempt.cancel();
              asio::post(io_, [this] { try_next_adopter(); });
              return;
            }
            adopter_connected(candidate, std::move(*link));
          });
      return;
    }
    o.socket = std::make_unique<asio::ip::tcp::socket>(io_);
    o.socket->async_connect({address, n->port}, [this, candidate](const boost::system::error_code& ec) {
      if (!orphan_ || stopping_) return;
      auto socket = std::move(orphan_->socket);
      if (ec) {
        log().warn("cannot reach potential adopter {}: {}", candidate, ec.message());
        orphan_->attempt.cancel();
        asio::post(io_, [this] { try_next_adopter(); });
        return;
      }
      adopter_connected(candidate, TcpLink::create(std::move(*socket)));
    });
    return;
  }
  // Everyone on the list failed: views change as reports arrive; try again shortly.
  o.retry.expires_after(std::chrono::milliseconds(100));
  o.retry.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) start_adoption_round();
  });
}

void Node::adopter_connected(Rank candidate, std::shared_ptr<Link> link) {
  log().info("connected to potential adopter {} ({}), asking for adoption", candidate, link->peer());
  orphan_->trying = link;
  attach_parent(link);
  send_hello(*link, true);
}

void Node::on_adopted(wire::Adopted::Reader adopted) {
  using Clock = std::chrono::steady_clock;
  auto us = [](Clock::duration d) { return std::chrono::duration_cast<std::chrono::microseconds>(d); };
  auto o = std::move(orphan_);  // no longer an orphan: from here on messages go to the parent
  o->attempt.cancel();
  o->retry.cancel();
  o->deadline.cancel();
  const auto accepted = Clock::now();
  parent_ = std::move(o->trying);
  parent_peer_ = PeerState::alive;
  id_.incarnation = adopted.getIncarnation();
  const Rank adopter = adopted.getAdopter();

  // Compensate: join our streams at the adopter, send the state of every
  // state-recoverable filter as channel state, then the output held back meanwhile.
  RecoveryReport report;
  report.orphan = id_.rank;
  report.adopter = adopter;
  report.failed_parent = o->failed;
  report.incarnation = id_.incarnation;
  report.attempts = o->attempts;
  report.choose = o->choose;
  report.connect = us(accepted - o->connect_start);
  std::vector<StreamId> ids;
  for (const auto& [id, stream] : streams_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (StreamId id : ids) {
    Stream& stream = streams_.at(id);
    Message join(id_);
    write_stream_spec(join.body().initStreamJoin(), stream.spec);
    parent_->send(join.builder());
    if (stream.filter && stream.filter->state_recoverable()) {
      auto state = stream.filter->extract_state();
      if (!state) {
        report_stream_error(id, describe(id_.rank) + ": cannot extract filter state: " + state.error());
        report.incomplete_streams.push_back(id);
        continue;
      }
      state->set_source(id_.rank);
      state->set_contributors(0);  // state, not new input
      report_upstream(id, *state);
    } else {
      report.incomplete_streams.push_back(id);
    }
  }
  for (auto& words : o->held) {
    capnp::FlatArrayMessageReader reader(words.asPtr());
    capnp::MallocMessageBuilder copy;
    copy.setRoot(reader.getRoot<wire::Message>());
    parent_->send(copy);
  }
  const auto compensated = Clock::now();
  report.compensate = us(compensated - accepted);

  view_->apply_adoption(id_.rank, adopter, id_.incarnation);
  Message announce(id_);
  auto a = announce.body().initAdoptionReport();
  a.setOrphan(id_.rank);
  a.setAdopter(adopter);
  a.setIncarnation(id_.incarnation);
  flood(announce, nullptr);
  report.cleanup = us(Clock::now() - compensated);
  log().info("adopted by {} after {} attempt(s): choose {} us, connect {} us, compensate {} us, cleanup {} us",
             describe(adopter), report.attempts, report.choose.count(), report.connect.count(),
             report.compensate.count(), report.cleanup.count());
  report_recovered(report);
}

void Node::report_recovered(const RecoveryReport& report) {
  if (is_root()) {
    if (observer_) observer_->on_recovered(report);
    return;
  }
  Message message(id_);
  auto r = message.body().initRecovered();
  r.setOrphan(report.orphan);
  r.setAdopter(report.adopter);
  r.setFailedParent(report.failed_parent);
  r.setIncarnation(report.incarnation);
  r.setChooseUs(report.choose.count());
  r.setConnectUs(report.connect.count());
  r.setCompensateUs(report.compensate.count());
  r.setCleanupUs(report.cleanup.count());
  r.setAttempts(report.attempts);
  auto list = r.initIncompleteStreams(report.incomplete_streams.size());
  for (std::size_t i = 0; i < report.incomplete_streams.size(); ++i) list.set(i, report.incomplete_streams[i]);
  send_to_parent(message);
}

// ---- stopping ----

void Node::shutdown(const std::string& reason) { begin_stop(reason); }

void Node::begin_stop(const std::string& reason) {
  if (stopping_) return;
  stopping_ = true;
  stop_reason_ = reason;
  log().info("stopping: {}", reason);
  startup_timer_.cancel();
  heartbeat_timer_.cancel();
  if (orphan_) {
    orphan_->retry.cancel();
    orphan_->deadline.cancel();
    orphan_->attempt.cancel();
    if (orphan_->trying) orphan_->trying->detach();
    if (orphan_->socket) {
      boost::system::error_code ignored;
      orphan_->socket->close(ignored);
    }
    orphan_->attempt_id = 0;  // a striped connection under way is aborted when it completes
  }
  for (auto& link : pending_) link->close("stopping");
  Message message(id_);
  message.body().initShutdown().setReason(reason);
  for (auto& child : children_) {
    if (child.loss_timer) child.loss_timer->cancel();
    if (child.link) {
      child.link->send(message.builder());
    } else if (child.process && child.process->running() && child.state != ChildState::gone) {
      child.process->kill(SIGTERM);  // started but never connected
    }
  }
  auto grace = stop_grace_for_height(subtree_height());
  stop_timer_.expires_after(grace);
  stop_timer_.async_wait([this, grace](const boost::system::error_code& ec) {
    if (ec) return;
    for (auto& child : children_) {
      if (child.process && child.process->running()) {
        log().warn("{} did not exit within {} s of shutdown; killing it", describe(child.rank),
                   std::chrono::duration_cast<std::chrono::seconds>(grace).count());
        child.process->kill(SIGKILL);
      }
      if (child.link) child.link->close("shutdown grace period over");
    }
  });
  check_stopped();
}

std::size_t Node::subtree_height() const {
  if (!topology_) return 0;
  std::size_t height = 0;
  std::vector<std::pair<Rank, std::size_t>> stack{{id_.rank, 0}};
  while (!stack.empty()) {
    auto [rank, level] = stack.back();
    stack.pop_back();
    height = std::max(height, level);
    for (Rank c : topology_->at(rank).children) stack.emplace_back(c, level + 1);
  }
  return height;
}

std::chrono::milliseconds Node::stop_grace_for_height(std::size_t height) {
  return kStopGrace + kStopGraceStep * (height > 0 ? height - 1 : 0);
}

void Node::check_stopped() {
  if (!stopping_ || stopped_) return;
  for (const auto& child : children_) {
    if (child.link && child.link->is_open()) return;
    if (child.process && child.process->running()) return;
  }
  stopped_ = true;
  stop_timer_.cancel();
  for (auto& acceptor : acceptors_) {
    boost::system::error_code ignored;
    acceptor.close(ignored);
  }
  log().info("stopped: {}", stop_reason_);
  if (parent_ && parent_->is_open()) {
    // Stopped once the parent link has flushed what it holds and said goodbye (a
    // striped link's bye; without it the parent would wait for the link's time-out
    // to tell a stop from a failure): its close handler, or a bound.
    parent_->close("stopped");
    stop_timer_.expires_after(std::chrono::seconds(1));
    stop_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) notify_stopped();
    });
    return;
  }
  notify_stopped();
}

void Node::notify_stopped() {
  if (stop_notified_) return;
  stop_notified_ = true;
  stop_timer_.cancel();
  if (observer_) observer_->on_stopped(stop_reason_);
}

}  // namespace canopy::core
