// The tree a node holds: the topology its parent sends once it is a child, and the
// listening ports learnt after it, which it sets and sends on to its own children
// (docs/protocol.md, `topology` and `endpoints`).
#include <algorithm>
#include <map>

#include "core/codec.h"
#include "core/log.h"
#include "core/node.h"

namespace canopy::core {

using transport::Link;

void Node::adopt_topology(Topology topology) {
  topology_ = std::move(topology);
  tree_.emplace(*topology_, id_.rank);
  for (Rank r : topology_->at(id_.rank).children) children_.add(r, topology_->at(r).role);
  log().info("topology: {} processes, {} children, {} back-ends below", topology_->size(), children_.size(),
             tree_->routes());
}

void Node::on_topology(wire::Topology::Reader t) {
  auto topology = decode_topology(t);
  if (!topology) {
    log().error("parent sent an invalid topology: {}", topology.error());
    return begin_stop("invalid topology from parent");
  }
  if (topology_) {
    log().warn("ignoring a second topology from the parent");
    return;
  }
  if (!topology->find(id_.rank)) {
    log().error("parent's topology does not contain this node's rank {}", id_.rank);
    return begin_stop("rank not in topology");
  }
  plan_ = decode_plan(t);
  adopt_topology(std::move(*topology));
  // A commnode listens for its children, and, in open attach, for back-ends that
  // join under it (it may have none at launch).
  if (!children_.empty() || (plan_.open_attach && id_.role == Role::commnode)) {
    if (auto r = listen(); !r) {
      log().error("{}", r.error());
      emit(events::Started{r.error()});
      return begin_stop(r.error());
    }
  }
  emit(events::Started{});
}

void Node::send_topology(Link& link) {
  Message message(id_);
  auto t = message.body().initTopology();
  encode_topology(*topology_, t);
  encode_plan(plan_, t);
  link.send(message.builder());
}

void Node::on_endpoints(wire::Endpoints::Reader in) {
  auto ranks = in.getRanks();
  auto ports = in.getPorts();
  if (!topology_ || ranks.size() != ports.size()) {
    log().warn("ignoring endpoints from the parent: {}", topology_ ? "lists of different lengths" : "no topology yet");
    return;
  }
  std::map<Rank, std::uint16_t> endpoints;
  for (unsigned i = 0; i < ranks.size(); ++i) endpoints[ranks[i]] = ports[i];
  publish_endpoints(endpoints);
  log().debug("{} listening endpoints learnt", endpoints.size());
}

void Node::publish_endpoints(const std::map<Rank, std::uint16_t>& endpoints) {
  std::vector<std::pair<Rank, std::uint16_t>> known;
  for (const auto& [rank, port] : endpoints) {
    if (topology_->set_port(rank, port)) known.emplace_back(rank, port);
    else log().warn("ignoring the endpoint of rank {}: not in the topology", rank);
  }
  // Back-ends too: an orphaned back-end needs the endpoints of its potential adopters.
  if (std::none_of(children_.begin(), children_.end(), [](const Child& c) { return c.link != nullptr; })) return;
  Message message(id_);
  auto e = message.body().initEndpoints();
  auto wire_ranks = e.initRanks(static_cast<unsigned>(known.size()));
  auto wire_ports = e.initPorts(static_cast<unsigned>(known.size()));
  for (std::size_t i = 0; i < known.size(); ++i) {
    wire_ranks.set(static_cast<unsigned>(i), known[i].first);
    wire_ports.set(static_cast<unsigned>(i), known[i].second);
  }
  for (auto& child : children_) {
    if (child.link) child.link->send(message.builder());
  }
}

}  // namespace canopy::core
