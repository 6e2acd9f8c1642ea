#include "canopy/fault_tolerance.h"

namespace canopy {

std::string_view to_string(GossipSchedule schedule) {
  switch (schedule) {
    case GossipSchedule::off: return "off";
    case GossipSchedule::random: return "random";
    case GossipSchedule::rr: return "rr";
    case GossipSchedule::brr: return "brr";
    case GossipSchedule::dbrr: return "dbrr";
  }
  return "?";
}

std::optional<GossipSchedule> gossip_schedule_from(std::string_view text) {
  for (auto s : {GossipSchedule::off, GossipSchedule::random, GossipSchedule::rr, GossipSchedule::brr,
                 GossipSchedule::dbrr}) {
    if (text == to_string(s)) return s;
  }
  return std::nullopt;
}

}  // namespace canopy
