#include "canopy/event.h"

namespace canopy {

std::string_view to_string(Event::Kind kind) {
  switch (kind) {
    case Event::Kind::failure: return "failure";
    case Event::Kind::adoption: return "adoption";
    case Event::Kind::recovered: return "recovered";
    case Event::Kind::view: return "view";
    case Event::Kind::gossip: return "gossip";
    case Event::Kind::frontend_lost: return "frontend_lost";
    case Event::Kind::promoted: return "promoted";
    case Event::Kind::reattached: return "reattached";
    case Event::Kind::service: return "service";
  }
  return "event";
}

namespace {
std::string ranks_json(const std::vector<Rank>& ranks) {
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out + "]";
}
}  // namespace

std::string to_json(const Event& e) {
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(e.time.time_since_epoch()).count();
  std::string out = "{\"event\":\"" + std::string(to_string(e.kind)) + "\"";
  if (e.kind != Event::Kind::view) out += ",\"rank\":" + std::to_string(e.rank);
  switch (e.kind) {
    case Event::Kind::view:
      out += ",\"view\":" + std::to_string(e.view.id) + ",\"members\":" + std::to_string(e.view.members.size()) +
             ",\"left\":" + ranks_json(e.left) + ",\"joined\":" + ranks_json(e.joined) +
             ",\"stabilise_us\":" + std::to_string(e.stabilise.count());
      break;
    case Event::Kind::failure:
    case Event::Kind::frontend_lost:
      out += ",\"reason\":" + to_json(Value{e.reason});
      if (e.silent.count() > 0) out += ",\"silent_ms\":" + std::to_string(e.silent.count());
      break;
    case Event::Kind::promoted:
      out += ",\"failed_parent\":" + std::to_string(e.failed_parent) + ",\"adopted\":" + std::to_string(e.adopted) +
             ",\"after_us\":" + std::to_string(e.after.count());
      break;
    case Event::Kind::reattached:
      out += ",\"after_us\":" + std::to_string(e.after.count()) + ",\"connect_us\":" + std::to_string(e.connect.count()) +
             ",\"incomplete_streams\":" + ranks_json(e.incomplete_streams);
      break;
    case Event::Kind::gossip:
      out += ",\"detector\":" + std::to_string(e.detector) + ",\"silent_ms\":" + std::to_string(e.silent.count());
      break;
    case Event::Kind::adoption:
      out += ",\"adopter\":" + std::to_string(e.adopter) + ",\"incarnation\":" + std::to_string(e.incarnation);
      break;
    case Event::Kind::service:
      out += ",\"service\":" + to_json(Value{e.service}) + ",\"detail\":" + to_json(Value{e.detail});
      break;
    case Event::Kind::recovered: {
      out += ",\"adopter\":" + std::to_string(e.adopter) + ",\"failed_parent\":" + std::to_string(e.failed_parent) +
             ",\"incarnation\":" + std::to_string(e.incarnation) + ",\"attempts\":" + std::to_string(e.attempts) +
             ",\"standby\":" + (e.standby ? "true" : "false") +
             ",\"choose_us\":" + std::to_string(e.choose.count()) +
             ",\"connect_us\":" + std::to_string(e.connect.count()) +
             ",\"compensate_us\":" + std::to_string(e.compensate.count()) +
             ",\"cleanup_us\":" + std::to_string(e.cleanup.count()) +
             ",\"incomplete_streams\":" + ranks_json(e.incomplete_streams);
      break;
    }
  }
  out += ",\"time_us\":" + std::to_string(micros) + "}";
  return out;
}

}  // namespace canopy
