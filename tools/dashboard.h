// `canopy run --dashboard [ADDR:]PORT`: a read-only web page of the live tree, served
// by the front-end (Boost.Beast) on its own thread. The page (dashboard_page.h) polls
// /view.html, which StatusWriter publishes as run_page.h renders it: the tree drawn as
// it heals, the progress, the rates over time, the events in sentences. /state.json
// is the same in JSON: the status file's tree (state, incarnation, parent, link kind
// and NICs), the membership view, each stream's packet rate at the front-end and the
// latest events (docs/fault-tolerance.md, "Watching a run").
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "canopy/result.h"

namespace canopy::tools {

class Dashboard {
 public:
  // Listens on `where`: "PORT" (on 127.0.0.1) or "ADDR:PORT"; port 0 picks a free one.
  // An address that is not a loopback one is refused unless `anywhere` is set: the
  // page shows the tree's hosts to whoever connects.
  static Result<std::unique_ptr<Dashboard>> start(const std::string& where, bool anywhere = false);
  ~Dashboard();

  // "http://127.0.0.1:PORT/"
  std::string url() const;
  // The documents served at /state.json and /view.html from now on (any thread).
  void publish(std::string state_json, std::string view_html);
  // Waits, at most `limit`, until a page watching the run (one that asked for
  // /view.html within the last 5 s: a browser polls a tab in the background once a
  // second) has fetched what was published last: the run's end reaches an open page
  // before the server goes. Returns at once if none watches.
  void let_watchers_see_the_end(std::chrono::milliseconds limit);

 private:
  struct Impl;
  explicit Dashboard(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace canopy::tools
