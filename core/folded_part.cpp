#include "core/folded_part.h"

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "core/codec.h"

namespace canopy::core {

namespace {
template <typename Reader>
kj::Array<capnp::word> copy_of(Reader reader) {
  capnp::MallocMessageBuilder copy(reader.totalSize().wordCount + 1);
  copy.setRoot(reader);
  return capnp::messageToFlatArray(copy);
}
}  // namespace

FoldedPart::FoldedPart(wire::Topology::Reader message, const Topology& decoded, Rank self) {
  message_ = copy_of(message);
  const TopologyNode& me = decoded.at(self);
  const TopologyNode& up = decoded.at(*me.parent);
  root_ = decoded.root().rank;
  self_ = {self, me.role, me.host};
  parent_ = {up.rank, up.role, up.host};
  // A back-end has nothing below it; its siblings are its parent's other children.
  place_.siblings = static_cast<std::uint32_t>(up.children.size() - 1);
  for (const TopologyNode* n = &me; n->parent; n = &decoded.at(*n->parent)) ++place_.depth;
  std::vector<Rank> unknown;
  for (const TopologyNode& n : decoded.nodes()) {
    if (n.role != Role::backend && n.port == 0) unknown.push_back(n.rank);
  }
  unknown_ports_ = RankSet::of(std::move(unknown));
}

const FoldedPart::Held* FoldedPart::held(Rank rank) const {
  if (rank == self_.rank) return &self_;
  if (rank == parent_.rank) return &parent_;
  return nullptr;
}

void FoldedPart::add_endpoints(wire::Endpoints::Reader endpoints, const std::vector<Rank>& ranks) {
  endpoints_.push_back(copy_of(endpoints));
  auto ports = endpoints.getPorts();
  for (unsigned i = 0; i < ranks.size(); ++i) {
    if (ports[i] != 0) unknown_ports_.erase(ranks[i]);
  }
}

Result<Topology> FoldedPart::unfold() const {
  capnp::FlatArrayMessageReader reader(message_.asPtr());  // read as it was when it arrived
  auto topology = decode_topology(reader.getRoot<wire::Topology>());
  if (!topology) return topology;
  for (const auto& words : endpoints_) {
    capnp::FlatArrayMessageReader message(words.asPtr());
    auto endpoints = message.getRoot<wire::Endpoints>();
    auto ports = endpoints.getPorts();
    std::vector<Rank> ranks;
    if (!expand_rank_runs(endpoints.getRankRuns(), ports.size(), ranks)) continue;  // checked as it came
    for (unsigned i = 0; i < ranks.size(); ++i) topology->set_port(ranks[i], ports[i]);
  }
  return topology;
}

std::size_t FoldedPart::bytes() const {
  std::size_t words = message_.size();
  for (const auto& e : endpoints_) words += e.size();
  return words * sizeof(capnp::word) + endpoints_.capacity() * sizeof(endpoints_[0]) + sizeof(*this);
}

}  // namespace canopy::core
