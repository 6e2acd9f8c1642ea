// The check of the demo workload's results (docs/demo.md), shared by `canopy run`'s
// demo workload and the sum stream beside the union workload (--sum-stream).
//
// Back-end r sends w*1000 + r in wave w. A complete wave (Received::complete) holds
// exactly the back-ends of the stream in the view it came in, and must be the
// filter's exact aggregate over them; an incomplete one must be of its one wave
// over as many back-ends as it says it holds (never two waves mixed), and is listed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "canopy/frontend.h"

namespace canopy::tools {

// The demo's expected aggregate over `backends` at `wave`, or nothing for filters
// whose result is not checked.
std::optional<Value> expected_value(const std::string& filter, std::int32_t wave, const std::vector<Rank>& backends);
// Whether `got` equals `want` (arrays compared sorted, doubles within 1e-6).
bool matches(const Value& got, const Value& want);
// Whether `got` can be the aggregate of wave `wave` over some `holds` of `backends`
// (ascending): a value of that one wave.
bool of_one_wave(const std::string& filter, std::int32_t wave, std::uint32_t holds, const Value& got,
                 const std::vector<Rank>& backends);

class DemoCheck {
 public:
  // `backends`: the stream's, ascending; `checked`: whether values are checked at
  // all (false for a filter or back-end of the user's own: waves are still listed).
  DemoCheck(std::string filter, std::vector<Rank> backends, bool checked);
  // The members of a view, from its event.
  void on_view(const View& view) { members_[view.id] = view.members; }
  void know_view(std::uint64_t id, std::vector<Rank> members) { members_[id] = std::move(members); }
  // Checks one result; `net` answers for a view whose event has not come yet.
  // Returns how many back-ends a complete wave was expected to hold (0 if unknown).
  std::size_t check(const Received& result, Network& net);

  int mismatches() const { return mismatches_; }
  const std::string& first_mismatch() const { return first_; }
  const std::vector<std::uint64_t>& incomplete() const { return incomplete_; }
  std::size_t complete() const { return complete_; }
  // "1,2,5": the incomplete waves, for a summary.
  std::string incomplete_list() const { return wave_list(incomplete_); }
  // The waves below `count` that never came, complete or not: lost whole in a
  // failure, or still on their way when the run ended.
  std::vector<std::uint64_t> missing(std::uint64_t count) const;
  // One past the highest wave that came (0: none).
  std::uint64_t end() const { return seen_.size(); }
  static std::string wave_list(const std::vector<std::uint64_t>& waves);

 private:
  const std::vector<Rank>* members_of(std::uint64_t view, Network& net);
  void mismatch(const std::string& what);

  std::string filter_;
  std::vector<Rank> backends_;
  bool checked_;
  std::map<std::uint64_t, std::vector<Rank>> members_;
  int mismatches_ = 0;
  std::string first_;
  std::vector<std::uint64_t> incomplete_;
  std::size_t complete_ = 0;
  std::vector<bool> seen_;  // by wave number
};

}  // namespace canopy::tools
