// The receiving half of a striped link, without I/O.
//
// Reassembler takes data fragments in any order, from any path, possibly twice. It
// verifies each fragment's checksum while copying it (one pass over memory), drops
// duplicates and corrupt fragments, hands bytes to the frame reader strictly in
// sequence order, and holds verified fragments that arrived ahead of a gap. Two
// SeqTrackingLists record what was received and what was delivered (paper 002).
// Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "transport/checksum.h"
#include "transport/frame.h"
#include "transport/seq_tracking.h"

namespace canopy::transport {

class Reassembler {
 public:
  enum class Outcome : std::uint8_t {
    delivered,  // new bytes reached the frame reader
    held,       // new bytes kept until the gap before them is filled
    duplicate,  // every byte was received before; nothing changed
    corrupt,    // the checksum did not match; nothing changed (the sender must resend)
    refused,    // starts more than `max_ahead` bytes past the delivered ones
  };

  // Fragments may start at most `max_ahead` bytes beyond the delivered bytes: that
  // bounds what a misbehaving peer can make this side hold.
  explicit Reassembler(ChecksumKind kind, std::uint64_t max_ahead = 1ull << 30);

  Outcome accept(std::uint64_t seq, std::span<const std::byte> payload, std::uint32_t checksum,
                 FrameReader& out);

  // One past the largest in-order received (verified and kept), and delivered,
  // sequence numbers. Received bytes in order are delivered at once, so the two are
  // equal between calls; a sender still treats them as the paper does.
  std::uint64_t lirs() const { return received_.contiguous_end(0); }
  std::uint64_t lids() const { return lids_; }
  // Appends at most `max` received ranges above lirs(), lowest first: what a
  // selective acknowledgement carries.
  void received_above_lirs(std::vector<SeqRange>& out, std::size_t max) const;

  const SeqTrackingList& received() const { return received_; }
  const SeqTrackingList& delivered() const { return delivered_; }
  std::uint64_t held_bytes() const { return held_bytes_; }

 private:
  struct Piece {
    std::unique_ptr<std::byte[]> data;
    std::size_t size = 0;
    std::size_t capacity = 0;
  };
  Piece take_piece(std::size_t size);
  void give_back(Piece piece);
  void deliver(std::uint64_t seq, const std::byte* data, std::size_t size, FrameReader& out);
  void deliver_held(FrameReader& out);

  ChecksumKind kind_;
  std::uint64_t max_ahead_;
  SeqTrackingList received_;
  SeqTrackingList delivered_;
  std::uint64_t lids_ = 0;
  std::map<std::uint64_t, Piece> held_;  // verified, ahead of a gap; keyed by first seq
  std::uint64_t held_bytes_ = 0;
  std::vector<Piece> spare_;
  std::vector<SeqRange> parts_;  // scratch
};

}  // namespace canopy::transport
