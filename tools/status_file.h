// The status file of `canopy run --status FILE` and `canopy status FILE`
// (docs/fault-tolerance.md, "Watching a run"): the live tree as JSON, with the run's
// own state, so that a reader can tell a running tree from a finished run and from
// one whose front-end died without saying so.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "canopy/frontend.h"
#include "dashboard.h"
#include "run_page.h"
#include "run_story.h"

namespace canopy::tools {

// Kept by `canopy run`: every write replaces FILE atomically (a reader never sees
// half a file). With an empty path nothing is written.
class StatusWriter {
 public:
  explicit StatusWriter(std::string path);

  // Takes FILE for this run: replaces whatever an earlier run left with "starting".
  // Fails if FILE cannot be written.
  Result<void> start();
  // Writes the tree now.
  void update(Network& net);
  // Writes the tree if the last write is a second old or more: a reader on another
  // host tells a live run by the file's age.
  void refresh(Network& net);
  // The run is over: writes the last tree seen with the run's exit status. Not when
  // the front-end was replaced (keep_for_reattach): the file, left as it was, turns
  // stale once this process is gone, which is what canopy attach-frontend looks for.
  // Then writes the report (set_report), whatever the outcome; fails if it cannot.
  Result<void> finish(int exit_status);
  void keep_for_reattach() { keep_for_reattach_ = true; }

  // The dashboard (borrowed; may be null) gets what the file gets, more often (every
  // 250 ms while the workload runs), with the streams' rates and the latest events,
  // and the view of them run_page.h renders.
  void set_dashboard(Dashboard* dashboard) { dashboard_ = dashboard; }
  // At finish(), the last view is written to `path` as a page of its own
  // (render_report), replacing it atomically. The caller has checked its directory.
  void set_report(std::string path) { report_path_ = std::move(path); }
  // An event, with its line as canopy run prints it; the dashboard and the report
  // tell the latest 50 in sentences (run_story.h).
  void note(const Event& event, std::string text);
  // How far the workload has come, and its check at the end: set by the workload.
  RunProgress& progress() { return progress_; }
  // JSON members (`"a":1,"b":"x"`) about the run, written in the file from now on
  // (what `canopy attach-frontend` reads: RunRecord).
  void add_run_info(const std::string& members) { info_ += "," + members; }
  // A packet arrived at the front-end on `stream`.
  void count(StreamId stream) { ++streams_[stream].packets; }

 private:
  struct StreamCount {
    std::uint64_t packets = 0;
    std::uint64_t at_last_publish = 0;
    double per_second = 0;
    std::uint64_t at_last_sample = 0;
    std::vector<std::pair<double, double>> samples;  // (seconds since the start, packets per second)
  };
  // Whether anything shows the view: the dashboard or the report.
  bool watching() const { return dashboard_ || !report_path_.empty(); }
  bool write(const std::string& run_fields);
  // `run`, `exit_status`: the run's state as the view says it.
  void publish(const std::string& run_fields, const std::string& run, std::optional<int> exit_status);
  // Each stream's rate over the last second or more, once a second.
  void sample_rates();
  RunPage page(const std::string& run, std::optional<int> exit_status) const;

  std::string path_;
  bool keep_for_reattach_ = false;
  std::string process_;  // ,"host":…,"pid":…,"pid_start":…: this process, written once
  std::string info_;     // ,"workload":… (set_run_info)
  std::string tree_ = "\"nodes\":[]";  // the "nodes" and "view" members of the last write
  std::chrono::steady_clock::time_point last_{};
  Dashboard* dashboard_ = nullptr;
  std::string report_path_;
  std::chrono::steady_clock::time_point last_publish_{};
  std::map<StreamId, StreamCount> streams_;
  // What the view shows beyond the file: since when, the tree with its links, the
  // events told, the progress.
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_sample_ = started_;
  std::vector<PageNode> nodes_;
  std::optional<View> view_;
  EventStory story_{std::chrono::system_clock::now()};
  RunProgress progress_;
};

// What `canopy attach-frontend` reads of a status file: whether its run's front-end
// is gone without finishing (stale) or finished, and what the run was doing.
struct RunRecord {
  std::string state_line;  // as `canopy status` prints it
  bool stale = false;
  bool finished = false;
  std::string workload;    // "union", or "" (not recorded)
  std::optional<std::chrono::system_clock::time_point> union_until;  // when the back-ends stop sending
  std::string record_dir;  // the union workload's --record, absolute, or ""
  std::string reattach_file;
};
Result<RunRecord> read_run_record(const std::string& path);

// `canopy status FILE [--format json] [--watch [--interval S]]`. Exit status: 0 for a
// running or finished run, 1 for a stale file (its run is gone without finishing),
// 2 for a file that cannot be read; --watch redraws until the run is over.
int status_command(const std::string& path, const std::string& format, bool watch, double interval_s);

}  // namespace canopy::tools
