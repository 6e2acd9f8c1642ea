// The union workload of `canopy run` and `canopy attach-frontend` (docs/demo.md).
// Random integers through incremental_union,
// healed through failures. The run waits for the end marker of every back-end that
// has not left the membership view; a back-end that fails leaves the view (a view
// event) and is not waited for. The final union is checked against what the back-ends recorded
// (union_record.h): all of the survivors', and what each failed back-end recorded
// more than a second before the front-end learned of its failure.
//
// collect_union() is the part a front-end that re-attached (canopy attach-frontend)
// carries on: it starts from the union the heir regenerated, and knows nothing of the
// back-ends that left the view before it: `gone_before` (their failure times are taken
// from their records: the check asks for what each recorded more than a second
// before it stopped).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "canopy/frontend.h"
#include "demo_check.h"
#include "status_file.h"
#include "union_record.h"

namespace canopy::tools {

struct UnionOutcome {
  std::set<std::int32_t> result;
  // --sum-stream: the stream beside the union, and the check of its every wave.
  std::optional<StreamId> sum_stream;
  std::unique_ptr<DemoCheck> sum;
  // The waves each back-end sends on it (0: not known; then the highest that came
  // stands in). Its last waves may still be on their way when the union's last end
  // marker comes: they are waited for while they keep coming.
  std::uint64_t sum_waves = 0;
  // The sum's waves that never came, of those it should have had.
  std::vector<std::uint64_t> sum_missing() const {
    return sum ? sum->missing(sum_waves ? sum_waves : sum->end()) : std::vector<std::uint64_t>{};
  }
  std::map<canopy::Rank, canopy::demo::WallClock::time_point> failed;  // left the view, and since when
  std::set<canopy::Rank> gone_before;
  // Back-ends whose record could not be written (a full disk): each sent no integer
  // after the first it could not record (demo_protocol.h, union_record_failed_marker).
  std::set<canopy::Rank> record_failed;
  std::size_t packets = 0;
  double seconds = 0;
  // Once finish_union has checked: "ok", "failed" or "skipped", and the summary line
  // for a person (printed in text; the dashboard's and the report's last word).
  std::string check, summary;
};

// How a command fails: prints `message` (as JSON with --format jsonl) and returns
// the exit status `code`.
using Fail = std::function<int(const std::string& message, int code)>;

// `canopy run --workload union`: starts the workload (`rate_hz` integers a second
// from each back-end for `duration_s`, recorded in `record_dir` if not empty),
// writes what a re-attaching front-end needs into the status file, collects the
// union and checks it. The exit status.
// With `sum_stream`, a sum stream beside it whose every wave is checked
// (demo_protocol.h, kUnionSumTag).
int run_union(Network& net, bool jsonl, int rate_hz, double duration_s, const std::string& record_dir,
              StatusWriter& status, const std::vector<Rank>& backends, const Fail& fail, bool sum_stream = false);
// Receives until every back-end of `backends` not failed (nor `out.gone_before`) has
// sent its end marker, within `limit`, printing the union's size once a second.
int collect_union(Network& net, bool jsonl, StatusWriter& status, const std::vector<Rank>& backends,
                  std::chrono::milliseconds limit, UnionOutcome& out, const Fail& fail);
// Writes DIR/frontend.txt, checks the union against the records, prints the summary
// and shuts the tree down.
int finish_union(Network& net, bool jsonl, const std::string& record_dir, const std::vector<Rank>& backends,
                 UnionOutcome& out, const Fail& fail);

}  // namespace canopy::tools
