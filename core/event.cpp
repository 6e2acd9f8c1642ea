#include "canopy/event.h"

namespace canopy {

std::string_view to_string(Event::Kind kind) {
  switch (kind) {
    case Event::Kind::failure: return "failure";
    case Event::Kind::adoption: return "adoption";
    case Event::Kind::recovered: return "recovered";
  }
  return "event";
}

std::string to_json(const Event& e) {
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(e.time.time_since_epoch()).count();
  std::string out = "{\"event\":\"" + std::string(to_string(e.kind)) + "\",\"rank\":" + std::to_string(e.rank);
  switch (e.kind) {
    case Event::Kind::failure:
      out += ",\"reason\":" + to_json(Value{e.reason});
      break;
    case Event::Kind::adoption:
      out += ",\"adopter\":" + std::to_string(e.adopter) + ",\"incarnation\":" + std::to_string(e.incarnation);
      break;
    case Event::Kind::recovered: {
      out += ",\"adopter\":" + std::to_string(e.adopter) + ",\"failed_parent\":" + std::to_string(e.failed_parent) +
             ",\"incarnation\":" + std::to_string(e.incarnation) + ",\"attempts\":" + std::to_string(e.attempts) +
             ",\"choose_us\":" + std::to_string(e.choose.count()) +
             ",\"connect_us\":" + std::to_string(e.connect.count()) +
             ",\"compensate_us\":" + std::to_string(e.compensate.count()) +
             ",\"cleanup_us\":" + std::to_string(e.cleanup.count()) + ",\"incomplete_streams\":[";
      for (std::size_t i = 0; i < e.incomplete_streams.size(); ++i) {
        out += (i ? "," : "") + std::to_string(e.incomplete_streams[i]);
      }
      out += "]";
      break;
    }
  }
  out += ",\"time_us\":" + std::to_string(micros) + "}";
  return out;
}

}  // namespace canopy
