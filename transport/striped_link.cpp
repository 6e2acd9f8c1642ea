#include "transport/striped_link.h"
#include "transport/random.h"
#include "transport/striped_link_detail.h"

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

namespace striped_detail {

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
  std::uint64_t id = 0;
  while (id == 0) id = random_u64();
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

}  // namespace striped_detail


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
// Link interface

void StripedLink::begin() {
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
  forget_close();
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
  if (half_closed_) {
    // Closing, every bye written: the peer's end of file (or whatever else ends the
    // connection now) is how this path ends, not a failure of it; observers that
    // count failures must not see one (netns_striped_failover read it as NIC 1
    // failing again).
    set_state(path, PathState::closed, "closed");
    maybe_finish_close();
    return;
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
  if (!started() && side_ == Side::accepting) return;  // not handed out yet
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
  // Every bye is out. Closing the sockets now reset a connection whose peer still
  // sent (an acknowledgement on its way), and a reset throws away what the peer has
  // not read yet, the bye among it: under load the peer reported its paths lost,
  // not the close (StripedLinkTest.CloseDeliversEverythingQueuedThenTellsThePeer).
  // So each path sends its end of file and reads on until the peer's, which comes
  // once the peer has read a bye and closed; close_timer_ bounds the wait.
  if (!half_closed_) {
    half_closed_ = true;
    for (auto& p : paths_) {
      error_code ignored;
      if (p->conn) p->conn->socket.shutdown(tcp::socket::shutdown_send, ignored);
    }
  }
  if (std::any_of(paths_.begin(), paths_.end(), [](const auto& p) { return p->conn != nullptr; })) return;
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
  // The handler is kept: finish() may run inside it. No handler runs after this.
  if (notify) deliver_close(reason);
  else forget_close();
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

// Whole messages go to the handler in turns of at most kReadTurn, as TcpLink's do
// (take_messages): the rest wait in reader_, behind what else the loop has to do,
// and frames that arrive meanwhile join them there.
bool StripedLink::deliver_frames() {
  if (delivering_later_) return true;
  const auto turn_ends = turn_clock() + kReadTurn;
  bool turn_over = false;
  auto outcome = read_messages(reader_, [&](capnp::MessageReader& message) {
    ++stats_.messages_received;
    if (started()) deliver(message);
    if (!open_) return false;  // the handler closed us
    turn_over = turn_clock() >= turn_ends;
    return !turn_over;
  });
  if (outcome.status == ReadOutcome::Status::failed) finish(std::move(outcome.error), true);
  if (outcome.status == ReadOutcome::Status::stopped && turn_over && open_) {
    delivering_later_ = true;
    asio::post(io_, [self = shared_from_this()] {
      self->delivering_later_ = false;
      if (self->open_) self->deliver_frames();
    });
    return true;
  }
  return outcome.status == ReadOutcome::Status::drained;
}

}  // namespace canopy::transport
