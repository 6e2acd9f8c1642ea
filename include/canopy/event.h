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
  enum class Kind : std::uint8_t { failure, adoption, recovered, view, gossip };
  Kind kind = Kind::failure;
  std::chrono::system_clock::time_point time;  // when this process learned of it
  Rank rank = 0;              // failure: the lost process; adoption, recovered: the orphan;
                              // gossip: the member found failed
  Rank adopter = 0;           // adoption, recovered
  Rank failed_parent = 0;     // recovered
  std::uint32_t incarnation = 0;  // adoption, recovered: the orphan's new incarnation
  std::string reason;         // failure: why (exit status, closed connection, silence)
  // recovered: the orphan's times to choose an adopter, to be accepted by it, to send
  // its filter states and held-back output, and to update tables and send reports.
  std::chrono::microseconds choose{0}, connect{0}, compensate{0}, cleanup{0};
  std::uint32_t attempts = 0;     // recovered: adopters tried
  bool standby = false;           // recovered: adopted over its standby link
  std::vector<StreamId> incomplete_streams;  // recovered: streams that may lack data
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
  std::chrono::milliseconds silent{0};
};

std::string_view to_string(Event::Kind kind);
// One JSON object, e.g. {"event":"failure","rank":1000001,"reason":"...","time":...}.
std::string to_json(const Event& event);

}  // namespace canopy
