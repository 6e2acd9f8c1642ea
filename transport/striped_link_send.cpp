// StripedLink, sending: pumping fragments onto paths, acknowledgements,
// retransmission, and the periodic tick (docs/striping.md).
#include "transport/striped_link.h"
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

// ---------------------------------------------------------------------------
// Sending

void StripedLink::schedule_pump() {
  if (pump_posted_ || !open_) return;
  pump_posted_ = true;
  asio::post(io_, [self = shared_from_this()] { self->pump(); });
}

void StripedLink::pump() {
  pump_posted_ = false;
  if (!open_ || half_closed_) return;  // half-closed: nothing more goes out
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

}  // namespace canopy::transport
