#include "transport/seq_tracking.h"

#include <algorithm>

namespace canopy::transport {

std::size_t SeqTrackingList::first_reaching(std::uint64_t seq) const {
  // The hint (and the range after it) answers most look-ups: fragments arrive close
  // to the previous one, usually just after it.
  auto fits = [&](std::size_t i) {
    return i <= ranges_.size() && (i == ranges_.size() || ranges_[i].end >= seq) &&
           (i == 0 || ranges_[i - 1].end < seq);
  };
  if (fits(hint_)) return hint_;
  if (fits(hint_ + 1)) return hint_ = hint_ + 1;
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), seq,
                             [](const SeqRange& r, std::uint64_t s) { return r.end < s; });
  return hint_ = static_cast<std::size_t>(it - ranges_.begin());
}

std::uint64_t SeqTrackingList::insert(std::uint64_t begin, std::uint64_t end) {
  if (begin >= end) return 0;
  std::size_t first = first_reaching(begin);
  // Ranges first..last-1 overlap or touch [begin, end) and merge with it.
  std::size_t last = first;
  std::uint64_t already = 0;
  std::uint64_t merged_begin = begin, merged_end = end;
  while (last < ranges_.size() && ranges_[last].begin <= end) {
    const SeqRange& r = ranges_[last];
    std::uint64_t lo = std::max(r.begin, begin), hi = std::min(r.end, end);
    if (hi > lo) already += hi - lo;
    merged_begin = std::min(merged_begin, r.begin);
    merged_end = std::max(merged_end, r.end);
    ++last;
  }
  if (last == first) {
    ranges_.insert(ranges_.begin() + static_cast<std::ptrdiff_t>(first), SeqRange{begin, end});
  } else {
    ranges_[first] = SeqRange{merged_begin, merged_end};
    ranges_.erase(ranges_.begin() + static_cast<std::ptrdiff_t>(first + 1),
                  ranges_.begin() + static_cast<std::ptrdiff_t>(last));
  }
  hint_ = first;
  return (end - begin) - already;
}

void SeqTrackingList::erase(std::uint64_t begin, std::uint64_t end) {
  if (begin >= end) return;
  std::size_t first = first_reaching(begin + 1);  // first range with a number >= begin
  std::size_t last = first;
  SeqRange kept[2];  // the parts of the edge ranges outside [begin, end)
  std::size_t kept_count = 0;
  while (last < ranges_.size() && ranges_[last].begin < end) {
    const SeqRange& r = ranges_[last];
    if (r.begin < begin) kept[kept_count++] = {r.begin, begin};
    if (r.end > end) kept[kept_count++] = {end, r.end};
    ++last;
  }
  ranges_.erase(ranges_.begin() + static_cast<std::ptrdiff_t>(first),
                ranges_.begin() + static_cast<std::ptrdiff_t>(last));
  ranges_.insert(ranges_.begin() + static_cast<std::ptrdiff_t>(first), kept, kept + kept_count);
  hint_ = std::min(first, ranges_.size());
}

bool SeqTrackingList::contains(std::uint64_t begin, std::uint64_t end) const {
  if (begin >= end) return true;
  std::size_t i = first_reaching(begin + 1);  // the range holding `begin`, if any
  return i < ranges_.size() && ranges_[i].begin <= begin && ranges_[i].end >= end;
}

bool SeqTrackingList::intersects(std::uint64_t begin, std::uint64_t end) const {
  if (begin >= end) return false;
  std::size_t i = first_reaching(begin + 1);  // first range with a number >= begin
  return i < ranges_.size() && ranges_[i].begin < end;
}

void SeqTrackingList::missing(std::uint64_t begin, std::uint64_t end, std::vector<SeqRange>& out) const {
  if (begin >= end) return;
  std::uint64_t at = begin;
  for (std::size_t i = first_reaching(begin + 1); i < ranges_.size() && ranges_[i].begin < end; ++i) {
    if (ranges_[i].begin > at) out.push_back({at, ranges_[i].begin});
    at = std::max(at, ranges_[i].end);
  }
  if (at < end) out.push_back({at, end});
}

std::uint64_t SeqTrackingList::contiguous_end(std::uint64_t from) const {
  std::size_t i = first_reaching(from + 1);
  if (i < ranges_.size() && ranges_[i].begin <= from) return ranges_[i].end;
  return from;
}

void SeqTrackingList::clear() {
  ranges_.clear();
  hint_ = 0;
}

}  // namespace canopy::transport
