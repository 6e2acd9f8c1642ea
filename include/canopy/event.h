// Events of the tree's life that a front-end and a back-end hear of: failures,
// adoptions and recoveries (docs/fault-tolerance.md), and changes of the membership
// view (docs/membership.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "canopy/packet.h"
#include "canopy/topology.h"
#include "canopy/view.h"

namespace canopy {

// A failure, an adoption, a completed recovery, a new view or a failure found by the
// gossip detector, as one process saw it: the front-end (Network::next_event) or a
// back-end (Backend::next_event).
struct Event {
  // frontend_lost, promoted, reattached: the tree outlived its front-end
  // (FaultToleranceOptions::keep_tree_for); heard by the front-end that re-attached.
  // service: an event of a service of the tool's own (core/service.h), by its name.
  enum class Kind : std::uint8_t {
    failure,
    adoption,
    recovered,
    view,
    gossip,
    frontend_lost,
    promoted,
    reattached,
    service
  };
  Kind kind = Kind::failure;
  std::chrono::system_clock::time_point time;  // when this process learned of it
  Rank rank = 0;              // failure: the lost process; adoption, recovered: the orphan;
                              // gossip: the member found failed; frontend_lost: the lost
                              // front-end's rank; promoted, reattached: the heir;
                              // service: the process whose service published it
  Rank adopter = 0;           // adoption, recovered
  Rank failed_parent = 0;     // recovered; promoted: the lost front-end (or heir)
  std::uint32_t incarnation = 0;  // adoption, recovered: the orphan's new incarnation
  std::string reason;         // failure, frontend_lost: why (exit status, closed connection,
                              // silence)
  // recovered: the orphan's times to choose an adopter, to be accepted by it, to send
  // its filter states and held-back output, and to update tables and send reports.
  std::chrono::microseconds choose{0}, connect{0}, compensate{0}, cleanup{0};
  // recovered: when the orphan found its parent lost, on its own clock (so, with the
  // time of a kill on the same host, how long detection took).
  std::chrono::system_clock::time_point orphaned;
  std::uint32_t attempts = 0;     // recovered: adopters tried
  bool standby = false;           // recovered: adopted over its standby link
  std::vector<StreamId> incomplete_streams;  // recovered, reattached: streams that may lack data
  // promoted: from the front-end's loss (frontend_lost's time, on the heir's clock) to
  // the last process left without it adopted by the heir (0: some never were), and
  // how many the heir adopted; reattached: from the loss to the new front-end's
  // acceptance by the heir, and (`connect`) from this front-end's first connection
  // to the heir's topology.
  std::chrono::microseconds after{0};
  std::uint32_t adopted = 0;
  // view: the view this process now holds, and who left and joined since the view
  // it held before (one event per view it applied, in view order; a process that
  // was cut off while views changed gets one event for the changes it missed).
  View view;
  std::vector<Rank> left, joined;
  // view, at the front-end: from the first report of the change reaching it to the
  // last acknowledgement (the paper's stabilisation time Ts).
  std::chrono::microseconds stabilise{0};
  // gossip (docs/gossip.md): the member whose detector confirmed the failure (at a
  // back-end: itself), and how long the failed member's heartbeat had been still
  // there. At the front-end one event per report that reaches it; the view without
  // the member follows.
  Rank detector = 0;
  // gossip: as above; failure: how long before `time` the process may have failed
  // (0 but for a back-end that died with its parent, declared when no adoption came:
  // docs/membership.md).
  std::chrono::milliseconds silent{0};
  // service: the name of the service that published it, and what it says (its own
  // words or data, as text).
  std::string service;
  std::string detail;
};

std::string_view to_string(Event::Kind kind);
// One JSON object, e.g. {"event":"failure","rank":1000001,"reason":"...","time":...}.
std::string to_json(const Event& event);

}  // namespace canopy
