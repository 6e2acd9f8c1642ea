#include "transport/stripe_send.h"

#include <capnp/serialize.h>

#include <algorithm>
#include <cassert>
#include <cstring>


namespace canopy::transport {

SendWindow::SendWindow(std::size_t path_count) : in_flight_(path_count, 0) {}

void SendWindow::add(std::uint64_t seq, std::uint32_t length, std::uint32_t checksum, std::uint32_t path) {
  assert(seq == cut_end_ && length > 0);
  Fragment f;
  f.seq = seq;
  f.length = length;
  f.checksum = checksum;
  f.path = path;
  f.transmissions = 1;
  f.state = State::writing;
  fragments_.push_back(f);
  in_flight_[path] += length;
  cut_end_ = seq + length;
}

SendWindow::Fragment* SendWindow::lookup(std::uint64_t seq) {
  auto it = std::lower_bound(fragments_.begin(), fragments_.end(), seq,
                             [](const Fragment& f, std::uint64_t s) { return f.seq < s; });
  return it != fragments_.end() && it->seq == seq ? &*it : nullptr;
}

const SendWindow::Fragment* SendWindow::find(std::uint64_t seq) const {
  return const_cast<SendWindow*>(this)->lookup(seq);
}

void SendWindow::leave(Fragment& f, State next) {
  bool counted = f.state == State::writing || f.state == State::sent;
  bool counts = next == State::writing || next == State::sent;
  if (counted && !counts) in_flight_[f.path] -= f.length;
  if (!counted && counts) in_flight_[f.path] += f.length;
  if (next == State::queued) resend_.insert(f.seq);
  if (f.state == State::queued && next != State::queued) resend_.erase(f.seq);
  if (next != State::sent) f.deadline.reset();
  f.state = next;
}

void SendWindow::written(std::uint64_t seq, std::uint32_t path, Clock::time_point now, const Backoff* retransmit) {
  Fragment* f = lookup(seq);
  if (!f || f->state != State::writing || f->path != path) return;
  if (f->rejected) {
    f->rejected = false;
    leave(*f, State::queued);
    return;
  }
  leave(*f, State::sent);
  f->sent_at = now;
  if (retransmit) f->deadline = now + retransmit->delay(f->transmissions);
}

const SendWindow::Fragment* SendWindow::take_resend(std::uint32_t path) {
  while (!resend_.empty()) {
    Fragment* f = lookup(*resend_.begin());
    if (!f || f->state != State::queued) {
      resend_.erase(resend_.begin());
      continue;
    }
    resend_.erase(resend_.begin());
    f->path = path;  // before leave(): the in-flight bytes count on the new path
    leave(*f, State::writing);
    f->rejected = false;
    ++f->transmissions;
    return f;
  }
  return nullptr;
}

void SendWindow::acknowledge(std::uint64_t lirs, std::uint64_t lids, std::span<const SeqRange> received,
                             const std::function<void(const Fragment&)>& acked) {
  auto first_time = [&](const Fragment& f) {
    if (f.state != State::held && acked) acked(f);
  };
  while (!fragments_.empty() && fragments_.front().end() <= lids) {
    Fragment& f = fragments_.front();
    first_time(f);
    leave(f, State::held);  // drops it from the in-flight count and the resend queue
    fragments_.pop_front();
  }
  acked_ = std::max(acked_, std::min(lids, cut_end_));
  auto hold = [&](std::uint64_t begin, std::uint64_t end) {
    auto it = std::lower_bound(fragments_.begin(), fragments_.end(), begin,
                               [](const Fragment& f, std::uint64_t s) { return f.seq < s; });
    for (; it != fragments_.end() && it->end() <= end; ++it) {
      if (it->state != State::held) {
        first_time(*it);
        leave(*it, State::held);
      }
    }
  };
  if (lirs > acked_) hold(acked_, lirs);
  for (const auto& r : received) hold(r.begin, r.end);
}

std::size_t SendWindow::reject(SeqRange range) {
  std::size_t count = 0;
  auto it = std::upper_bound(fragments_.begin(), fragments_.end(), range.begin,
                             [](std::uint64_t s, const Fragment& f) { return s < f.seq; });
  if (it != fragments_.begin()) --it;  // the fragment that may hold range.begin
  for (; it != fragments_.end() && it->seq < range.end; ++it) {
    if (it->end() <= range.begin) continue;
    if (it->state == State::sent || it->state == State::held) {
      leave(*it, State::queued);
      ++count;
    } else if (it->state == State::writing && !it->rejected) {
      it->rejected = true;
      ++count;
    }
  }
  return count;
}

std::size_t SendWindow::path_failed(std::uint32_t path) {
  std::size_t count = 0;
  for (auto& f : fragments_) {
    if (f.path == path && (f.state == State::writing || f.state == State::sent)) {
      f.rejected = false;
      leave(f, State::queued);
      ++count;
    }
  }
  return count;
}

std::size_t SendWindow::path_suspect(std::uint32_t path) {
  std::size_t count = 0;
  for (auto& f : fragments_) {
    if (f.path == path && f.state == State::writing) {
      f.rejected = false;
      leave(f, State::queued);
      ++count;
    }
  }
  return count;
}

std::size_t SendWindow::expire(Clock::time_point now, const std::function<void(const Fragment&)>& expired) {
  std::size_t count = 0;
  for (auto& f : fragments_) {
    if (f.state == State::sent && f.deadline && *f.deadline <= now) {
      if (expired) expired(f);
      leave(f, State::queued);
      ++count;
    }
  }
  return count;
}

std::optional<SendWindow::Clock::time_point> SendWindow::next_deadline() const {
  std::optional<Clock::time_point> next;
  for (const auto& f : fragments_) {
    if (f.state == State::sent && f.deadline && (!next || *f.deadline < *next)) next = f.deadline;
  }
  return next;
}

}  // namespace canopy::transport
