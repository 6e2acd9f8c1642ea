#include "core/folded_part.h"

#include <capnp/serialize-packed.h>
#include <kj/io.h>

#include "core/backend_part.h"
#include "core/codec.h"

namespace canopy::core {

namespace {

kj::Array<kj::byte> packed(capnp::MessageBuilder& message) {
  kj::VectorOutputStream out;
  capnp::writePackedMessage(out, message);
  return kj::heapArray(out.getArray());
}

template <typename Reader>
kj::Array<kj::byte> packed_copy(Reader reader) {
  capnp::MallocMessageBuilder copy(reader.totalSize().wordCount + 1);
  copy.setRoot(reader);
  return packed(copy);
}

// A message kept packed, read.
class Unpacked {
 public:
  explicit Unpacked(const kj::Array<kj::byte>& bytes) : in_(bytes.asPtr()), reader_(in_) {}
  template <typename T>
  typename T::Reader root() {
    return reader_.getRoot<T>();
  }

 private:
  kj::ArrayInputStream in_;
  capnp::PackedMessageReader reader_;
};

// What unfold() reads of a part (decode_topology: the nodes, hosts, link settings and
// ports), without the tree-wide settings, service options and view 0 the node read
// once as it came: 67 words of a b:16^2 back-end's 536 bytes are 53.
kj::Array<kj::byte> unfoldable_copy(wire::Topology::Reader message) {
  capnp::MallocMessageBuilder copy(message.totalSize().wordCount + 1);
  auto out = copy.initRoot<wire::Topology>();
  out.setCompact(message.getCompact());
  out.setHosts(message.getHosts());
  out.setLinks(message.getLinks());
  out.setPortsFirst(message.getPortsFirst());
  out.setPortsLast(message.getPortsLast());
  return packed(copy);
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
  // (A commnode first folds once its subtree is up, and set_live gives its place.)
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
  endpoints_.push_back(packed_copy(endpoints));
  for (const auto& [rank, port] : learnt) {
    if (port != 0) unknown_ports_.erase(rank);
  }
}

FoldedPart::Below& FoldedPart::below() {
  if (!below_) below_ = std::make_unique<Below>();
  return *below_;
}

void FoldedPart::add_graft(const Topology& subtree, Rank under) {
  capnp::MallocMessageBuilder message;
  encode_topology(subtree, message.initRoot<wire::Topology>());
  below().grafts.emplace_back(packed(message), under);
}

std::vector<FoldedPart::Graft> FoldedPart::grafts() const {
  std::vector<Graft> out;
  if (!below_) return out;
  for (const auto& [bytes, under] : below_->grafts) {
    Unpacked message(bytes);
    // Encoded here from a subtree that was grafted: it decodes.
    if (auto subtree = decode_subtree(message.root<wire::Topology>())) out.push_back({std::move(*subtree), under});
  }
  return out;
}

void FoldedPart::set_routes(RankMap routes) {
  if (!routes.empty() || below_) {
    below().routes = std::move(routes);
    below_->routes.shrink_to_fit();  // held until it unfolds: no room for more
  }
}

std::optional<std::size_t> FoldedPart::route_to(Rank backend) const {
  if (!below_) return std::nullopt;
  if (auto via = below_->routes.find(backend)) return *via;
  return std::nullopt;
}

Result<Topology> FoldedPart::unfold() const {
  Unpacked reader(message_);  // read as it was when it arrived
  auto topology = decode_topology(reader.root<wire::Topology>());
  if (!topology) return topology;
  std::vector<std::pair<Rank, std::uint16_t>> learnt;
  for (const auto& bytes : endpoints_) {
    Unpacked message(bytes);
    if (!read_endpoints(message.root<wire::Endpoints>(), learnt)) continue;  // checked as it came
    for (const auto& [rank, port] : learnt) topology->set_port(rank, port);
  }
  return topology;
}

void FoldedPart::set_live(std::vector<LiveTree::Report> reports, Held parent, std::uint32_t parent_incarnation,
                          TreeView::Place place) {
  reports_ = std::move(reports);
  reports_.shrink_to_fit();  // held until it unfolds: no room for more
  parent_ = std::move(parent);
  parent_incarnation_ = parent_incarnation;
  place_ = place;
}

std::size_t FoldedPart::bytes() const {
  std::size_t held = message_.size();
  for (const auto& e : endpoints_) held += e.size();
  std::size_t below = 0;
  if (below_) {
    for (const auto& g : below_->grafts) held += g.first.size();
    below = sizeof(Below) + below_->routes.runs().capacity() * sizeof(RankMap::Run) +
            below_->grafts.capacity() * sizeof(below_->grafts[0]);
  }
  return held + endpoints_.capacity() * sizeof(endpoints_[0]) +
         reports_.capacity() * sizeof(LiveTree::Report) + below + sizeof(*this);
}

}  // namespace canopy::core
