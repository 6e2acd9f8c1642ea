#include "core/folded_part.h"

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <algorithm>

#include "core/codec.h"

namespace canopy::core {

FoldedPart::FoldedPart(wire::Topology::Reader message, const Topology& decoded, Rank self) {
  capnp::MallocMessageBuilder copy(message.totalSize().wordCount + 1);
  copy.setRoot(message);
  message_ = capnp::messageToFlatArray(copy);
  const TopologyNode& me = decoded.at(self);
  const TopologyNode& up = decoded.at(*me.parent);
  root_ = decoded.root().rank;
  self_ = {self, me.role, me.host};
  parent_ = {up.rank, up.role, up.host};
  // A back-end has nothing below it; its siblings are its parent's other children.
  place_.siblings = static_cast<std::uint32_t>(up.children.size() - 1);
  for (const TopologyNode* n = &me; n->parent; n = &decoded.at(*n->parent)) ++place_.depth;
}

const FoldedPart::Held* FoldedPart::held(Rank rank) const {
  if (rank == self_.rank) return &self_;
  if (rank == parent_.rank) return &parent_;
  return nullptr;
}

void FoldedPart::set_port(Rank rank, std::uint16_t port) {
  auto it = std::find_if(ports_.begin(), ports_.end(), [&](const auto& p) { return p.first == rank; });
  if (it != ports_.end()) {
    it->second = port;
  } else {
    ports_.emplace_back(rank, port);
  }
}

Result<Topology> FoldedPart::unfold() const {
  capnp::FlatArrayMessageReader reader(message_.asPtr());  // read as it was when it arrived
  auto topology = decode_topology(reader.getRoot<wire::Topology>());
  if (!topology) return topology;
  for (const auto& [rank, port] : ports_) topology->set_port(rank, port);
  return topology;
}

std::size_t FoldedPart::bytes() const {
  return message_.size() * sizeof(capnp::word) + ports_.capacity() * sizeof(ports_[0]) + sizeof(*this);
}

}  // namespace canopy::core
