#include "services/runtime.h"

#include <set>

namespace canopy::services {

Runtime::Runtime(boost::asio::io_context& io, core::NodeIdentity identity, filters::FilterRegistry& filters,
                 const Observers& observers, Launcher* launcher, transport::Fabric* fabric)
    : node(io, identity, observers.node, fabric),
      launch(node, launcher ? *launcher : processes, observers.launch),
      detection(node, observers.detection),
      streams(node, filters, observers.streams),
      requests(node, filters, streams, observers.requests),
      recovery(node, streams, observers.recovery),
      membership(node, observers.membership),
      gossip(node, membership, observers.gossip) {
  for (core::Service* service : std::initializer_list<core::Service*>{&launch, &detection, &membership, &gossip,
                                                                      &streams, &requests, &recovery}) {
    (void)node.add_service(*service);  // distinct ids, no circle of runs_after(): cannot fail
  }
  // Waves are judged against the view the root holds when they reach it.
  streams.set_view_source(&view_source_);
}

std::vector<NodeStatus> tree_status(const Runtime& runtime, const Topology& topology) {
  std::vector<NodeStatus> out;
  const core::TreeView* view = runtime.node.live_tree();
  if (!view) return out;
  auto status_of = [&](Rank r) {
    const auto* node = topology.find(r);
    NodeStatus s;
    s.rank = r;
    s.role = view->role(r);
    s.host = node ? node->host : "";
    s.port = node && s.role != Role::backend ? node->port : 0;
    if (view->parent(r) != core::TreeView::kNone) s.parent = view->parent(r);
    s.alive = view->alive(r);
    s.incarnation = view->incarnation(r);
    s.children = view->children(r);
    return s;
  };
  std::vector<Rank> queue{view->root()};
  std::set<Rank> listed;
  for (std::size_t i = 0; i < queue.size(); ++i) {
    const Rank r = queue[i];
    if (!listed.insert(r).second) continue;
    out.push_back(status_of(r));
    queue.insert(queue.end(), out.back().children.begin(), out.back().children.end());
  }
  for (const auto& n : topology.nodes()) {
    if (!listed.count(n.rank) && view->contains(n.rank)) out.push_back(status_of(n.rank));
  }
  const auto& membership = runtime.membership;
  const auto& late = runtime.streams.late_packets();
  for (auto& s : out) {
    if (auto l = late.find(s.rank); l != late.end()) s.late_packets = l->second;
    if (s.role != Role::backend) continue;
    s.member = membership.is_member(s.rank);
    s.epoch = membership.epoch(s.rank);
    auto stale = membership.stale_dropped_in_tree().find(s.rank);
    if (stale != membership.stale_dropped_in_tree().end()) s.stale_dropped = stale->second;
  }
  return out;
}

}  // namespace canopy::services
