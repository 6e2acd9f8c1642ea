#include "transport/stripe_receive.h"

#include <algorithm>
#include <cstring>

namespace canopy::transport {

Reassembler::Reassembler(ChecksumKind kind, std::uint64_t max_ahead) : kind_(kind), max_ahead_(max_ahead) {}

Reassembler::Piece Reassembler::take_piece(std::size_t size) {
  for (auto it = spare_.begin(); it != spare_.end(); ++it) {
    if (it->capacity >= size) {
      Piece piece = std::move(*it);
      spare_.erase(it);
      piece.size = size;
      return piece;
    }
  }
  Piece piece;
  piece.capacity = std::max<std::size_t>(size, 64 * 1024);
  piece.data = std::make_unique_for_overwrite<std::byte[]>(piece.capacity);
  piece.size = size;
  return piece;
}

void Reassembler::give_back(Piece piece) {
  if (spare_.size() < 16) spare_.push_back(std::move(piece));
}

void Reassembler::deliver(std::uint64_t seq, const std::byte* data, std::size_t size, FrameReader& out) {
  auto space = out.prepare(size);
  std::memcpy(space.data(), data, size);
  out.commit(size);
  delivered_.insert(seq, seq + size);
  lids_ = seq + size;
}

void Reassembler::deliver_held(FrameReader& out) {
  while (!held_.empty() && held_.begin()->first == lids_) {
    Piece piece = std::move(held_.begin()->second);
    held_.erase(held_.begin());
    held_bytes_ -= piece.size;
    deliver(lids_, piece.data.get(), piece.size, out);
    give_back(std::move(piece));
  }
}

Reassembler::Outcome Reassembler::accept(std::uint64_t seq, std::span<const std::byte> payload,
                                         std::uint32_t checksum, FrameReader& out) {
  const std::uint64_t end = seq + payload.size();
  if (payload.empty() || received_.contains(seq, end)) return Outcome::duplicate;
  if (seq > lids_ && seq - lids_ > max_ahead_) return Outcome::refused;

  if (seq == lids_ && !received_.intersects(seq, end)) {
    // The common case: the next bytes in order. Verified while being copied into the
    // frame reader, and committed there only if they pass.
    auto space = out.prepare(payload.size());
    if (copy_and_checksum(kind_, space.data(), payload.data(), payload.size()) != checksum) {
      return Outcome::corrupt;
    }
    out.commit(payload.size());
    received_.insert(seq, end);
    delivered_.insert(seq, end);
    lids_ = end;
    deliver_held(out);
    return Outcome::delivered;
  }

  parts_.clear();
  received_.missing(seq, end, parts_);
  if (parts_.size() == 1 && parts_[0] == SeqRange{seq, end} && seq > lids_) {
    // Ahead of a gap and all new: verified while being copied into a held piece.
    Piece piece = take_piece(payload.size());
    if (copy_and_checksum(kind_, piece.data.get(), payload.data(), payload.size()) != checksum) {
      give_back(std::move(piece));
      return Outcome::corrupt;
    }
    received_.insert(seq, end);
    held_bytes_ += piece.size;
    held_.emplace(seq, std::move(piece));
    return Outcome::held;
  }

  // Overlapping what was received before (a fragment resent with other boundaries):
  // verify the whole of it, then keep the new parts only.
  if (transport::checksum(kind_, payload.data(), payload.size()) != checksum) return Outcome::corrupt;
  const std::uint64_t lids_before = lids_;
  for (const auto& part : parts_) {
    const std::byte* data = payload.data() + (part.begin - seq);
    if (part.begin == lids_) {
      deliver(part.begin, data, part.size(), out);
      received_.insert(part.begin, part.end);
      deliver_held(out);
    } else {
      Piece piece = take_piece(part.size());
      std::memcpy(piece.data.get(), data, part.size());
      received_.insert(part.begin, part.end);
      held_bytes_ += piece.size;
      held_.emplace(part.begin, std::move(piece));
    }
  }
  deliver_held(out);
  return lids_ > lids_before ? Outcome::delivered : Outcome::held;
}

void Reassembler::received_above_lirs(std::vector<SeqRange>& out, std::size_t max) const {
  const auto& ranges = received_.ranges();
  std::size_t first = (!ranges.empty() && ranges.front().begin == 0) ? 1 : 0;
  for (std::size_t i = first; i < ranges.size() && max > 0; ++i, --max) out.push_back(ranges[i]);
}

}  // namespace canopy::transport
