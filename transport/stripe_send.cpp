#include "transport/stripe_send.h"

#include <capnp/serialize.h>

#include <algorithm>
#include <cassert>
#include <cstring>


namespace canopy::transport {

SendStream::SendStream(std::size_t block_bytes) : block_bytes_(std::max<std::size_t>(64, block_bytes)) {}

std::uint64_t SendStream::append(capnp::MessageBuilder& message) {
  auto segments = message.getSegmentsForOutput();
  // The frame: 8-byte body length, segment table (count-1, then each size, padded to
  // a whole word), segments. The same bytes as append_frame() in frame.cpp.
  const std::size_t table_words = (segments.size() + 2) / 2;
  std::size_t body_words = table_words;
  for (const auto& segment : segments) body_words += segment.size();
  const std::size_t frame_bytes = (1 + body_words) * sizeof(capnp::word);

  if (blocks_.empty() || blocks_.back().capacity - blocks_.back().size < frame_bytes) {
    Block block;
    auto fits = std::find_if(spare_.begin(), spare_.end(), [&](const Block& b) { return b.capacity >= frame_bytes; });
    if (fits != spare_.end()) {
      block = std::move(*fits);
      spare_.erase(fits);
    } else {
      block.capacity = std::max(block_bytes_, frame_bytes);
      block.bytes = std::make_unique_for_overwrite<std::byte[]>(block.capacity);
    }
    block.seq = end_;
    block.size = 0;
    blocks_.push_back(std::move(block));
  }
  Block& tail = blocks_.back();
  std::byte* out = tail.bytes.get() + tail.size;
  const std::uint64_t body_bytes = body_words * sizeof(capnp::word);
  std::memcpy(out, &body_bytes, 8);  // little-endian hosts, as frame.cpp
  auto* table = reinterpret_cast<std::uint32_t*>(out + 8);
  table[0] = static_cast<std::uint32_t>(segments.size() - 1);
  for (std::size_t i = 0; i < segments.size(); ++i) table[i + 1] = static_cast<std::uint32_t>(segments[i].size());
  if (segments.size() % 2 == 0) table[segments.size() + 1] = 0;
  std::byte* dst = out + 8 + table_words * sizeof(capnp::word);
  for (const auto& segment : segments) {
    std::memcpy(dst, segment.begin(), segment.size() * sizeof(capnp::word));
    dst += segment.size() * sizeof(capnp::word);
  }
  tail.size += frame_bytes;
  end_ += frame_bytes;
  return end_;
}

std::span<const std::byte> SendStream::contiguous(std::uint64_t seq, std::size_t max) const {
  assert(seq >= begin() && seq < end_);
  // Fragments are cut at the back and resent from the front: look there first.
  auto it = blocks_.end() - 1;
  if (seq < it->seq) {
    it = std::upper_bound(blocks_.begin(), blocks_.end(), seq,
                          [](std::uint64_t s, const Block& b) { return s < b.seq; }) - 1;
  }
  std::size_t offset = seq - it->seq;
  return {it->bytes.get() + offset, std::min<std::size_t>(it->size - offset, max)};
}

void SendStream::release(std::uint64_t seq) {
  while (!blocks_.empty() && blocks_.front().end() <= seq) {
    Block& block = blocks_.front();
    if (spare_.size() < 4 && block.capacity <= 4 * block_bytes_) spare_.push_back(std::move(block));
    blocks_.pop_front();
  }
}

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
