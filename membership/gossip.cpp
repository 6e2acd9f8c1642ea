#include "membership/gossip.h"

#include <algorithm>
#include <cstring>

#include "core/log.h"
#include "membership.capnp.h"

namespace canopy::membership {

std::vector<core::ServiceId> GossipService::runs_after() const { return {wire::membership::SERVICE_ID}; }

using core::log;
using Kind = wire::gossip::Kind;

GossipService::GossipService(core::ServiceContext& node, MembershipService& membership, Observer* observer)
    : node_(node), membership_(membership), observer_(observer) {}

// None for the defaults (gossip off), which every process reads where it finds none:
// each process kept them in its plan, about 100 bytes of a back-end's 4 KB.
std::string GossipService::plan_options() const {
  const GossipOptions& options = node_.plan().fault.gossip;
  return options == GossipOptions{} ? std::string{} : encode_options(options);
}

std::string GossipService::encode_options(const GossipOptions& options) {
  capnp::MallocMessageBuilder message;
  auto o = message.initRoot<wire::gossip::Options>();
  o.setSchedule(static_cast<std::uint8_t>(options.schedule));
  o.setPeriodMs(static_cast<std::uint32_t>(options.period.count()));
  o.setMaxHangupMs(static_cast<std::uint32_t>(options.max_hangup.count()));
  o.setPingTimeoutMs(static_cast<std::uint32_t>(options.ping_timeout.count()));
  return core::options_bytes(message);
}

std::optional<GossipOptions> GossipService::decode_options(std::string_view bytes) {
  using std::chrono::milliseconds;
  GossipOptions options;
  const bool read = core::read_options_bytes(bytes, [&](capnp::MessageReader& message) {
    auto o = message.getRoot<wire::gossip::Options>();
    options.schedule = o.getSchedule() <= static_cast<std::uint8_t>(GossipSchedule::dbrr)
                           ? static_cast<GossipSchedule>(o.getSchedule())
                           : GossipSchedule::off;
    options.period = milliseconds(std::max<std::uint32_t>(10, o.getPeriodMs()));
    options.max_hangup = milliseconds(o.getMaxHangupMs());
    options.ping_timeout = milliseconds(o.getPingTimeoutMs());
  });
  if (!read) return std::nullopt;
  return options;
}

GossipOptions GossipService::options() const {
  if (ring_) return ring_->options;
  const auto& all = node_.plan().service_options;
  auto it = all.find(id());
  if (it == all.end()) return GossipOptions{};
  return decode_options(it->second).value_or(GossipOptions{});
}

std::optional<GossipService::MemberState> GossipService::state_of(Rank rank) const {
  if (!ring_) return std::nullopt;
  if (member() && rank == node_.identity().rank) return MemberState::alive;
  auto it = ring_->peers.find(rank);
  if (it == ring_->peers.end()) return std::nullopt;
  return it->second.state;
}

std::uint64_t GossipService::heartbeat_of(Rank rank) const {
  if (rank == node_.identity().rank) return own_beat();
  if (!ring_) return 0;
  auto it = ring_->peers.find(rank);
  return it == ring_->peers.end() ? 0 : it->second.beat;
}

std::chrono::milliseconds GossipService::suspicion_time() const {
  const GossipOptions gossip = options();
  const auto n = static_cast<std::uint32_t>(std::max<std::size_t>(ring_ ? ring_->ranks.size() : 0, 2));
  return gossip.period * cleanup_rounds(gossip.schedule, n) + gossip.max_hangup;
}

std::chrono::milliseconds GossipService::ping_timeout() const {
  const GossipOptions gossip = options();
  return gossip.ping_timeout.count() > 0 ? gossip.ping_timeout : node_.plan().fault.lost;
}

// The counter carries the member's epoch above it: a process that rejoined under the
// rank of a failed one (a higher epoch) starts above anything the old one sent.
std::uint64_t GossipService::own_beat() const {
  return (std::uint64_t{node_.identity().epoch} << 40) | (ring_ ? ring_->counter : 0);
}

bool GossipService::member() const {
  return ring_ && ring_->self < ring_->ranks.size() && ring_->ranks[ring_->self] == node_.identity().rank;
}

// ---- events ----

void GossipService::on_event(const core::NodeEvent& event) {
  using namespace core::events;
  if (auto* started = std::get_if<Started>(&event)) {
    if (!started->error.empty() || ring_ || node_.identity().role != Role::backend) return;
    const GossipOptions options = this->options();
    if (options.schedule == GossipSchedule::off) return;
    ring_ = std::make_unique<Ring>(node_.io(), node_.identity().rank);
    ring_->options = options;
    log().info("gossip: {} every {} ms", to_string(options.schedule), options.period.count());
    arm();
  } else if (std::holds_alternative<Adopted>(event) && ring_) {
    // Tables to this member were lost while it was an orphan, and its own held back.
    std::vector<Rank> all;
    for (const auto& [rank, peer] : ring_->peers) all.push_back(rank);
    restart_clocks(all);
  } else if (auto* changed = std::get_if<TreeChanged>(&event)) {
    // A commnode failed or one was adopted: the heartbeats of the members below it
    // were held back or lost meanwhile, through no fault of theirs.
    const auto* tree = node_.live_tree();
    if (ring_ && tree && tree->contains(changed->rank) && tree->role(changed->rank) != Role::backend) {
      restart_clocks(tree->backends_below(changed->rank));
    }
  } else if (std::holds_alternative<Stopping>(event)) {
    if (ring_) ring_->timer.cancel();
  }
}

void GossipService::restart_clocks(const std::vector<Rank>& ranks) {
  if (!ring_) return;
  const auto now = NodeClock::now();
  for (Rank r : ranks) {
    if (auto it = ring_->peers.find(r); it != ring_->peers.end()) it->second.restart(now);
  }
}

// While this member is an orphan, or `rank` (or this member) is alive but does not
// hang from the root through live processes (a commnode above it failed and it is
// not adopted yet), the tree is healing between them: no verdict. (A member the
// live tree has as failed is not waited for: its parent saw it go.)
bool GossipService::paused(Rank rank) const {
  const auto* tree = node_.live_tree();
  if (!tree || node_.phase() == core::Phase::orphaned) return true;
  const Rank me = node_.identity().rank;
  return (tree->contains(rank) && tree->alive(rank) && !tree->attached(rank)) || !tree->attached(me);
}

// ---- rounds ----

void GossipService::arm() {
  ring_->timer.expires_after(ring_->options.period);
  ring_->timer.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) tick();
  });
}

void GossipService::tick() {
  if (node_.stopping()) return;
  refresh_ring();
  if (member() && ring_->ranks.size() >= 2) {
    const auto schedule = ring_->options.schedule;
    const auto n = static_cast<std::uint32_t>(ring_->ranks.size());
    ++ring_->counter;
    ring_->round = ring_->round % cycle_rounds(schedule, n) + 1;
    send_table(ring_->ranks[gossip_target(schedule, ring_->self, ring_->round, n, ring_->rng)]);
    check();
  }
  arm();
}

// The ring is the membership view: a new view reshapes it. A member new to the ring
// starts its clock now; the others keep theirs: a heartbeat that stopped before the
// view is still stopped (another member of a hung host is found as soon as the first),
// and one that only takes longer to arrive over the new ring's paths is cleared by
// the ping.
void GossipService::refresh_ring() {
  if (membership_.view_id() == ring_->view) return;
  const View view = membership_.view();
  ring_->view = view.id;
  ring_->ranks = view.members;
  const Rank me = node_.identity().rank;
  auto self = std::find(ring_->ranks.begin(), ring_->ranks.end(), me);
  ring_->self = static_cast<std::uint32_t>(self - ring_->ranks.begin());
  ring_->round = 0;
  const auto now = NodeClock::now();
  std::map<Rank, Member> next;
  for (Rank r : ring_->ranks) {
    if (r == me) continue;
    auto it = ring_->peers.find(r);
    Member peer = it != ring_->peers.end() ? it->second : Member{};
    if (it == ring_->peers.end()) peer.restart(now);
    next.emplace(r, peer);
  }
  ring_->peers = std::move(next);
  log().info("gossip: ring of view {}: {} members, suspicion after {} ms", view.id, ring_->ranks.size(),
             suspicion_time().count());
}

void GossipService::send_table(Rank to) {
  std::vector<TableEntry> entries;
  entries.reserve(ring_->ranks.size());
  for (Rank r : ring_->ranks) entries.push_back({r, heartbeat_of(r)});
  const auto bytes = encode_table(entries);
  core::Outgoing message(node_.identity(), id(), Kind::TABLE);
  auto t = message.init<wire::gossip::Table>();
  t.setSource(node_.identity().rank);
  t.setDestination(to);
  t.setEntries(kj::arrayPtr(bytes.data(), bytes.size()));
  ++ring_->tables_sent;
  route(message, to);
}

void GossipService::merge(wire::gossip::Table::Reader table) {
  const auto data = table.getEntries();
  auto entries = decode_table({data.begin(), data.size()});
  if (!entries) {
    log().warn("gossip: a table from back-end {} is dropped: {}", table.getSource(), entries.error());
    return;
  }
  if (!ring_) return;  // not a member here: no peer to update
  const auto now = NodeClock::now();
  for (const auto& [rank, beat] : *entries) {
    auto it = ring_->peers.find(rank);
    if (it == ring_->peers.end() || beat <= it->second.beat) continue;
    Member& peer = it->second;
    peer.beat = beat;
    peer.heard = true;
    peer.grew = now;
    if (peer.state == MemberState::pinging) {
      peer.state = MemberState::alive;
      log().info("gossip: back-end {}'s heartbeat grew again; no longer suspect", rank);
    }
  }
}

void GossipService::check() {
  const auto now = NodeClock::now();
  for (auto& [rank, peer] : ring_->peers) {
    // A member whose heartbeat never grew here has not started its detector (or
    // started it seconds after this one): it is never suspected (paper 003, eq. 4).
    if (peer.state == MemberState::failed || !peer.heard) continue;
    if (paused(rank)) {
      peer.restart(now);
      continue;
    }
    if (peer.state == MemberState::alive) {
      if (now - peer.grew >= suspicion_time()) ping(rank, peer);
    } else if (now - peer.pinged >= ping_timeout()) {
      confirm(rank, peer, "no answer to a ping within " + std::to_string(ping_timeout().count()) + " ms");
    } else {
      ping(rank, peer);  // again: a ping may die with a commnode on its way
    }
  }
}

// ---- the ping procedure ----

void GossipService::ping(Rank rank, Member& peer) {
  if (peer.state != MemberState::pinging) {
    log().info("gossip: back-end {} is suspect: its heartbeat has been still for {} ms; pinging it", rank,
               std::chrono::duration_cast<std::chrono::milliseconds>(NodeClock::now() - peer.grew).count());
    peer.state = MemberState::pinging;
    peer.nonce = ring_->next_nonce++;
    peer.pinged = NodeClock::now();
  }
  core::Outgoing message(node_.identity(), id(), Kind::PING);
  auto p = message.init<wire::gossip::Ping>();
  p.setSource(node_.identity().rank);
  p.setDestination(rank);
  p.setNonce(peer.nonce);
  ++ring_->pings_sent;
  route(message, rank);
}

void GossipService::on_ping(wire::gossip::Ping::Reader ping) {
  core::Outgoing message(node_.identity(), id(), Kind::PONG);
  auto p = message.init<wire::gossip::Pong>();
  p.setSource(node_.identity().rank);
  p.setDestination(ping.getSource());
  p.setSuspect(node_.identity().rank);
  p.setNonce(ping.getNonce());
  p.setBeat(own_beat());
  route(message, ping.getSource());
}

// The suspect's parent: its link is gone, so no process will answer for it.
void GossipService::answer_gone(wire::gossip::Ping::Reader ping) {
  core::Outgoing message(node_.identity(), id(), Kind::PONG);
  auto p = message.init<wire::gossip::Pong>();
  p.setSource(node_.identity().rank);
  p.setDestination(ping.getSource());
  p.setSuspect(ping.getDestination());
  p.setNonce(ping.getNonce());
  p.setGone(true);
  route(message, ping.getSource());
}

void GossipService::on_pong(wire::gossip::Pong::Reader pong) {
  if (!ring_) return;
  auto it = ring_->peers.find(pong.getSuspect());
  if (it == ring_->peers.end() || it->second.state != MemberState::pinging || it->second.nonce != pong.getNonce()) return;
  Member& peer = it->second;
  if (pong.getGone()) {
    return confirm(it->first, peer, "its parent " + node_.describe(pong.getSource()) + " has lost its link");
  }
  peer.beat = std::max(peer.beat, pong.getBeat());
  peer.state = MemberState::alive;
  peer.grew = NodeClock::now();
  log().info("gossip: back-end {} answered the ping: alive", it->first);
}

void GossipService::confirm(Rank rank, Member& peer, const std::string& how) {
  peer.state = MemberState::failed;
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(NodeClock::now() - peer.grew);
  const std::string reason =
      "gossip: its heartbeat was still for " + std::to_string(silent.count()) + " ms, and " + how;
  log().warn("gossip: back-end {} failed ({})", rank, reason);
  if (observer_) observer_->on_confirmed(rank, silent);
  node_.publish(gossip_event(rank, node_.identity().rank, silent));
  membership_.report_end_to_end(rank, reason, silent);
}

// ---- messages: passed on hop by hop to their member ----

bool GossipService::route(core::Outgoing& message, Rank destination, bool* gone) {
  if (auto via = node_.route_to(destination)) {
    const auto& child = node_.children()[*via];
    if (child.link && child.link->is_open()) {
      node_.send_to_child(*via, message);
      return true;
    }
    if (gone) *gone = child.rank == destination;
    return false;
  }
  return !node_.is_root() && node_.send_up(message);
}

template <typename T>
bool GossipService::pass_on(std::uint16_t kind, typename T::Reader body, Rank destination, bool* gone) {
  core::Outgoing out(node_.identity(), id(), kind);
  out.set<T>(body);
  ++forwarded_;
  return route(out, destination, gone);
}

void GossipService::on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) {
  const Rank me = node_.identity().rank;
  const bool here = node_.identity().role == Role::backend;
  switch (static_cast<Kind>(kind)) {
    case Kind::TABLE: {
      auto t = body.getAs<wire::gossip::Table>();
      if (t.getDestination() == me && here) {
        refresh_ring();
        return merge(t);
      }
      pass_on<wire::gossip::Table>(kind, t, t.getDestination());
      return;
    }
    case Kind::PING: {
      auto p = body.getAs<wire::gossip::Ping>();
      if (p.getDestination() == me && here) return on_ping(p);
      bool gone = false;
      if (!pass_on<wire::gossip::Ping>(kind, p, p.getDestination(), &gone) && gone) answer_gone(p);
      return;
    }
    case Kind::PONG: {
      auto p = body.getAs<wire::gossip::Pong>();
      if (p.getDestination() == me && here) return on_pong(p);
      pass_on<wire::gossip::Pong>(kind, p, p.getDestination());
      return;
    }
  }
  log().warn("gossip: ignoring a message of kind {} from {}", kind, node_.describe(from.sender));
}

}  // namespace canopy::membership
