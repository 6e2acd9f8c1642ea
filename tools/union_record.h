// The union workload's records (docs/demo.md): what each back-end sent, written by
// canopy-demo-backend to DIR/be-RANK.txt, and the check `canopy run --record DIR`
// makes of its final union against them. Pure logic and file reading, no network.
//
// A record file has one line per integer sent, "VALUE TIME_US": the integer and when
// the back-end recorded it, in microseconds of CLOCK_REALTIME (system_clock, the clock
// of canopy::Event::time). A back-end records an integer, and flushes the line, before
// it sends it, so a file holds everything its back-end sent even if it was killed.
// Files of the format before (one integer a line, no time) are read too.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "canopy/result.h"
#include "canopy/topology.h"

namespace canopy::demo {

using WallClock = std::chrono::system_clock;

// How long before the front-end learned of a back-end's failure an integer must have
// been recorded to be required in the union: the integers a back-end sent last may
// die with it (unread in its socket, or in its parent's, when it is killed).
inline constexpr std::chrono::seconds kFailureGrace{1};

struct RecordedValue {
  std::int32_t value = 0;
  std::optional<WallClock::time_point> time;  // none in a file of the old format
};

// The line a back-end writes for `value` recorded at `time`, newline included.
std::string record_line(std::int32_t value, WallClock::time_point time);

// Reads a record file. A last line without its newline is skipped: the back-end was
// killed while writing it, before sending the integer. An error if the file cannot be
// read or a line is neither "VALUE TIME_US" nor "VALUE" (the error names file:line).
Result<std::vector<RecordedValue>> read_record(const std::filesystem::path& path);

// The outcome of comparing the front-end's union with the records.
struct UnionCheck {
  // Distinct integers the union must hold: every integer of the back-ends that did not
  // fail, and of each failed back-end those recorded more than kFailureGrace before
  // the front-end learned of its failure (or recorded without a time).
  std::size_t expected = 0;
  std::size_t missing = 0;  // of those, not in the union
  std::size_t extra = 0;    // in the union, but recorded by no back-end
  // Distinct integers the failed back-ends recorded later than that (and that are not
  // also required), which the union may or may not hold, and how many of them it does.
  std::size_t late_values = 0;
  std::size_t late_arrived = 0;

  bool ok() const { return missing == 0 && extra == 0; }
};

// `records`: what each back-end recorded, by rank; `failed`: the back-ends that left
// the membership view, each with the time the front-end learned of its failure (the
// failure event's time). That is after the kill, so everything recorded more than
// kFailureGrace before the kill is required, and, by the detection delay, a little
// more. `result` holds the integers sent, without the end markers.
UnionCheck check_union(const std::set<std::int32_t>& result, const std::map<Rank, std::vector<RecordedValue>>& records,
                       const std::map<Rank, WallClock::time_point>& failed);

}  // namespace canopy::demo
