#include "services/recovery.h"

#include "core/log.h"
#include "streams.capnp.h"
#include "transport/random.h"

namespace canopy::services {

std::vector<core::ServiceId> RecoveryService::runs_after() const { return {wire::streams::SERVICE_ID}; }

using core::log;
using Clock = std::chrono::steady_clock;

namespace {

std::chrono::microseconds us(Clock::duration d) { return std::chrono::duration_cast<std::chrono::microseconds>(d); }

// Standby links: how long the live tree must be still before the link moves, and
// how often it is checked anyway (a link refused or lost is opened again then).
constexpr std::chrono::milliseconds kStandbySettle{50};
constexpr std::chrono::milliseconds kStandbyCheck{1000};
// No standby link opens or moves between 1 and 2 s (spread at random) after the
// node started, after a failure it hears of, and after its own adoption: a large
// tree's thousand handshakes run after its launch, and the new links of a storm's
// orphans after the storm, rather than competing with them for the cores
// (docs/fault-tolerance.md, "Orphans": standby links).
constexpr std::chrono::milliseconds kStandbyQuiet{1000};

}  // namespace

RecoveryService::RecoveryService(core::ServiceContext& node, const StreamService& streams, Observer* observer)
    : node_(node),
      streams_(streams),
      observer_(observer) {}

bool RecoveryService::standby_links() const {
  const auto& fault = node_.plan().fault;
  return fault.enabled && fault.standby_links;
}

void RecoveryService::on_event(const core::NodeEvent& event) {
  if (std::holds_alternative<core::events::Orphaned>(event)) {
    if (standby_) standby_->dial.cancel();
    Search& s = search();
    s.searching = true;
    s.orphaned_at = std::chrono::system_clock::now();
    s.choose = {};
    s.attempts = 0;
    start_round();
  } else if (auto* promoted = std::get_if<core::events::Promoted>(&event)) {
    promotion_ = std::make_unique<Promotion>(Promotion{.failed_root = promoted->failed_root, .reason = promoted->reason,
                           .lost_at = std::chrono::system_clock::now(), .since = NodeClock::now()});
    check_promotion();
  } else if (auto* adopted = std::get_if<core::events::Adopted>(&event);
             adopted && promotion_ && node_.live_tree() && adopted->adopter == node_.live_tree()->root()) {
    // Once every service has sent its state and the core the output held back: the
    // report closes what the heir hands the new front-end.
    asio::post(node_.io(), [this] {
      if (promotion_ && !node_.stopping()) report_promotion();
    });
    check_standby_after(kStandbySettle);
  } else if (auto* changed = std::get_if<core::events::TreeChanged>(&event);
             changed && changed->kind == core::events::TreeChanged::Kind::adoption) {
    // Public as the live tree applies it, at every process. (A join, of open attach,
    // is announced by the view that makes the back-end a member.)
    Event adoption;
    adoption.kind = Event::Kind::adoption;
    adoption.rank = changed->rank;
    adoption.adopter = changed->adopter;
    adoption.incarnation = changed->incarnation;
    node_.publish(std::move(adoption));
  } else if (std::holds_alternative<core::events::ChildAdopted>(event) && promotion_) {
    ++promotion_->adopted;
    check_promotion();
  } else if (std::holds_alternative<core::events::Stopping>(event)) {
    promotion_.reset();
    stop();
  } else if (std::holds_alternative<core::events::Started>(event)) {
    hold_standby_back();
  } else if (std::holds_alternative<core::events::TreeChanged>(event) ||
             std::holds_alternative<core::events::Adopted>(event)) {
    if (promotion_) check_promotion();
    auto* changed = std::get_if<core::events::TreeChanged>(&event);
    if (!changed || changed->kind == core::events::TreeChanged::Kind::failure) return hold_standby_back();
    // Settles first: a storm of reports moves the link once, not once per report.
    check_standby_after(kStandbySettle);
  }
}

// ---- the standby link ----

void RecoveryService::hold_standby_back() {
  if (!standby_links()) return;
  const auto spread = std::chrono::milliseconds(transport::random_u64() % (kStandbyQuiet.count() + 1));
  Standby& s = standby();
  s.not_before = std::max(s.not_before, NodeClock::now() + kStandbyQuiet + spread);
  check_standby_after(kStandbySettle);
}

void RecoveryService::check_standby_after(std::chrono::milliseconds delay) {
  if (!standby_links() || node_.stopping()) return;
  Standby& s = standby();
  Timer& timer = s.timer;
  const auto now = NodeClock::now();
  // Never before the link may open or move: a check then would only look again.
  const auto at = std::max(now + delay, s.not_before);
  if (timer.expiry() > now && timer.expiry() >= s.not_before && timer.expiry() <= at) return;  // an earlier one stands
  timer.expires_at(at);
  timer.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) check_standby();
  });
}

// The standby link goes to the first potential adopter, as the live tree stands;
// a link to anyone else is closed and a new one opened.
void RecoveryService::check_standby() {
  // Again later: a refused or lost link is opened again. A node still launching,
  // or whose adopter's port is not published yet, looks again soon.
  check_standby_after(kStandbyCheck);
  if (node_.phase() == core::Phase::launching) return check_standby_after(kStandbySettle);
  if (node_.phase() != core::Phase::running || node_.is_root() || standby_->dial.under_way()) return;
  // Healing switched off (ServiceContext::healing): no standby link until it is on
  // again; the checks go on meanwhile.
  if (!node_.healing()) return;
  if (NodeClock::now() < standby_->not_before) return;  // checked again then (check_standby_after)
  const auto candidates = node_.live_tree()->potential_adopters(node_.identity().rank, unreachable_count() + 1);
  auto first = std::find_if(candidates.begin(), candidates.end(), [&](Rank r) { return !unreachable(r); });
  if (first == candidates.end()) return node_.close_standby("no potential adopter");
  const Rank target = *first;
  if (node_.standby() == target) return;
  const Topology& topology = *node_.topology();
  const canopy::TopologyNode* n = topology.find(target);
  if (!n) return;
  if (n->port == 0) return check_standby_after(kStandbySettle);
  if (topology.link_between(topology.at(node_.identity().rank), *n) == LinkKind::striped) {
    return node_.close_standby("the first potential adopter is reached by a striped link");
  }
  auto dialled = node_.dial(target, false, [this](core::Dialled dialled) {
    if (node_.phase() != core::Phase::running) return;  // a link, never started, closes as it is dropped
    if (!dialled.link) {
      // Its failure may never reach this process (a part of the tree hears only of
      // what concerns it: docs/scale.md): the link goes to the next one meanwhile.
      set_unreachable(standby_->target, true);
      check_standby_after(kStandbySettle);
      return log().info("cannot open a standby link to {}: {}", node_.describe(standby_->target), dialled.error);
    }
    set_unreachable(standby_->target, false);
    node_.open_standby(std::move(dialled.link), standby_->target);
  });
  if (!dialled) return;
  standby_->target = target;
  standby_->dial = std::move(*dialled);
}

void RecoveryService::on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) {
  if (from.kind != core::Peer::Kind::child) return;
  if (static_cast<wire::recovery::Kind>(kind) == wire::recovery::Kind::PROMOTED) {
    return on_promotion_report(body.getAs<wire::recovery::Promoted>());
  }
  if (static_cast<wire::recovery::Kind>(kind) != wire::recovery::Kind::RECOVERED) {
    log().warn("ignoring recovery message of unknown kind {}", kind);
    return;
  }
  auto r = body.getAs<wire::recovery::Recovered>();
  RecoveryReport forwarded;
  forwarded.kind = Event::Kind::recovered;
  forwarded.rank = r.getOrphan();
  forwarded.adopter = r.getAdopter();
  forwarded.failed_parent = r.getFailedParent();
  forwarded.incarnation = r.getIncarnation();
  forwarded.orphaned = std::chrono::system_clock::time_point(std::chrono::microseconds(r.getOrphanedAtUs()));
  forwarded.choose = std::chrono::microseconds(r.getChooseUs());
  forwarded.connect = std::chrono::microseconds(r.getConnectUs());
  forwarded.compensate = std::chrono::microseconds(r.getCompensateUs());
  forwarded.cleanup = std::chrono::microseconds(r.getCleanupUs());
  forwarded.attempts = r.getAttempts();
  forwarded.standby = r.getStandby();
  for (auto s : r.getIncompleteStreams()) forwarded.incomplete_streams.push_back(s);
  report(forwarded);
}

void RecoveryService::start_round() {
  if (!searching() || node_.phase() != core::Phase::orphaned) return;
  Search& s = search();
  auto t0 = Clock::now();
  s.candidates = node_.live_tree()->potential_adopters(node_.identity().rank, 16);
  // Those found unreachable before go last (their failure may not have reached here).
  std::stable_partition(s.candidates.begin(), s.candidates.end(), [&](Rank r) { return !unreachable(r); });
  s.choose += us(Clock::now() - t0);
  s.next = 0;
  std::string list;
  for (Rank r : s.candidates) list += (list.empty() ? "" : " ") + std::to_string(r);
  log().info("potential adopters: {}", list.empty() ? "none" : list);
  try_next();
}

void RecoveryService::try_next() {
  if (!searching() || node_.phase() != core::Phase::orphaned) return;
  Search& s = search();
  if (s.asking || s.dial.under_way()) return;
  const Topology& topology = *node_.topology();
  while (s.next < s.candidates.size()) {
    Rank candidate = s.candidates[s.next++];
    const canopy::TopologyNode* n = topology.find(candidate);
    if (!n || n->port == 0 || !node_.live_tree()->alive(candidate)) continue;
    if (s.attempts++ == 0) s.connect_start = Clock::now();
    s.trying = candidate;
    log().info("asking {} to adopt this node", node_.describe(candidate));
    // Bounded: an adopter that does not answer in time is skipped.
    s.attempt.expires_after(std::max(std::chrono::milliseconds(500), node_.plan().fault.lost));
    s.attempt.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) give_up_attempt();
    });
    if (node_.standby() == candidate &&
        node_.request_adoption_on_standby(candidate, [this](Result<core::Adoption> result) { answered(result); })) {
      s.asking = true;
      s.over_standby = true;
      return;
    }
    auto dialled =
        node_.dial(candidate, false, [this, candidate](core::Dialled dialled) { reached(candidate, std::move(dialled)); });
    if (!dialled) {
      log().warn("cannot reach potential adopter {}: {}", candidate, dialled.error());
      s.attempt.cancel();
      continue;
    }
    s.dial = std::move(*dialled);
    return;
  }
  // Everyone on the list failed: views change as reports arrive; try again shortly.
  s.retry.expires_after(std::chrono::milliseconds(100));
  s.retry.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) start_round();
  });
}

void RecoveryService::set_unreachable(Rank rank, bool is) {
  if (is) {
    if (!unreachable_) unreachable_ = std::make_unique<core::RankSet>();
    unreachable_->insert(rank);
  } else if (unreachable_) {
    unreachable_->erase(rank);
  }
}

void RecoveryService::reached(Rank candidate, core::Dialled dialled) {
  if (node_.phase() != core::Phase::orphaned) return;  // a link, never started, closes as it is dropped
  if (!dialled.link) {
    log().warn("cannot reach potential adopter {}: {}", candidate, dialled.error);
    set_unreachable(candidate, true);
    if (dialled.refused && candidate == node_.live_tree()->root()) {
      // Nothing listens on the front-end's port: its process is gone, and with it the
      // tree (no other process takes the root's place). Waiting out adoption_timeout
      // would keep this orphan and its subtree running for nothing after the run has
      // ended.
      return node_.shutdown("the front-end " + node_.describe(candidate) +
                            " refused the connection: it has exited, and the tree with it");
    }
    search().attempt.cancel();
    asio::post(node_.io(), [this] { try_next(); });
    return;
  }
  connected(candidate, std::move(dialled.link));
}

void RecoveryService::connected(Rank candidate, std::shared_ptr<transport::Link> link) {
  log().info("connected to potential adopter {} ({}), asking for adoption", candidate, link->peer());
  set_unreachable(candidate, false);
  search().asking = true;
  search().over_standby = false;
  node_.request_adoption(std::move(link), candidate, [this](Result<core::Adoption> result) { answered(result); });
}

// The candidate did not answer in time: skip it.
void RecoveryService::give_up_attempt() {
  if (node_.phase() != core::Phase::orphaned) return;
  Search& s = search();
  log().warn("adopter {} did not answer in time", s.trying);
  if (s.asking) {
    s.asking = false;
    node_.cancel_adoption();
  }
  s.dial.cancel();  // a late link is aborted
  asio::post(node_.io(), [this] { try_next(); });
}

void RecoveryService::answered(Result<core::Adoption> result) {
  search().asking = false;
  search().attempt.cancel();
  if (!result) {
    asio::post(node_.io(), [this] { try_next(); });
    return;
  }
  search().searching = false;
  search().retry.cancel();
  const core::Adoption& adoption = *result;
  RecoveryReport r;
  r.kind = Event::Kind::recovered;
  r.rank = node_.identity().rank;
  r.adopter = adoption.adopter;
  r.failed_parent = adoption.failed_parent;
  r.incarnation = adoption.incarnation;
  const Search& s = search();
  r.attempts = s.attempts;
  r.standby = s.over_standby;
  r.orphaned = s.orphaned_at;
  r.choose = s.choose;
  r.connect = us(adoption.accepted - s.connect_start);
  r.compensate = us(adoption.compensated - adoption.accepted);
  r.cleanup = us(Clock::now() - adoption.compensated);
  r.incomplete_streams = streams_.incomplete_after_adoption();
  log().info("adopted by {} after {} attempt(s): choose {} us, connect {} us, compensate {} us, cleanup {} us",
             node_.describe(r.adopter), r.attempts, r.choose.count(), r.connect.count(), r.compensate.count(),
             r.cleanup.count());
  if (observer_) observer_->on_recovered(r);  // an orphan is never the root: report() sends it up
  node_.publish(r);
  report(r);
  // The search is over: its candidates and timers go (about 300 bytes an adopted
  // back-end held for ever), once the call that answered has returned. A node
  // orphaned again makes another.
  asio::post(node_.io(), [this] {
    if (search_ && !search_->searching) search_.reset();
  });
}

void RecoveryService::stop() {
  if (standby_) {
    standby_->timer.cancel();
    standby_->dial.cancel();
  }
  if (!search_) return;
  search_->searching = false;
  search_->retry.cancel();
  search_->attempt.cancel();
  search_->dial.cancel();  // a connection under way is aborted when it completes
  search_->asking = false;
}

RecoveryService::Standby& RecoveryService::standby() {
  if (!standby_) standby_ = std::make_unique<Standby>(node_.io());
  return *standby_;
}

RecoveryService::Search& RecoveryService::search() {
  if (!search_) search_ = std::make_unique<Search>(node_.io());
  return *search_;
}

// ---- the heir of a lost front-end ----

void RecoveryService::check_promotion() {
  const auto* view = node_.live_tree();
  if (!promotion_ || promotion_->complete.count() != 0 || !view) return;
  const auto left = view->left_without_root();
  if (left.size() > 1 || (left.size() == 1 && left.front() != node_.identity().rank)) return;
  promotion_->complete = std::max(std::chrono::microseconds(1), us(NodeClock::now() - promotion_->since));
  log().info("promotion complete: every process left without the front-end is adopted here, {} us after its loss",
             promotion_->complete.count());
}

void RecoveryService::report_promotion() {
  const Promotion p = *std::exchange(promotion_, nullptr);
  core::Outgoing message(node_.identity(), id(), wire::recovery::Kind::PROMOTED);
  auto r = message.init<wire::recovery::Promoted>();
  r.setHeir(node_.identity().rank);
  r.setFailedRoot(p.failed_root);
  r.setReason(p.reason);
  r.setLostAtUs(std::chrono::duration_cast<std::chrono::microseconds>(p.lost_at.time_since_epoch()).count());
  r.setPromotedAfterUs(p.complete.count());
  r.setReattachedAfterUs(us(NodeClock::now() - p.since).count());
  r.setAdopted(p.adopted);
  const auto& incomplete = streams_.incomplete_after_adoption();
  auto list = r.initIncompleteStreams(incomplete.size());
  for (std::size_t i = 0; i < incomplete.size(); ++i) list.set(i, incomplete[i]);
  node_.send_up(message);
}

void RecoveryService::on_promotion_report(wire::recovery::Promoted::Reader r) {
  if (!node_.is_root()) return;
  const auto lost_at = std::chrono::system_clock::time_point(std::chrono::microseconds(r.getLostAtUs()));
  Event lost;
  lost.kind = Event::Kind::frontend_lost;
  lost.rank = node_.identity().rank;
  lost.reason = r.getReason();
  lost.time = lost_at;
  Event promoted;
  promoted.kind = Event::Kind::promoted;
  promoted.rank = r.getHeir();
  promoted.failed_parent = r.getFailedRoot();
  promoted.after = std::chrono::microseconds(r.getPromotedAfterUs());
  promoted.adopted = r.getAdopted();
  promoted.time = lost_at + promoted.after;
  Event reattached;
  reattached.kind = Event::Kind::reattached;
  reattached.rank = r.getHeir();
  reattached.adopter = node_.identity().rank;
  reattached.after = std::chrono::microseconds(r.getReattachedAfterUs());
  reattached.time = std::chrono::system_clock::now();
  for (auto s : r.getIncompleteStreams()) reattached.incomplete_streams.push_back(s);
  std::vector<Event> promotion{std::move(lost), std::move(promoted), std::move(reattached)};
  for (const Event& e : promotion) node_.publish(e);  // the re-attached event last
  if (observer_) observer_->on_promotion(std::move(promotion));
}

void RecoveryService::report(const RecoveryReport& report) {
  if (node_.is_root()) {
    if (observer_) observer_->on_recovered(report);
    node_.publish(report);
    return;
  }
  core::Outgoing message(node_.identity(), id(), wire::recovery::Kind::RECOVERED);
  auto r = message.init<wire::recovery::Recovered>();
  r.setOrphan(report.rank);
  r.setAdopter(report.adopter);
  r.setFailedParent(report.failed_parent);
  r.setIncarnation(report.incarnation);
  r.setOrphanedAtUs(
      std::chrono::duration_cast<std::chrono::microseconds>(report.orphaned.time_since_epoch()).count());
  r.setChooseUs(report.choose.count());
  r.setConnectUs(report.connect.count());
  r.setCompensateUs(report.compensate.count());
  r.setCleanupUs(report.cleanup.count());
  r.setAttempts(report.attempts);
  r.setStandby(report.standby);
  auto list = r.initIncompleteStreams(report.incomplete_streams.size());
  for (std::size_t i = 0; i < report.incomplete_streams.size(); ++i) list.set(i, report.incomplete_streams[i]);
  node_.send_up(message);
}

}  // namespace canopy::services
