#include "transport/striped_link.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <unordered_map>

namespace canopy::transport {

using Clock = std::chrono::steady_clock;
using boost::system::error_code;
using tcp = asio::ip::tcp;

namespace {

// The logger of links and acceptors given none: level off, so nothing is even formatted.
StripedOptions with_logger(StripedOptions options) {
  static const auto discard = [] {
    auto logger = std::make_shared<spdlog::logger>("canopy-transport");  // no sinks
    logger->set_level(spdlog::level::off);
    return logger;
  }();
  if (!options.log) options.log = discard;
  return options;
}

std::string endpoint_text(const tcp::endpoint& ep) {
  auto address = ep.address();
  std::string text = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return text + ":" + std::to_string(ep.port());
}

std::uint64_t random_link_id() {
  std::random_device device;
  std::uint64_t id = 0;
  while (id == 0) id = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  return id;
}

long long ms(std::chrono::milliseconds d) { return static_cast<long long>(d.count()); }

// No Nagle; and a path whose written data stays unacknowledged by the peer's kernel
// for `path_silence` is dropped by our kernel (TCP_USER_TIMEOUT), the same bound the
// link applies to a path that hears nothing.
void tune(tcp::socket& socket, std::chrono::milliseconds silence) {
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
#ifdef TCP_USER_TIMEOUT
  unsigned int timeout = static_cast<unsigned int>(silence.count());
  ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout, sizeof timeout);
#endif
}

std::size_t receive_buffer_bytes(const StripedOptions& options) {
  return std::max<std::size_t>(options.receive_buffer_bytes, 2 * (kStripeHeaderBytes + options.max_fragment_bytes));
}

std::string validate(const std::vector<PathEndpoints>& paths, const StripedOptions& options) {
  if (paths.empty()) return "a striped link needs at least one path";
  if (paths.size() > kMaxPaths) {
    return std::to_string(paths.size()) + " paths given; a striped link has at most " + std::to_string(kMaxPaths);
  }
  if (options.max_fragment_bytes < kMinFragmentBytes || options.max_fragment_bytes > kMaxFragmentBytes) {
    return "max_fragment_bytes " + std::to_string(options.max_fragment_bytes) + " is outside " +
           std::to_string(kMinFragmentBytes) + ".." + std::to_string(kMaxFragmentBytes);
  }
  if (options.max_unacked_bytes < 2 * options.max_fragment_bytes) {
    return "max_unacked_bytes must be at least twice max_fragment_bytes";
  }
  for (const auto& p : paths) {
    error_code ec;
    asio::ip::make_address(p.remote_address, ec);
    if (ec) return "remote address '" + p.remote_address + "' is not a numeric IP address";
    if (!p.local_address.empty()) {
      asio::ip::make_address(p.local_address, ec);
      if (ec) return "local address '" + p.local_address + "' is not a numeric IP address";
    }
  }
  return {};
}

// Waits until `fd` is ready for `events` or `deadline` passes.
error_code wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return asio::error::timed_out;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r > 0) return {};
    if (r < 0 && errno != EINTR) return {errno, boost::system::system_category()};
  }
}

// Why a connecting side leaves a path whose acceptor accepted it without the tag.
constexpr const char* kNoProofFromAcceptor =
    "the peer accepted the path without proving the network's secret (another key, or none)";

// The connecting side's handshake on one path, blocking, bounded by `timeout`.
error_code blocking_handshake(tcp::socket& socket, const PathEndpoints& path, const PathHello& hello,
                              const PathMac& mac, std::chrono::milliseconds timeout, HelloStatus& status,
                              std::string& detail) {
  const auto deadline = Clock::now() + timeout;
  error_code ec;
  auto remote = asio::ip::make_address(path.remote_address, ec);
  if (ec) return ec;
  socket.open(remote.is_v4() ? tcp::v4() : tcp::v6(), ec);
  if (ec) return ec;
  if (!path.local_address.empty()) {
    socket.bind({asio::ip::make_address(path.local_address, ec), 0}, ec);
    if (ec) return ec;
  }
  socket.native_non_blocking(true, ec);
  if (ec) return ec;
  const int fd = socket.native_handle();
  tcp::endpoint to(remote, path.remote_port);
  if (::connect(fd, to.data(), static_cast<socklen_t>(to.size())) != 0) {
    if (errno != EINPROGRESS) return {errno, boost::system::system_category()};
    if ((ec = wait_fd(fd, POLLOUT, deadline))) return ec;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return {err, boost::system::system_category()};
  }
  auto send_all = [&](const std::byte* out, std::size_t size) -> error_code {
    for (std::size_t done = 0; done < size;) {
      ssize_t n = ::send(fd, out + done, size - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<std::size_t>(n);
      } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        if (auto e = wait_fd(fd, POLLOUT, deadline)) return e;
      } else {
        return {errno, boost::system::system_category()};
      }
    }
    return {};
  };
  std::byte out[kPathHelloBytes];
  encode_hello(hello, out);
  if ((ec = send_all(out, sizeof out))) return ec;
  std::byte in[kHelloReplyBytes];
  for (std::size_t done = 0; done < sizeof in;) {
    ssize_t n = ::recv(fd, in + done, sizeof in - done, 0);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n == 0) {
      return asio::error::eof;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if ((ec = wait_fd(fd, POLLIN, deadline))) return ec;
    } else {
      return {errno, boost::system::system_category()};
    }
  }
  auto reply = decode_hello_reply(in);
  if (!reply) {
    detail = reply.error();
    return asio::error::invalid_argument;
  }
  status = reply->status;
  if (status == HelloStatus::accepted) {
    if (!tags_equal(reply->tag, accept_tag(mac, out, *reply))) {
      detail = kNoProofFromAcceptor;
      return asio::error::access_denied;
    }
    const PathTag proof = proof_tag(mac, out, *reply);
    if ((ec = send_all(proof.data(), proof.size()))) return ec;
  }
  socket.native_non_blocking(false, ec);
  return {};
}

}  // namespace

std::vector<PathEndpoints> paths_between(const std::vector<std::string>& local,
                                         const std::vector<std::string>& remote, std::uint16_t port) {
  std::vector<PathEndpoints> paths;
  if (local.size() == remote.size()) {
    for (std::size_t i = 0; i < local.size(); ++i) paths.push_back({local[i], remote[i], port});
  } else {
    std::vector<std::string> locals = local.empty() ? std::vector<std::string>{""} : local;
    for (const auto& l : locals) {
      for (const auto& r : remote) paths.push_back({l, r, port});
    }
  }
  return paths;
}

std::string_view to_string(PathState state) {
  switch (state) {
    case PathState::connecting: return "connecting";
    case PathState::live: return "live";
    case PathState::suspect: return "suspect";
    case PathState::down: return "down";
    case PathState::closed: return "closed";
  }
  return "unknown";
}

// One TCP connection of a path. Replaced when the path reconnects; the handlers of
// its operations hold it, so its buffers outlive them.
struct StripedLink::Connection {
  Connection(tcp::socket s, std::size_t receive_bytes) : socket(std::move(s)), rbuf(receive_bytes) {}
  tcp::socket socket;
  // Receiving: frames are parsed from rbuf[rbegin, rend).
  std::vector<std::byte> rbuf;
  std::size_t rbegin = 0, rend = 0;
  // Sending: one write at a time. Headers and control payloads are in `headers`;
  // data payloads are read in place from the send stream.
  bool writing = false;
  std::vector<std::byte> headers;
  struct Segment {
    std::size_t offset, size;        // in `headers`
    const std::byte* payload;        // data frames: their payload
    std::size_t payload_size;
  };
  std::vector<Segment> segments;
  std::vector<asio::const_buffer> buffers;
  std::vector<std::uint64_t> fragments;  // sequence numbers of the data frames in the write
  std::vector<std::unique_ptr<std::byte[]>> corrupted;  // fault injection: corrupted copies
  std::optional<std::uint64_t> low;      // its entry in writes_in_flight_
  bool blackhole = false;                // fault injection: drops writes, reads nothing
};

struct StripedLink::Path {
  std::size_t index = 0;
  PathEndpoints endpoints;       // connecting side
  PathState state = PathState::down;
  std::shared_ptr<Connection> conn;
  std::string last_error;
  bool peer_closed = false;      // went down by end of file, reset or refusal from the peer's end
  bool ever_live = false;
  std::uint32_t reconnect_attempts = 0;
  std::unique_ptr<asio::steady_timer> reconnect_timer;
  Clock::time_point last_received{}, last_sent{};
  // Control frames for this path's next write.
  bool want_ack = false;
  bool want_bye = false;
  std::vector<SeqRange> nacks;
  std::uint64_t acked_since_tick = 0;
  PathStats stats;
};

// A connecting side's handshake in progress on one path.
struct StripedLink::Handshake {
  explicit Handshake(asio::io_context& io) : socket(io), timer(io) {}
  tcp::socket socket;
  asio::steady_timer timer;
  std::byte hello[kPathHelloBytes];
  std::byte reply[kHelloReplyBytes];
  PathTag proof{};
  bool timed_out = false;
};

StripedLink::StripedLink(asio::io_context& io, Side side, std::uint64_t link_id, StripedOptions options,
                         std::size_t path_count)
    : io_(io),
      side_(side),
      link_id_(link_id),
      options_(with_logger(std::move(options))),
      window_(path_count),
      reassembler_(options_.checksum),
      reader_(options_.limits),
      retransmit_timer_(io),
      ack_timer_(io),
      tick_timer_(io),
      down_timer_(io),
      close_timer_(io),
      last_rate_update_(Clock::now()),
      fault_rng_(options_.fault_seed) {
  for (std::size_t i = 0; i < path_count; ++i) {
    auto path = std::make_unique<Path>();
    path->index = i;
    paths_.push_back(std::move(path));
  }
}

StripedLink::~StripedLink() {
  for (auto& p : paths_) {
    if (p->conn) {
      error_code ignored;
      p->conn->socket.close(ignored);
    }
  }
}

// ---------------------------------------------------------------------------
// Setting up

PathHello StripedLink::hello_for(std::size_t index) const {
  PathHello hello;
  hello.reliable = options_.reliable;
  hello.rejoin = ever_accepted_;
  hello.checksum = options_.checksum;
  hello.path_index = static_cast<std::uint16_t>(index);
  hello.path_count = static_cast<std::uint16_t>(paths_.size());
  hello.max_fragment_bytes = static_cast<std::uint32_t>(options_.max_fragment_bytes);
  hello.link_id = link_id_;
  hello.nonce = new_path_nonce();
  return hello;
}

void StripedLink::async_connect(asio::io_context& io, std::vector<PathEndpoints> paths, StripedOptions options,
                                ConnectHandler handler) {
  if (auto problem = validate(paths, options); !problem.empty()) {
    asio::post(io, [handler = std::move(handler), problem] { handler(Error{problem}); });
    return;
  }
  std::shared_ptr<StripedLink> link(
      new StripedLink(io, Side::connecting, random_link_id(), std::move(options), paths.size()));
  for (std::size_t i = 0; i < paths.size(); ++i) link->paths_[i]->endpoints = paths[i];
  link->peer_ = paths[0].remote_address + ":" + std::to_string(paths[0].remote_port) + " (striped, " +
                std::to_string(paths.size()) + " paths)";
  struct FirstAttempts {
    std::size_t remaining;
    bool reported = false;
    std::string errors;
    ConnectHandler handler;
  };
  auto first = std::make_shared<FirstAttempts>(FirstAttempts{paths.size(), false, {}, std::move(handler)});
  for (std::size_t i = 0; i < paths.size(); ++i) {
    link->connect_path(i, [link, first, i](const error_code& ec, const std::string& error) {
      --first->remaining;
      if (!ec) {
        if (!first->reported) {
          first->reported = true;
          first->handler(link);
        }
        return;
      }
      first->errors += (first->errors.empty() ? "" : "; ") + link->describe(*link->paths_[i]) + ": " + error;
      if (first->remaining == 0 && !first->reported) {
        first->reported = true;
        link->finish("no path could be connected", false);
        first->handler(Error{"cannot connect any of the " + std::to_string(link->paths_.size()) +
                             " paths of a striped link: " + first->errors});
        return;
      }
      link->schedule_reconnect(i);
    });
  }
}

Result<std::shared_ptr<StripedLink>> StripedLink::connect(asio::io_context& io, std::vector<PathEndpoints> paths,
                                                          StripedOptions options) {
  if (auto problem = validate(paths, options); !problem.empty()) return Error{problem};
  std::shared_ptr<StripedLink> link(
      new StripedLink(io, Side::connecting, random_link_id(), std::move(options), paths.size()));
  for (std::size_t i = 0; i < paths.size(); ++i) link->paths_[i]->endpoints = paths[i];
  link->peer_ = paths[0].remote_address + ":" + std::to_string(paths[0].remote_port) + " (striped, " +
                std::to_string(paths.size()) + " paths)";
  std::string errors;
  std::vector<std::size_t> failed;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    tcp::socket socket(io);
    HelloStatus status = HelloStatus::malformed;
    std::string detail;
    auto ec = blocking_handshake(socket, paths[i], link->hello_for(i), link->options_.path_mac,
                                 link->options_.hello_timeout, status, detail);
    std::string error;
    if (ec) {
      error = detail.empty() ? ec.message() : detail;
    } else if (status != HelloStatus::accepted) {
      error = "refused: " + std::string(to_string(status));
    }
    if (!error.empty()) {
      errors += (errors.empty() ? "" : "; ") + link->describe(*link->paths_[i]) + ": " + error;
      link->paths_[i]->last_error = error;
      failed.push_back(i);
      continue;
    }
    link->ever_accepted_ = true;
    link->attach(i, std::move(socket));
  }
  if (!link->ever_accepted_) {
    link->finish("no path could be connected", false);
    return Error{"cannot connect any of the " + std::to_string(paths.size()) + " paths of a striped link: " + errors};
  }
  for (auto i : failed) link->schedule_reconnect(i);
  return link;
}

void StripedLink::connect_path(std::size_t index,
                               std::function<void(const error_code&, const std::string&)> done) {
  Path& path = *paths_[index];
  set_state(path, PathState::connecting, "connecting");
  auto hs = std::make_shared<Handshake>(io_);
  encode_hello(hello_for(index), hs->hello);
  auto self = shared_from_this();
  // Every outcome goes through here, once.
  auto finish_attempt = [self, index, hs, done](error_code ec, std::string error) {
    hs->timer.cancel();
    Path& p = *self->paths_[index];
    if (!self->open_) {
      error_code ignored;
      hs->socket.close(ignored);
      return;
    }
    if (hs->timed_out && ec) {
      ec = asio::error::timed_out;
      error = "no hello reply within " + std::to_string(ms(self->options_.hello_timeout)) + " ms";
    }
    if (ec) {
      if (error.empty()) error = ec.message();
      p.last_error = error;
      p.peer_closed = ec == asio::error::connection_refused;
      self->set_state(p, PathState::down, "connect failed: " + error);
      done(ec, error);
      self->check_all_down();
      return;
    }
    self->ever_accepted_ = true;
    self->attach(index, std::move(hs->socket));
    done(ec, {});
  };

  error_code ec;
  auto remote = asio::ip::make_address(path.endpoints.remote_address, ec);
  if (!ec) hs->socket.open(remote.is_v4() ? tcp::v4() : tcp::v6(), ec);
  if (!ec && !path.endpoints.local_address.empty()) {
    auto local = asio::ip::make_address(path.endpoints.local_address, ec);
    if (!ec) hs->socket.bind({local, 0}, ec);
  }
  if (ec) {
    asio::post(io_, [finish_attempt, ec] { finish_attempt(ec, "cannot bind: " + ec.message()); });
    return;
  }
  hs->timer.expires_after(options_.hello_timeout);
  hs->timer.async_wait([hs](const error_code& ec) {
    if (ec) return;
    hs->timed_out = true;
    error_code ignored;
    hs->socket.close(ignored);
  });
  hs->socket.async_connect({remote, path.endpoints.remote_port}, [hs, finish_attempt, mac = options_.path_mac](
                                                                      const error_code& ec) {
    if (ec) return finish_attempt(ec, {});
    asio::async_write(hs->socket, asio::buffer(hs->hello), [hs, finish_attempt, mac](const error_code& ec, std::size_t) {
      if (ec) return finish_attempt(ec, {});
      asio::async_read(hs->socket, asio::buffer(hs->reply), [hs, finish_attempt, mac](const error_code& ec, std::size_t) {
        if (ec) return finish_attempt(ec, ec == asio::error::eof ? "closed by the peer during the hello" : "");
        auto reply = decode_hello_reply(hs->reply);
        if (!reply) return finish_attempt(asio::error::invalid_argument, reply.error());
        if (reply->status != HelloStatus::accepted) {
          return finish_attempt(asio::error::connection_refused, "refused: " + std::string(to_string(reply->status)));
        }
        if (!tags_equal(reply->tag, accept_tag(mac, hs->hello, *reply))) {
          return finish_attempt(asio::error::access_denied, kNoProofFromAcceptor);
        }
        hs->proof = proof_tag(mac, hs->hello, *reply);
        asio::async_write(hs->socket, asio::buffer(hs->proof), [finish_attempt](const error_code& ec, std::size_t) {
          finish_attempt(ec, {});
        });
      });
    });
  });
}

void StripedLink::schedule_reconnect(std::size_t index) {
  Path& path = *paths_[index];
  if (!open_ || side_ != Side::connecting) return;
  if (!path.reconnect_timer) path.reconnect_timer = std::make_unique<asio::steady_timer>(io_);
  path.reconnect_timer->expires_after(options_.reconnect.delay(++path.reconnect_attempts));
  path.reconnect_timer->async_wait([self = shared_from_this(), index](const error_code& ec) {
    if (ec || !self->open_) return;
    self->connect_path(index, [self, index](const error_code& ec, const std::string& error) {
      if (ec && error.find("unknown link") != std::string::npos) {
        self->finish("the peer no longer knows this link (it closed it): " + error, true);
        return;
      }
      if (ec) self->schedule_reconnect(index);
    });
  });
}

std::shared_ptr<StripedLink> StripedLink::create_accepted(asio::io_context& io, const PathHello& hello,
                                                          StripedOptions options, std::string peer) {
  options.checksum = hello.checksum;
  options.reliable = hello.reliable;
  options.max_fragment_bytes = hello.max_fragment_bytes;
  options.max_unacked_bytes = std::max(options.max_unacked_bytes, 2 * options.max_fragment_bytes);
  std::shared_ptr<StripedLink> link(new StripedLink(io, Side::accepting, hello.link_id, options, hello.path_count));
  link->peer_ = std::move(peer) + " (striped, " + std::to_string(hello.path_count) + " paths)";
  return link;
}

bool StripedLink::matches(const PathHello& hello) const {
  return hello.checksum == options_.checksum && hello.reliable == options_.reliable &&
         hello.path_count == paths_.size() && hello.max_fragment_bytes == options_.max_fragment_bytes;
}

void StripedLink::attach(std::size_t index, tcp::socket socket) {
  Path& path = *paths_[index];
  if (!open_) {
    error_code ignored;
    socket.close(ignored);
    return;
  }
  if (path.conn) path_failed(path, "replaced by a new connection from the peer", false);
  tune(socket, options_.path_silence);
  error_code ec;
  path.stats.local = endpoint_text(socket.local_endpoint(ec));
  path.stats.remote = endpoint_text(socket.remote_endpoint(ec));
  path.conn = std::make_shared<Connection>(std::move(socket), receive_buffer_bytes(options_));
  path.last_received = path.last_sent = Clock::now();
  path.peer_closed = false;
  path.reconnect_attempts = 0;
  path.last_error.clear();
  bool rejoin = path.ever_live;
  if (rejoin) ++path.stats.rejoins;
  path.ever_live = true;
  set_state(path, PathState::live, rejoin ? "rejoined" : "up");
  check_all_down();
  if (started_) read_more(path);
  schedule_pump();
}

// ---------------------------------------------------------------------------
// Link interface

void StripedLink::start(MessageHandler on_message, CloseHandler on_close) {
  on_message_ = std::move(on_message);
  on_close_ = std::move(on_close);
  started_ = true;
  if (!open_) return;
  for (auto& p : paths_) {
    if (p->conn) read_more(*p);
  }
  arm_tick();
  schedule_pump();
}

void StripedLink::send(capnp::MessageBuilder& message) {
  if (!open_ || closing_) return;
  stream_.append(message);
  ++stats_.messages_sent;
  note_sent();
  // At once, not posted: a posted handler costs the loop one more turn (and epoll
  // call) per message. Messages sent while every path is writing wait for the next
  // write and go out together.
  pump();
  check_watermarks();
}

void StripedLink::close(std::string_view reason) {
  if (!open_ || closing_) return;
  closing_ = true;
  close_reason_ = reason;
  close_timer_.expires_after(options_.hello_timeout);
  close_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec) return;
    self->finish(self->close_reason_, true);
  });
  schedule_pump();
}

void StripedLink::abort(std::string_view reason) { finish(std::string(reason), true); }

void StripedLink::detach() {
  on_close_ = nullptr;
  finish("detached", false);
}

void StripedLink::drop_path(std::size_t index) {
  if (index >= paths_.size() || !open_) return;
  Path& path = *paths_[index];
  if (!path.conn) return;
  error_code ignored;
  path.conn->socket.set_option(asio::socket_base::linger(true, 0), ignored);  // reset, not FIN
  path_failed(path, "dropped (fault injection)", false);
}

void StripedLink::blackhole_path(std::size_t index) {
  if (index >= paths_.size() || !open_ || !paths_[index]->conn) return;
  paths_[index]->conn->blackhole = true;
  logger().warn("striped link {:016x} to {}: {} is now a black hole (fault injection)", link_id_, peer_,
                describe(*paths_[index]));
}

std::size_t StripedLink::live_paths() const {
  return static_cast<std::size_t>(std::count_if(paths_.begin(), paths_.end(), [](const auto& p) {
    return p->state == PathState::live || p->state == PathState::suspect;
  }));
}

LinkStats StripedLink::stats() const {
  LinkStats s = stats_;
  s.paths.clear();
  for (const auto& p : paths_) s.paths.push_back(p->stats);
  s.live_paths = live_paths();
  s.bytes_sent = stream_.end();
  s.bytes_delivered = reassembler_.lids();
  s.unacked_bytes = window_.unacked_bytes() + (stream_.end() - window_.cut_end());
  s.round_trip_ms = round_trip_.srtt_seconds().value_or(0) * 1000;
  s.retransmit_timeout_ms = static_cast<double>(retransmit_backoff().initial.count());
  return s;
}

std::string StripedLink::describe(const Path& path) const {
  if (side_ == Side::connecting) {
    const auto& e = path.endpoints;
    return "path " + std::to_string(path.index) + " (" + (e.local_address.empty() ? "*" : e.local_address) +
           " -> " + e.remote_address + ":" + std::to_string(e.remote_port) + ")";
  }
  return "path " + std::to_string(path.index) + (path.stats.remote.empty() ? "" : " (from " + path.stats.remote + ")");
}

void StripedLink::set_state(Path& path, PathState state, std::string_view why) {
  if (path.state == state) return;
  auto before = path.state;
  path.state = state;
  path.stats.state = state;
  auto level = state == PathState::down || state == PathState::suspect ? spdlog::level::warn : spdlog::level::info;
  if (state == PathState::connecting || (state == PathState::down && before == PathState::connecting)) {
    level = spdlog::level::debug;  // reconnect attempts: one line per state change would flood
  }
  logger().log(level, "striped link {:016x} to {}: {} {} -> {}: {}", link_id_, peer_, describe(path),
               to_string(before), to_string(state), why);
  if (path_observer_) {
    // Posted: the observer may call back into the link.
    asio::post(io_, [observer = path_observer_, index = path.index, state, why = std::string(why)] {
      observer(index, state, why);
    });
  }
}

// ---------------------------------------------------------------------------
// Paths failing and the link closing

void StripedLink::path_failed(Path& path, std::string reason, bool by_peer) {
  if (path.state != PathState::live && path.state != PathState::suspect) return;
  if (path.conn) {
    error_code ignored;
    path.conn->socket.close(ignored);
    path.conn.reset();
  }
  path.peer_closed = by_peer;
  path.last_error = reason;
  path.want_ack = path.want_bye = false;
  path.nacks.clear();  // the sender's time-out covers them
  ++path.stats.failures;
  set_state(path, PathState::down, reason);
  // Its unacknowledged fragments go out again on the other paths, now.
  stats_.failovers += window_.path_failed(static_cast<std::uint32_t>(path.index));
  schedule_reconnect(path.index);
  check_all_down();
  schedule_pump();
}

void StripedLink::check_all_down() {
  if (!open_) return;
  if (live_paths() > 0) {
    if (down_timer_armed_) {
      down_timer_armed_ = false;
      down_timer_.cancel();
    }
    return;
  }
  if (!started_ && side_ == Side::accepting) return;  // not handed out yet
  bool all_by_peer = std::all_of(paths_.begin(), paths_.end(), [](const auto& p) { return p->peer_closed; });
  auto delay = all_by_peer ? options_.peer_closed_grace : options_.link_timeout;
  auto deadline = Clock::now() + delay;
  if (down_timer_armed_ && down_timer_.expiry() <= deadline) return;
  down_timer_armed_ = true;
  down_timer_.expires_at(deadline);
  down_timer_.async_wait([self = shared_from_this(), delay](const error_code& ec) {
    if (ec || !self->open_) return;
    self->down_timer_armed_ = false;
    if (self->live_paths() > 0) return;
    std::string reasons;
    for (const auto& p : self->paths_) {
      reasons += (reasons.empty() ? "" : "; ") + self->describe(*p) + ": " +
                 (p->last_error.empty() ? std::string("never connected") : p->last_error);
    }
    self->finish("all " + std::to_string(self->paths_.size()) + " paths lost for " + std::to_string(ms(delay)) +
                     " ms: " + reasons,
                 true);
  });
}

void StripedLink::maybe_finish_close() {
  if (!closing_ || !open_) return;
  if (!bye_sent_) {
    if (window_.cut_end() < stream_.end() || window_.unacked_bytes() > 0) return;  // still flushing
    bye_sent_ = true;
    for (auto& p : paths_) {
      if (p->conn) p->want_bye = true;
    }
    schedule_pump();
    return;
  }
  for (const auto& p : paths_) {
    if (p->conn && (p->want_bye || p->conn->writing)) return;
  }
  finish(close_reason_, true);
}

void StripedLink::finish(std::string reason, bool notify) {
  if (!open_) return;
  open_ = false;
  for (auto& p : paths_) {
    if (p->conn) {
      error_code ignored;
      p->conn->socket.shutdown(tcp::socket::shutdown_both, ignored);
      p->conn->socket.close(ignored);
      p->conn.reset();
    }
    if (p->reconnect_timer) p->reconnect_timer->cancel();
    set_state(*p, PathState::closed, reason);
  }
  retransmit_timer_.cancel();
  ack_timer_.cancel();
  tick_timer_.cancel();
  down_timer_.cancel();
  close_timer_.cancel();
  // What the link went through, for logs and demonstrations (a tree's tests read it).
  std::uint64_t injected = 0;
  for (const auto& p : paths_) injected += p->stats.corruptions_injected;
  logger().info("striped link {:016x} to {} closed: {} messages sent, {} received, {} retransmissions ({} time-outs, "
                "{} fail-overs), {} checksum failures caught, {} corruptions injected, {} duplicates dropped",
                link_id_, peer_, stats_.messages_sent, stats_.messages_received, stats_.retransmissions,
                stats_.timeouts, stats_.failovers, stats_.checksum_failures, injected, stats_.duplicates);
  // on_message_ is kept: finish() may run inside it. No handler runs after this.
  auto on_close = std::move(on_close_);
  on_close_ = nullptr;
  if (notify && on_close) on_close(reason);
}

// ---------------------------------------------------------------------------
// Receiving

void StripedLink::read_more(Path& path) {
  auto conn = path.conn;
  Connection& c = *conn;
  if (c.rbegin == c.rend) {
    c.rbegin = c.rend = 0;
  } else if (c.rbuf.size() - c.rend < kStripeHeaderBytes + options_.max_fragment_bytes) {
    std::memmove(c.rbuf.data(), c.rbuf.data() + c.rbegin, c.rend - c.rbegin);
    c.rend -= c.rbegin;
    c.rbegin = 0;
  }
  c.socket.async_read_some(asio::buffer(c.rbuf.data() + c.rend, c.rbuf.size() - c.rend),
                           [self = shared_from_this(), p = &path, conn](const error_code& ec, std::size_t n) {
                             self->on_read(*p, conn, ec, n);
                           });
}

void StripedLink::on_read(Path& path, const std::shared_ptr<Connection>& conn, const error_code& ec, std::size_t n) {
  if (!open_ || conn != path.conn) return;  // closed, or a connection the path no longer uses
  if (conn->blackhole) return;              // fault injection: nothing more is read
  if (ec) {
    bool by_peer = ec == asio::error::eof || ec == asio::error::connection_reset;
    path_failed(path, ec == asio::error::eof ? std::string("closed by the peer") : "read failed: " + ec.message(),
                by_peer);
    return;
  }
  Connection& c = *conn;
  c.rend += n;
  path.last_received = Clock::now();
  note_received();
  if (path.state == PathState::suspect) set_state(path, PathState::live, "heard from the peer again");

  while (c.rend - c.rbegin >= kStripeHeaderBytes) {
    auto header = decode_header(c.rbuf.data() + c.rbegin, options_.checksum);
    if (!header) {
      // A corrupt header loses the framing of this connection: reset the path (its
      // fragments go out on the others) and let it reconnect.
      ++path.stats.checksum_failures;
      ++stats_.checksum_failures;
      path_failed(path, header.error(), false);
      return;
    }
    std::size_t limit = header->type == FrameType::data ? options_.max_fragment_bytes
                        : header->type == FrameType::bye ? 0
                                                         : kMaxControlPayloadBytes;
    if (header->length > limit || (header->type == FrameType::data && header->length == 0) ||
        ((header->type == FrameType::ack || header->type == FrameType::nack) && header->length % 16 != 0)) {
      finish("protocol error from " + describe(path) + ": frame of type " +
                 std::to_string(static_cast<int>(header->type)) + " with " + std::to_string(header->length) +
                 " payload bytes",
             true);
      return;
    }
    if (c.rend - c.rbegin < kStripeHeaderBytes + header->length) break;
    const std::byte* payload = c.rbuf.data() + c.rbegin + kStripeHeaderBytes;
    c.rbegin += kStripeHeaderBytes + header->length;
    if (!handle_frame(path, conn, *header, payload)) return;
  }

  // Acknowledge: at once after ack_every_bytes, else after ack_delay unless a frame
  // going the other way carries the acknowledgement first.
  const std::uint64_t lids = reassembler_.lids();
  if (lids > lids_announced_ || stats_.held != held_announced_) {
    if (lids - lids_announced_ >= options_.ack_every_bytes) {
      queue_ack(&path);
    } else if (!ack_timer_armed_) {
      ack_timer_armed_ = true;
      ack_timer_.expires_after(options_.ack_delay);
      ack_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
        self->ack_timer_armed_ = false;
        if (ec || !self->open_) return;
        if (self->reassembler_.lids() > self->lids_announced_ || self->stats_.held != self->held_announced_) {
          self->queue_ack(nullptr);
        }
      });
    }
  }
  read_more(path);
}

bool StripedLink::handle_frame(Path& path, const std::shared_ptr<Connection>& conn, const FrameHeader& header,
                               const std::byte* payload) {
  auto ranges_in = [&](std::vector<SeqRange>& out) {
    out.clear();
    if (options_.checksum != ChecksumKind::none &&
        checksum(options_.checksum, payload, header.length) != header.payload_checksum) {
      ++path.stats.checksum_failures;
      ++stats_.checksum_failures;
      return false;
    }
    for (std::size_t at = 0; at + 16 <= header.length; at += 16) {
      SeqRange r;
      std::memcpy(&r.begin, payload + at, 8);
      std::memcpy(&r.end, payload + at + 8, 8);
      if (r.begin < r.end) out.push_back(r);
    }
    return true;
  };

  switch (header.type) {
    case FrameType::data: {
      on_acknowledgement(header.lirs, header.lids, {});
      path.stats.bytes_received += header.length;
      auto outcome = reassembler_.accept(header.seq, {payload, header.length}, header.payload_checksum, reader_);
      switch (outcome) {
        case Reassembler::Outcome::delivered:
          if (!deliver_frames()) return false;
          break;
        case Reassembler::Outcome::held: ++stats_.held; break;
        case Reassembler::Outcome::duplicate:
          // The sender resent it: our acknowledgement did not reach it (or not in
          // time). Say it again, on the path the duplicate came in on.
          ++stats_.duplicates;
          path.want_ack = true;
          schedule_pump();
          break;
        case Reassembler::Outcome::corrupt:
          ++stats_.checksum_failures;
          ++path.stats.checksum_failures;
          if (!options_.reliable) {
            finish("fragment " + std::to_string(header.seq) + "+" + std::to_string(header.length) + " on " +
                       describe(path) + " failed its " + std::string(to_string(options_.checksum)) +
                       " checksum, and reliability is off (nothing can resend it)",
                   true);
            return false;
          }
          logger().debug("striped link {:016x}: fragment {}+{} on {} failed its checksum; dropped", link_id_,
                         header.seq, header.length, describe(path));
          if (options_.nack && path.nacks.size() < 16) {
            path.nacks.push_back({header.seq, header.seq + header.length});
            schedule_pump();
          }
          break;
        case Reassembler::Outcome::refused:
          finish("protocol error from " + describe(path) + ": fragment at " + std::to_string(header.seq) +
                     " is too far beyond the delivered bytes (" + std::to_string(reassembler_.lids()) + ")",
                 true);
          return false;
      }
      break;
    }
    case FrameType::ack: {
      std::vector<SeqRange> received;
      if (!ranges_in(received)) received.clear();  // the header's lirs and lids are still good
      on_acknowledgement(header.lirs, header.lids, received);
      break;
    }
    case FrameType::nack: {
      on_acknowledgement(header.lirs, header.lids, {});
      std::vector<SeqRange> rejected;
      if (ranges_in(rejected)) {
        for (const auto& r : rejected) {
          ++stats_.nacks_received;
          window_.reject(r);
        }
        schedule_pump();
      }
      break;
    }
    case FrameType::bye:
      on_acknowledgement(header.lirs, header.lids, {});
      finish("connection closed by peer", true);
      return false;
  }
  return open_ && conn == path.conn;
}

void StripedLink::on_acknowledgement(std::uint64_t lirs, std::uint64_t lids, std::span<const SeqRange> received) {
  if (lids <= window_.acked() && lirs <= peer_lirs_ && received.empty()) return;
  peer_lirs_ = std::max(peer_lirs_, lirs);
  const auto now = Clock::now();
  window_.acknowledge(lirs, lids, received, [&](const SendWindow::Fragment& f) {
    Path& p = *paths_[f.path];
    p.stats.bytes_acked += f.length;
    p.acked_since_tick += f.length;
    round_trip_.on_acknowledged(f, now);  // Karn's rule inside
  });
  release_acknowledged();
  schedule_pump();
}

bool StripedLink::deliver_frames() {
  auto outcome = read_messages(reader_, [this](capnp::MessageReader& message) {
    ++stats_.messages_received;
    if (on_message_) on_message_(message);
    return open_;  // false: the handler closed us
  });
  if (outcome.status == ReadOutcome::Status::failed) finish(std::move(outcome.error), true);
  return outcome.status == ReadOutcome::Status::drained;
}

// ---------------------------------------------------------------------------
// Sending

void StripedLink::schedule_pump() {
  if (pump_posted_ || !open_) return;
  pump_posted_ = true;
  asio::post(io_, [self = shared_from_this()] { self->pump(); });
}

void StripedLink::pump() {
  pump_posted_ = false;
  if (!open_) return;
  const std::size_t n = paths_.size();
  for (std::size_t k = 0; k < n; ++k) {
    Path& path = *paths_[(pump_start_ + k) % n];
    if (path.conn && !path.conn->writing && (path.state == PathState::live || path.state == PathState::suspect)) {
      write_batch(path);
    }
  }
  pump_start_ = (pump_start_ + 1) % n;
  maybe_finish_close();
}

std::uint64_t StripedLink::budget(const Path& path) const {
  std::size_t live = 0;
  double total_rate = 0;
  for (const auto& p : paths_) {
    if (p->state == PathState::live) {
      ++live;
      total_rate += p->stats.rate;
    }
  }
  return path_budget(path.stats.rate, total_rate, live, options_.max_unacked_bytes, options_.max_fragment_bytes);
}

bool StripedLink::write_batch(Path& path) {
  Connection& c = *path.conn;
  c.headers.clear();
  c.segments.clear();
  c.buffers.clear();
  c.fragments.clear();
  c.corrupted.clear();
  const auto kind = options_.checksum;
  const std::uint64_t lirs = reassembler_.lirs(), lids = reassembler_.lids();

  auto add_control = [&](FrameType type, std::span<const SeqRange> ranges) {
    std::size_t offset = c.headers.size();
    std::size_t payload_size = ranges.size() * 16;
    c.headers.resize(offset + kStripeHeaderBytes + payload_size);
    std::byte* body = c.headers.data() + offset + kStripeHeaderBytes;
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      std::memcpy(body + 16 * i, &ranges[i].begin, 8);
      std::memcpy(body + 16 * i + 8, &ranges[i].end, 8);
    }
    FrameHeader h;
    h.type = type;
    h.length = static_cast<std::uint32_t>(payload_size);
    h.lirs = lirs;
    h.lids = lids;
    h.payload_checksum = checksum(kind, body, payload_size);
    encode_header(h, kind, c.headers.data() + offset);
    c.segments.push_back({offset, kStripeHeaderBytes + payload_size, nullptr, 0});
  };

  if (!path.nacks.empty()) {
    add_control(FrameType::nack, path.nacks);
    stats_.nacks_sent += path.nacks.size();
    path.nacks.clear();
  }
  if (path.want_ack) {
    sack_scratch_.clear();
    reassembler_.received_above_lirs(sack_scratch_, 16);
    add_control(FrameType::ack, sack_scratch_);
    ++stats_.acks_sent;
    held_announced_ = stats_.held;
    path.want_ack = false;
  }

  // Data: resends first (the receiver waits for the lowest), then new fragments
  // within this path's budget. A suspect path carries data only if no path is live.
  bool may_carry = path.state == PathState::live ||
                   std::none_of(paths_.begin(), paths_.end(), [](const auto& p) { return p->state == PathState::live; });
  const std::uint64_t path_budget = budget(path);
  const auto index = static_cast<std::uint32_t>(path.index);
  std::size_t bytes = 0;
  while (may_carry && bytes < options_.max_write_bytes) {
    const SendWindow::Fragment* f = window_.take_resend(index);
    bool resend = f != nullptr;
    if (!f) {
      std::uint64_t seq = window_.cut_end();
      if (seq >= stream_.end() || window_.unacked_bytes() >= options_.max_unacked_bytes ||
          window_.in_flight(index) >= path_budget) {
        break;
      }
      auto bytes_at = stream_.contiguous(seq, options_.max_fragment_bytes);
      window_.add(seq, static_cast<std::uint32_t>(bytes_at.size()), checksum(kind, bytes_at.data(), bytes_at.size()),
                  index);
      f = window_.find(seq);
    }
    const std::byte* payload = stream_.contiguous(f->seq, f->length).data();
    if (options_.corrupt_fraction > 0 &&
        std::uniform_real_distribution<double>(0, 1)(fault_rng_) < options_.corrupt_fraction) {
      // After the checksum, in a copy: the kept fragment stays good for a resend.
      auto copy = std::make_unique_for_overwrite<std::byte[]>(f->length);
      std::memcpy(copy.get(), payload, f->length);
      std::uint64_t bit = fault_rng_() % (std::uint64_t{f->length} * 8);
      copy[bit / 8] ^= std::byte{static_cast<unsigned char>(1u << (bit % 8))};
      payload = copy.get();
      c.corrupted.push_back(std::move(copy));
      ++path.stats.corruptions_injected;
    }
    std::size_t offset = c.headers.size();
    c.headers.resize(offset + kStripeHeaderBytes);
    FrameHeader h;
    h.type = FrameType::data;
    h.length = f->length;
    h.seq = f->seq;
    h.lirs = lirs;
    h.lids = lids;
    h.payload_checksum = f->checksum;
    encode_header(h, kind, c.headers.data() + offset);
    c.segments.push_back({offset, kStripeHeaderBytes, payload, f->length});
    c.fragments.push_back(f->seq);
    bytes += f->length;
    path.stats.bytes_sent += f->length;
    ++path.stats.fragments_sent;
    if (resend) {
      ++path.stats.retransmissions;
      ++stats_.retransmissions;
    }
  }
  if (path.want_bye && c.fragments.empty()) {
    add_control(FrameType::bye, {});
    path.want_bye = false;
  }
  if (c.segments.empty()) return false;

  for (const auto& s : c.segments) {
    c.buffers.push_back(asio::buffer(c.headers.data() + s.offset, s.size));
    if (s.payload) c.buffers.push_back(asio::buffer(s.payload, s.payload_size));
  }
  if (!c.fragments.empty()) {
    c.low = *std::min_element(c.fragments.begin(), c.fragments.end());
    writes_in_flight_.insert(*c.low);
  }
  lids_announced_ = std::max(lids_announced_, lids);
  c.writing = true;
  path.last_sent = Clock::now();
  if (c.blackhole) {
    // Fault injection: the write "succeeds" and the bytes vanish.
    asio::post(io_, [self = shared_from_this(), p = &path, conn = path.conn] { self->on_written(*p, conn, {}); });
    return true;
  }
  asio::async_write(c.socket, c.buffers,
                    [self = shared_from_this(), p = &path, conn = path.conn](const error_code& ec, std::size_t) {
                      self->on_written(*p, conn, ec);
                    });
  return true;
}

void StripedLink::on_written(Path& path, const std::shared_ptr<Connection>& conn, const error_code& ec) {
  Connection& c = *conn;
  c.writing = false;
  if (c.low) {
    writes_in_flight_.erase(writes_in_flight_.find(*c.low));
    c.low.reset();
  }
  if (!open_) return;
  if (conn != path.conn) {
    // The path went down meanwhile; its fragments are queued for resending already.
    release_acknowledged();
    return;
  }
  if (ec) {
    bool by_peer = ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
    path_failed(path, "write failed: " + ec.message(), by_peer);
    return;
  }
  const auto now = Clock::now();
  const Backoff backoff = retransmit_backoff();
  const Backoff* retransmit = options_.reliable ? &backoff : nullptr;
  for (auto seq : c.fragments) window_.written(seq, static_cast<std::uint32_t>(path.index), now, retransmit);
  bool wrote_data = !c.fragments.empty();
  c.fragments.clear();
  c.corrupted.clear();
  if (wrote_data && retransmit) {
    // The earliest deadline among these is at least now + initial; the timer only
    // needs moving if it is set for later than that.
    auto earliest = now + backoff.initial;
    if (!retransmit_armed_for_ || *retransmit_armed_for_ > earliest) arm_retransmit_timer();
  }
  release_acknowledged();
  pump();
}

void StripedLink::release_acknowledged() {
  std::uint64_t bound = window_.acked();
  if (!writes_in_flight_.empty()) bound = std::min(bound, *writes_in_flight_.begin());
  stream_.release(bound);
  check_watermarks();
}

void StripedLink::queue_ack(Path* preferred) {
  // An acknowledgement lost on a bad path makes the sender resend, and blame the path
  // that carried its data. So: the preferred path (the one the data came in on),
  // else the live path that heard from the peer last, idle ones first.
  auto rank = [](const Path* p) {
    if (!p || !p->conn || (p->state != PathState::live && p->state != PathState::suspect)) return 0;
    return (p->state == PathState::live ? 2 : 0) + (p->conn->writing ? 0 : 1) + 1;
  };
  Path* chosen = rank(preferred) > 0 ? preferred : nullptr;
  for (auto& p : paths_) {
    int r = rank(p.get());
    if (r == 0) continue;
    if (!chosen || (chosen != preferred && (r > rank(chosen) ||
                                            (r == rank(chosen) && p->last_received > chosen->last_received)))) {
      chosen = p.get();
    }
  }
  if (!chosen) return;
  chosen->want_ack = true;
  schedule_pump();
}

Backoff StripedLink::retransmit_backoff() const {
  // The configured initial time-out is a floor: under load, queueing in socket
  // buffers can make round trips longer than it, and a time-out that fires before the
  // acknowledgement can arrive only sends duplicates.
  return round_trip_.retransmit(options_.retransmit);
}

void StripedLink::arm_retransmit_timer() {
  auto next = window_.next_deadline();
  if (!next) return;
  // No more often than a quarter of the initial time-out: a scan per firing.
  auto earliest = Clock::now() + std::max(std::chrono::milliseconds(1), retransmit_backoff().initial / 4);
  auto when = std::max(*next, earliest);
  if (retransmit_armed_for_ && *retransmit_armed_for_ <= when) return;
  retransmit_armed_for_ = when;
  retransmit_timer_.expires_at(when);
  retransmit_timer_.async_wait([self = shared_from_this(), when](const error_code& ec) {
    if (ec || !self->open_ || self->retransmit_armed_for_ != when) return;
    self->retransmit_armed_for_.reset();
    self->on_retransmit_timer();
  });
}

void StripedLink::on_retransmit_timer() {
  std::size_t live_unsuspected = static_cast<std::size_t>(
      std::count_if(paths_.begin(), paths_.end(), [](const auto& p) { return p->state == PathState::live; }));
  std::vector<std::uint32_t> suspected;
  window_.expire(Clock::now(), [&](const SendWindow::Fragment& f) {
    ++stats_.timeouts;
    Path& p = *paths_[f.path];
    ++p.stats.timeouts;
    // Resent elsewhere; the path gets no new fragments until it hears from the peer.
    if (p.state == PathState::live && live_unsuspected > 1) {
      set_state(p, PathState::suspect,
                "fragment " + std::to_string(f.seq) + " not acknowledged after " + std::to_string(f.transmissions) +
                    " transmission(s)");
      --live_unsuspected;
      suspected.push_back(f.path);
    }
  });
  // So do the fragments of a write still going out on a path now suspect: a dead NIC's
  // socket stops taking bytes, the write may never complete, and until it does they
  // have no deadline — the receiver would wait for them until path_silence.
  for (auto index : suspected) {
    auto moved = window_.path_suspect(index);
    stats_.timeouts += moved;
    paths_[index]->stats.timeouts += moved;
  }
  arm_retransmit_timer();
  schedule_pump();
}

// ---------------------------------------------------------------------------
// Periodic work

void StripedLink::arm_tick() {
  tick_timer_.expires_after(std::chrono::milliseconds(100));
  tick_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec || !self->open_) return;
    self->on_tick();
  });
}

void StripedLink::on_tick() {
  const auto now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - last_rate_update_).count();
  last_rate_update_ = now;
  for (auto& p : paths_) {
    if (p->state == PathState::live || p->state == PathState::suspect) {
      if (now - p->last_received > options_.path_silence) {
        path_failed(*p, "heard nothing for " + std::to_string(ms(options_.path_silence)) + " ms", false);
        continue;
      }
      if (now - p->last_sent >= options_.keepalive && p->conn && !p->conn->writing) {
        p->want_ack = true;  // keepalive: lets the peer tell a quiet path from a dead one
        schedule_pump();
      }
    }
    // Throughput: acknowledged bytes per second, smoothed; kept while the path is idle.
    if (seconds > 0 && (p->acked_since_tick > 0 || window_.in_flight(static_cast<std::uint32_t>(p->index)) > 0)) {
      double rate = static_cast<double>(p->acked_since_tick) / seconds;
      p->stats.rate = p->stats.rate == 0 ? rate : 0.75 * p->stats.rate + 0.25 * rate;
    }
    p->acked_since_tick = 0;
  }
  if (open_) arm_tick();
}

// ---------------------------------------------------------------------------
// StripedAcceptor

struct StripedAcceptor::State : std::enable_shared_from_this<StripedAcceptor::State> {
  State(asio::io_context& io, StripedOptions options, LinkHandler on_link, PlainHandler on_plain)
      : io(io), options(with_logger(std::move(options))), on_link(std::move(on_link)), on_plain(std::move(on_plain)) {}

  struct Pending {
    explicit Pending(tcp::socket s) : socket(std::move(s)), timer(socket.get_executor()) {}
    tcp::socket socket;
    asio::steady_timer timer;
    std::byte hello[kPathHelloBytes];
    std::byte reply[kHelloReplyBytes];
    HelloReply answer;  // as sent in `reply`
    PathTag proof{};
  };

  asio::io_context& io;
  StripedOptions options;
  LinkHandler on_link;
  PlainHandler on_plain;
  std::unordered_map<std::uint64_t, std::weak_ptr<StripedLink>> links;
  std::vector<std::shared_ptr<Pending>> pending;
  bool closed = false;
  // Connections closed for being over max_pending, not yet logged: one line a
  // second at most, however fast they come.
  std::size_t refused_unlogged = 0;
  std::chrono::steady_clock::time_point refusal_logged{};

  void drop(const std::shared_ptr<Pending>& h) {
    error_code ignored;
    h->timer.cancel();
    h->socket.close(ignored);
    std::erase(pending, h);
  }

  void peek(const std::shared_ptr<Pending>& h) {
    h->socket.async_wait(tcp::socket::wait_read, [self = shared_from_this(), h](const error_code& ec) {
      if (self->closed) return;
      if (ec) return self->drop(h);
      std::byte first[8];
      error_code e;
      std::size_t n = h->socket.receive(asio::buffer(first), tcp::socket::message_peek, e);
      if (e || n == 0) return self->drop(h);
      std::byte magic[8];
      std::memcpy(magic, &kPathHelloMagic, 8);
      if (std::memcmp(first, magic, n) != 0) return self->plain(h);
      if (n < 8) {
        // Part of the magic so far: look again shortly (bounded by the hello timer).
        auto retry = std::make_shared<asio::steady_timer>(self->io, std::chrono::milliseconds(1));
        retry->async_wait([self, h, retry](const error_code& ec) {
          if (!ec && !self->closed) self->peek(h);
        });
        return;
      }
      self->read_hello(h);
    });
  }

  void plain(const std::shared_ptr<Pending>& h) {
    h->timer.cancel();
    std::erase(pending, h);
    if (on_plain) {
      on_plain(std::move(h->socket));
    } else {
      options.log->warn("closing a connection from {} on a striped-only port: no path hello",
                        [&] {
                          error_code ec;
                          return endpoint_text(h->socket.remote_endpoint(ec));
                        }());
      error_code ignored;
      h->socket.close(ignored);
    }
  }

  void read_hello(const std::shared_ptr<Pending>& h) {
    asio::async_read(h->socket, asio::buffer(h->hello),
                     [self = shared_from_this(), h](const error_code& ec, std::size_t) {
                       if (self->closed) return;
                       if (ec) return self->drop(h);
                       self->on_hello(h);
                     });
  }

  void on_hello(const std::shared_ptr<Pending>& h) {
    error_code ec;
    std::string from = endpoint_text(h->socket.remote_endpoint(ec));
    auto hello = decode_hello(h->hello);
    std::shared_ptr<StripedLink> link;
    bool created = false;
    HelloStatus status = HelloStatus::accepted;
    if (!hello) {
      std::uint16_t version;
      std::memcpy(&version, h->hello + 8, 2);
      status = version != kStripeVersion ? HelloStatus::bad_version : HelloStatus::malformed;
      options.log->warn("striped path from {} refused: {}", from, hello.error());
    } else {
      if (auto it = links.find(hello->link_id); it != links.end()) {
        link = it->second.lock();
        if (!link || !link->is_open()) {
          links.erase(it);
          link = nullptr;
        }
      }
      if (link && !link->matches(*hello)) {
        status = HelloStatus::mismatch;
        link = nullptr;
      } else if (!link && hello->rejoin) {
        status = HelloStatus::unknown_link;
      } else if (!link) {
        // Registered now, before the reply goes out, so that the link's other paths,
        // arriving meanwhile, join it instead of making links of their own.
        link = StripedLink::create_accepted(io, *hello, options, from);
        links[hello->link_id] = link;
        created = true;
      }
      if (status != HelloStatus::accepted) {
        options.log->warn("striped path {} of link {:016x} from {} refused: {}", hello->path_index, hello->link_id,
                          from, to_string(status));
      }
    }
    h->answer.status = status;
    h->answer.nonce = new_path_nonce();
    if (status == HelloStatus::accepted) h->answer.tag = accept_tag(options.path_mac, h->hello, h->answer);
    encode_hello_reply(h->answer, h->reply);
    const std::size_t index = hello ? hello->path_index : 0;
    asio::async_write(
        h->socket, asio::buffer(h->reply),
        [self = shared_from_this(), h, link, created, status, index, from](const error_code& ec, std::size_t) {
          if (self->closed || ec || status != HelloStatus::accepted) {
            return self->give_up(h, created ? link : nullptr, "its first path failed during the hello");
          }
          // The path is the connecting side's once it proves the secret over our
          // nonce (the hello timer still runs).
          asio::async_read(h->socket, asio::buffer(h->proof), [self, h, link, created, index, from](
                                                                   const error_code& ec, std::size_t) {
            if (self->closed || ec) {
              return self->give_up(h, created ? link : nullptr, "its first path failed during the hello");
            }
            if (!tags_equal(h->proof, proof_tag(self->options.path_mac, h->hello, h->answer))) {
              self->options.log->warn("striped path {} of link {:016x} from {} refused: its proof of the network's "
                                      "secret is wrong",
                                      index, link->link_id_, from);
              return self->give_up(h, created ? link : nullptr, "its first path did not prove the network's secret");
            }
            h->timer.cancel();
            std::erase(self->pending, h);
            link->attach(index, std::move(h->socket));
            if (!link->announced_) {
              link->announced_ = true;
              self->on_link(link);
            }
          });
        });
  }

  // Ends a path that did not make it through the hello; `created`, if not null, is
  // the link it made, which goes with it.
  void give_up(const std::shared_ptr<Pending>& h, const std::shared_ptr<StripedLink>& created,
               const std::string& why) {
    h->timer.cancel();
    std::erase(pending, h);
    error_code ignored;
    h->socket.close(ignored);
    if (created) created->finish(why, false);
  }
};

StripedAcceptor::StripedAcceptor(asio::io_context& io, StripedOptions options, LinkHandler on_link,
                                 PlainHandler on_plain)
    : state_(std::make_shared<State>(io, std::move(options), std::move(on_link), std::move(on_plain))) {}

StripedAcceptor::~StripedAcceptor() {
  state_->closed = true;
  for (auto& h : state_->pending) {
    error_code ignored;
    h->timer.cancel();
    h->socket.close(ignored);
  }
  state_->pending.clear();
}

void StripedAcceptor::take(tcp::socket socket) {
  if (state_->pending.size() >= state_->options.max_pending) {
    error_code ignored;
    const std::string from = endpoint_text(socket.remote_endpoint(ignored));
    socket.close(ignored);
    ++state_->refused_unlogged;
    const auto now = std::chrono::steady_clock::now();
    if (now - state_->refusal_logged >= std::chrono::seconds(1)) {
      state_->options.log->warn("closing {} connection(s), the last from {}: {} connections are already waiting "
                                "for their first bytes, the most this port holds",
                                state_->refused_unlogged, from, state_->options.max_pending);
      state_->refused_unlogged = 0;
      state_->refusal_logged = now;
    }
    return;
  }
  auto h = std::make_shared<State::Pending>(std::move(socket));
  state_->pending.push_back(h);
  h->timer.expires_after(state_->options.hello_timeout);
  h->timer.async_wait([weak = std::weak_ptr<State>(state_), h](const error_code& ec) {
    auto state = weak.lock();
    if (ec || !state || state->closed) return;
    state->options.log->warn("closing a connection: no path hello within {} ms", ms(state->options.hello_timeout));
    state->drop(h);
  });
  state_->peek(h);
}

std::size_t StripedAcceptor::open_links() const {
  std::size_t n = 0;
  for (const auto& [id, weak] : state_->links) {
    auto link = weak.lock();
    if (link && link->is_open()) ++n;
  }
  return n;
}

}  // namespace canopy::transport
