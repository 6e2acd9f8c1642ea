#include "core/connections.h"

#include <limits>

#include "core/codec.h"
#include "core/log.h"
#include "core/service_context.h"

namespace canopy::core {

using transport::Link;

void Connections::refuse(const std::shared_ptr<Link>& link, const Refusal& refusal) {
  if (refusal.stranger.empty()) {
    log().warn("refusing {}: {}", refusal.whom, refusal.why);
  } else {
    note_stranger(link->peer(), refusal.stranger, refusal.why);
  }
  if (refusal.for_good) {
    Message stop(self_.identity());
    stop.body().initShutdown().setReason(
        refusal.told.empty() ? "refused by " + self_.describe(self_.identity().rank) + ": " + refusal.why : refusal.told);
    link->send(stop.builder());
  }
  link->close(refusal.why);
}

void Connections::note_stranger(const std::string& peer, std::string_view kind, const std::string& why) {
  if (!refusals_) refusals_ = std::make_unique<transport::RefusalLog>();
  if (auto unlogged = refusals_->admit(peer, kind)) {
    log().warn("refusing connection from {}: {}{}", peer, why, transport::RefusalLog::unlogged_note(*unlogged));
  }
}

// A descriptor per back-end: short of them, the soft limit (often 1,024) is raised to
// the hard one, here rather than at the start so that the children this node launched
// keep the limit they were given. Counted again (a directory listing) only once the
// last count, less one per back-end since, comes near the reserve.
std::optional<std::string> Connections::take_descriptor() {
  if (spare_descriptors_ < 4 * kJoinReserve) {
    auto left = descriptors_left();
    if (left && *left < kJoinReserve) {
      if (auto raised = raise_descriptor_limit()) log().info("open descriptors: at most {} now", *raised);
      left = descriptors_left();
    }
    spare_descriptors_ = left.value_or(std::numeric_limits<std::size_t>::max());
    if (spare_descriptors_ < kJoinReserve) {
      return "it is out of file descriptors (" + std::to_string(spare_descriptors_) + " left, " +
             std::to_string(kJoinReserve) +
             " kept for the tree's own links): join under another commnode, or raise its limit (ulimit -n)";
    }
  }
  --spare_descriptors_;
  return std::nullopt;
}

Connections::Connection& Connections::add(std::shared_ptr<Link> link) {
  Table& t = table();
  const Link* raw = link.get();
  auto [it, inserted] = t.by_link.try_emplace(raw, Connection{std::move(link), AwaitingHello{}, nullptr});
  if (inserted) ++t.counts[index_of<AwaitingHello>()];
  return it->second;
}

Connections::Connection* Connections::find(const Link* link) {
  if (!table_) return nullptr;
  auto it = table_->by_link.find(link);
  return it == table_->by_link.end() ? nullptr : &it->second;
}

Connections::Connection& Connections::set(const std::shared_ptr<Link>& link, State next) {
  Table& t = table();
  auto it = t.by_link.find(link.get());
  if (it == t.by_link.end()) {
    it = t.by_link.emplace(link.get(), Connection{link, AwaitingHello{}, nullptr}).first;
  } else {
    --t.counts[it->second.state.index()];
  }
  Connection& c = it->second;
  c.state = std::move(next);
  ++t.counts[c.state.index()];
  if (std::holds_alternative<Joining>(c.state) || std::holds_alternative<Standby>(c.state)) {
    c.hello_deadline.reset();
  }
  return c;
}

std::optional<Connections::Connection> Connections::remove(const Link* link) {
  if (!table_) return std::nullopt;
  auto it = table_->by_link.find(link);
  if (it == table_->by_link.end()) return std::nullopt;
  --table_->counts[it->second.state.index()];
  std::optional<Connection> out(std::move(it->second));
  auto& by_link = table_->by_link;
  by_link.erase(it);
  // Every child of a commnode passes through here once admitted (Node::take_link): the
  // buckets its launch grew to stay, 8 bytes a child, unless given back (entries do
  // not move: what find() returned stays valid).
  if (by_link.empty()) {
    table_.reset();
  } else if (by_link.size() < by_link.bucket_count() / 8) {
    by_link.rehash(0);
  }
  return out;
}

Connections::Connection* Connections::joining(Rank rank) {
  if (count<Joining>() == 0) return nullptr;
  for (auto& [raw, c] : table_->by_link) {
    if (const auto* j = std::get_if<Joining>(&c.state); j && j->rank == rank) return &c;
  }
  return nullptr;
}

std::size_t Connections::unadmitted() const {
  return count<AwaitingHello>() + count<Challenged>() + count<HeldOrphan>() + count<Joining>();
}

std::vector<std::shared_ptr<Link>> Connections::links(const std::function<bool(const State&)>& in) const {
  std::vector<std::shared_ptr<Link>> out;
  if (!table_) return out;
  for (const auto& [raw, c] : table_->by_link) {
    if (in(c.state)) out.push_back(c.link);
  }
  return out;
}

void Connections::detach_all() {
  if (!table_) return;
  for (auto& [raw, c] : table_->by_link) c.link->detach();
  table_.reset();
}

}  // namespace canopy::core
