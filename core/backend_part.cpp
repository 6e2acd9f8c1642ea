#include "core/backend_part.h"

#include "core/codec.h"

namespace canopy::core {

bool backend_needs_port(const Topology& topology, Rank parent, Rank rank) {
  const TopologyNode* n = topology.find(rank);
  const TopologyNode* up = topology.find(parent);
  if (!n || !up || n->role == Role::backend) return false;
  if (n->parent && up->parent && *n->parent == *up->parent) return true;  // a sibling of the parent
  for (const TopologyNode* a = up;; a = &topology.at(*a->parent)) {  // the parent and its ancestors
    if (a->rank == rank) return true;
    if (!a->parent) return false;
  }
}

std::vector<Rank> adopter_ports_missing(const Topology& part, Rank parent) {
  std::vector<Rank> missing;
  for (const TopologyNode& n : part.nodes()) {
    if (n.port == 0 && backend_needs_port(part, parent, n.rank)) missing.push_back(n.rank);
  }
  return missing;
}

const Topology* BackendPart::get(const Topology& whole, Rank self, const LaunchPlan& plan) {
  if (!part_) {
    part_ = std::make_unique<Topology>(whole.backend_part(self));
    whole_ = plan.whole_tree || !part_->partial();
    std::vector<Rank> ranks;
    ranks.reserve(part_->size());
    for (const TopologyNode& n : part_->nodes()) ranks.push_back(n.rank);
    ranks_ = std::make_unique<RankSet>(RankSet::of(std::move(ranks)));
  }
  return whole_ ? nullptr : part_.get();
}

const std::vector<std::pair<Rank, Rank>>& BackendPart::view_zero(const Topology& whole, const LaunchPlan& plan) {
  if (!view_zero_) {
    // View 0 is the launch topology's back-ends (none in attach mode: they join);
    // a process that holds a part itself has them in its plan.
    if (plan.attach) view_zero_.emplace();
    else if (whole.partial()) view_zero_ = plan.view_zero;
    else view_zero_ = rank_ranges(whole.backends());
  }
  return *view_zero_;
}

bool BackendPart::holds(const Topology& whole, Rank self, const LaunchPlan& plan, Rank rank) {
  if (!ranks_) get(whole, self, plan);
  return whole_ || ranks_->contains(rank);
}

bool BackendPart::sends_port(const Topology& whole, Rank self, const LaunchPlan& plan, Rank rank) {
  if (!ranks_) get(whole, self, plan);
  return whole_ || backend_needs_port(whole, self, rank);
}

void BackendPart::set_port(Rank rank, std::uint16_t port) {
  if (part_) part_->set_port(rank, port);
}

}  // namespace canopy::core
