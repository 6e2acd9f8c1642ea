#include "core/folded_part.h"

#include <capnp/serialize.h>

#include "core/backend_part.h"
#include "core/codec.h"

namespace canopy::core {

namespace {

// What unfold() reads of a part (decode_topology: the nodes, hosts, link settings and
// ports), without the tree-wide settings, service options and view 0 the node read
// once as it came: 67 words of a b:16^2 back-end's 536 bytes are 53.
kj::Array<capnp::word> unfoldable_copy(wire::Topology::Reader message) {
  capnp::MallocMessageBuilder copy(message.totalSize().wordCount + 1);
  auto out = copy.initRoot<wire::Topology>();
  out.setCompact(message.getCompact());
  out.setHosts(message.getHosts());
  out.setLinks(message.getLinks());
  out.setPortsFirst(message.getPortsFirst());
  out.setPortsLast(message.getPortsLast());
  return capnp::messageToFlatArray(copy);
}

}  // namespace

FoldedPart::FoldedPart(wire::Topology::Reader message, const Topology& decoded, Rank self) {
  message_ = unfoldable_copy(message);
  const TopologyNode& me = decoded.at(self);
  const TopologyNode& up = decoded.at(*me.parent);
  root_ = decoded.root().rank;
  self_ = {self, me.role, me.host};
  parent_ = {up.rank, up.role, up.host};
  // A back-end has nothing below it; its siblings are its parent's other children.
  place_.siblings = static_cast<std::uint32_t>(up.children.size() - 1);
  for (const TopologyNode* n = &me; n->parent; n = &decoded.at(*n->parent)) ++place_.depth;
  unknown_ports_ = RankSet::of(adopter_ports_missing(decoded, up.rank));
}

const FoldedPart::Held* FoldedPart::held(Rank rank) const {
  if (rank == self_.rank) return &self_;
  if (rank == parent_.rank) return &parent_;
  return nullptr;
}

void FoldedPart::add_endpoints(wire::Endpoints::Reader endpoints,
                               const std::vector<std::pair<Rank, std::uint16_t>>& learnt) {
  endpoints_.push_back(flat_copy(endpoints));
  for (const auto& [rank, port] : learnt) {
    if (port != 0) unknown_ports_.erase(rank);
  }
}

Result<Topology> FoldedPart::unfold() const {
  capnp::FlatArrayMessageReader reader(message_.asPtr());  // read as it was when it arrived
  auto topology = decode_topology(reader.getRoot<wire::Topology>());
  if (!topology) return topology;
  std::vector<std::pair<Rank, std::uint16_t>> learnt;
  for (const auto& words : endpoints_) {
    capnp::FlatArrayMessageReader message(words.asPtr());
    if (!read_endpoints(message.getRoot<wire::Endpoints>(), learnt)) continue;  // checked as it came
    for (const auto& [rank, port] : learnt) topology->set_port(rank, port);
  }
  return topology;
}

void FoldedPart::set_live(std::vector<LiveTree::Report> reports, Held parent, std::uint32_t parent_incarnation,
                          TreeView::Place place) {
  reports_ = std::move(reports);
  parent_ = std::move(parent);
  parent_incarnation_ = parent_incarnation;
  place_ = place;
}

std::size_t FoldedPart::bytes() const {
  std::size_t words = message_.size();
  for (const auto& e : endpoints_) words += e.size();
  return words * sizeof(capnp::word) + endpoints_.capacity() * sizeof(endpoints_[0]) +
         reports_.capacity() * sizeof(LiveTree::Report) + sizeof(*this);
}

}  // namespace canopy::core
