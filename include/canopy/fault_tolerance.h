// How a Canopy tree detects failures and heals itself: the options a front-end
// launches with, which every process of the tree then uses (docs/fault-tolerance.md).
#pragma once

#include <chrono>

namespace canopy {

// How the tree detects failures and heals itself (docs/fault-tolerance.md).
struct FaultToleranceOptions {
  // false: losing its parent stops a process and its subtree (no healing).
  bool enabled = true;
  // A link with nothing to send for this long carries a heartbeat.
  std::chrono::milliseconds heartbeat{500};
  // A peer silent this long is suspect (logged); this long, lost (its link is cut,
  // and a lost child process started by the node is killed).
  std::chrono::milliseconds suspect{2000};
  std::chrono::milliseconds lost{5000};
  // An orphan that no adopter has accepted after this long stops its subtree.
  std::chrono::milliseconds adoption_timeout{30000};
};

}  // namespace canopy
