// `canopy run --dashboard [ADDR:]PORT`: a read-only web page of the live tree, served
// by the front-end (Boost.Beast) on its own thread. The page (dashboard_page.h) polls
// /state.json, which StatusWriter publishes: the tree as it heals (state,
// incarnation, parent, link kind and NICs), the membership view, each stream's
// packet rate at the front-end and the latest events (docs/fault-tolerance.md,
// "Watching a run").
#pragma once

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
  // The document served at /state.json from now on (any thread).
  void publish(std::string state_json);

 private:
  struct Impl;
  explicit Dashboard(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace canopy::tools
