// SeqTrackingList: which sequence numbers of a byte stream have been seen.
//
// LA-MPI's structure (paper 002): an ordered set of disjoint ranges of sequence
// numbers, adjacent and overlapping ranges merged, with a hint at the range touched
// last because fragments arrive close to the previous one. A striped link's receiver
// keeps one for the bytes it has received and one for those it has delivered; the
// first tells duplicates at once.
//
// Pure logic, no I/O; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace canopy::transport {

// Sequence numbers [begin, end).
struct SeqRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t size() const { return end - begin; }
  bool operator==(const SeqRange&) const = default;
};

class SeqTrackingList {
 public:
  // Records [begin, end) and returns how many of its sequence numbers are new (0 for
  // a duplicate). An empty range records nothing.
  std::uint64_t insert(std::uint64_t begin, std::uint64_t end);

  // Forgets [begin, end), splitting a range if need be.
  void erase(std::uint64_t begin, std::uint64_t end);

  // Whether every sequence number of [begin, end) is recorded (true when empty).
  bool contains(std::uint64_t begin, std::uint64_t end) const;
  bool contains(std::uint64_t seq) const { return contains(seq, seq + 1); }
  // Whether any sequence number of [begin, end) is recorded.
  bool intersects(std::uint64_t begin, std::uint64_t end) const;

  // The parts of [begin, end) that are not recorded, in order, appended to `out`.
  void missing(std::uint64_t begin, std::uint64_t end, std::vector<SeqRange>& out) const;

  // One past the last sequence number of the unbroken run of recorded numbers that
  // starts at `from`; `from` itself when it is not recorded. contiguous_end(0) is the
  // paper's "largest in-order sequence number", plus one.
  std::uint64_t contiguous_end(std::uint64_t from) const;

  const std::vector<SeqRange>& ranges() const { return ranges_; }
  bool empty() const { return ranges_.empty(); }
  void clear();

 private:
  // Index of the first range whose end is >= seq (ranges_.size() if none): the range
  // that holds seq or touches it from below, else the first one above it.
  std::size_t first_reaching(std::uint64_t seq) const;

  std::vector<SeqRange> ranges_;  // sorted, disjoint, never adjacent
  mutable std::size_t hint_ = 0;  // where the last look-up ended
};

}  // namespace canopy::transport
