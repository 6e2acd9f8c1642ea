#include "services/runtime.h"

namespace canopy::services {

Runtime::Runtime(boost::asio::io_context& io, core::NodeIdentity identity, filters::FilterRegistry& filters,
                 const Observers& observers, Launcher* launcher)
    : node(io, identity, observers.node),
      launch(node, launcher ? *launcher : processes, observers.launch),
      detection(node, observers.detection),
      streams(node, filters, observers.streams),
      requests(node, filters, streams, observers.requests),
      recovery(node, streams, observers.recovery),
      membership(node, observers.membership),
      gossip(node, membership, observers.gossip) {
  for (core::Service* service : std::initializer_list<core::Service*>{&launch, &detection, &membership, &gossip,
                                                                      &streams, &requests, &recovery}) {
    (void)node.add_service(*service);  // distinct ids: cannot fail
  }
}

std::optional<Event> public_event(const core::NodeEvent& node_event) {
  auto* changed = std::get_if<core::events::TreeChanged>(&node_event);
  if (!changed) return std::nullopt;
  Event event;
  event.time = std::chrono::system_clock::now();
  event.rank = changed->rank;
  if (changed->kind == core::events::TreeChanged::Kind::failure) {
    event.kind = Event::Kind::failure;
    event.reason = changed->reason;
  } else {
    event.kind = Event::Kind::adoption;
    event.adopter = changed->adopter;
    event.incarnation = changed->incarnation;
  }
  return event;
}

Event view_event(const membership::ViewChange& change) {
  Event event;
  event.kind = Event::Kind::view;
  event.time = std::chrono::system_clock::now();
  event.view = change.view;
  event.left = change.left;
  event.joined = change.joined;
  event.stabilise = change.stabilise;
  return event;
}

Event gossip_event(Rank rank, Rank detector, std::chrono::milliseconds silent) {
  Event event;
  event.kind = Event::Kind::gossip;
  event.time = std::chrono::system_clock::now();
  event.rank = rank;
  event.detector = detector;
  event.silent = silent;
  return event;
}

}  // namespace canopy::services
