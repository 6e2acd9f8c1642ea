#include "membership/membership.h"


#include <algorithm>

#include "core/codec.h"
#include "core/log.h"

namespace canopy::membership {

using core::log;
using Kind = wire::membership::Kind;
using StableClock = NodeClock;  // manual in the in-process tests, like every time-out

namespace {

std::string ranks_text(const std::vector<Rank>& ranks) {
  std::string out;
  for (Rank r : ranks) out += (out.empty() ? "" : " ") + std::to_string(r);
  return out.empty() ? "none" : out;
}

}  // namespace

MembershipService::MembershipService(core::ServiceContext& node, Observer* observer)
    : node_(node), observer_(observer), resend_(node.io()) {}

MembershipService::Below& MembershipService::below() {
  if (!below_) below_ = std::make_unique<Below>();
  return *below_;
}

MembershipService::Root& MembershipService::root() {
  if (!root_) {
    root_ = std::make_unique<Root>(node_.io());
    root_->reported = view_;
  }
  return *root_;
}

const std::map<Rank, std::uint64_t>& MembershipService::stale_dropped_in_tree() const {
  static const std::map<Rank, std::uint64_t> none;
  return root_ ? root_->stale_in_tree : none;
}

std::uint32_t MembershipService::epoch(Rank rank) const {
  auto it = epochs_.find(rank);
  return it == epochs_.end() ? 0 : it->second;
}

// ---- events ----

void MembershipService::on_event(const core::NodeEvent& event) {
  using namespace core::events;
  if (auto* started = std::get_if<Started>(&event)) {
    if (started->error.empty() && !started_) initialise();
  } else if (auto* connected = std::get_if<ChildConnected>(&event)) {
    // A back-end that is not a member yet: attach mode, where back-ends join as
    // they attach (at launch, every back-end of the topology is a member of view 0).
    // A rejoin: a restarted process under the rank of a back-end that left the view
    // (refuse_hello kept it out until then). It hears the view and its new epoch at
    // once, and what it sends meanwhile is taken: its link is the new process's.
    if (started_ && node_.children()[connected->child].role == Role::backend && !view_.contains(connected->rank)) {
      if (connected->rejoined) {
        below().cut.erase(connected->child);
        below().rejoined.insert(connected->child);
        welcome(connected->child);
      }
      report(connected->rank, {.kind = ReportKind::join, .reason = connected->rejoined ? "rejoined" : ""});
    }
  } else if (auto* lost = std::get_if<ChildLost>(&event)) {
    below().rejoined.erase(lost->child);
    below().set_view(lost->child, 0);
    below().cut.erase(lost->child);
    if (below().awaiting.erase(lost->child)) check_acks();
    if (started_ && !lost->during_launch && node_.children()[lost->child].role == Role::backend) {
      report(lost->rank, {.kind = ReportKind::failure, .reason = lost->reason});
    }
  } else if (auto* adopted = std::get_if<ChildAdopted>(&event)) {
    below().cut.erase(adopted->child);
    pass_down(adopted->child);  // offered: the orphan may have missed views while it was cut off
  } else if (auto* adopted = std::get_if<Adopted>(&event)) {
    // Adopted by the root: a front-end re-attached to this node, which held the tree
    // while it had none. The view goes to it first (it starts without one).
    if (const auto* tree = node_.live_tree(); started_ && tree && adopted->adopter == tree->root()) {
      core::Outgoing message(node_.identity(), id(), Kind::VIEW_CHANGE);
      write_view(message.init<wire::membership::ViewChange>());
      node_.send_up(message);
    }
    // A report sent just before the old parent died may have died with it.
    if (reporting()) send_reports();
    requested_ = false;  // a request to the old parent, if any, died with it: the new one offers its view
  } else if (auto* changed = std::get_if<TreeChanged>(&event)) {
    if (changed->kind == TreeChanged::Kind::failure && node_.is_root() && started_) watch_orphans(changed->rank);
  } else if (std::holds_alternative<Stopping>(event)) {
    resend_.cancel();
    if (root_) {
      root_->supersede.cancel();
      root_->orphan_watches.clear();
    }
  }
}

// Root: a commnode failed, and the back-ends below it are orphans. A live orphan
// asks for adoption as soon as it finds its parent gone: at once if the parent died,
// and after `lost` if it hung, which is also when its parent's parent tells the root;
// it waits at most `lost` for an adopter that does not answer (it may hang too)
// before it asks the next. So one that does not hang from the root through live
// processes `lost + suspect` after the root heard of the failure died with its
// parent (a node crash), or hung with it, and nobody else is left to report it: the
// root declares it failed, dating its loss back to `lost` before it heard (a hung
// parent passed nothing on after that).
void MembershipService::watch_orphans(Rank failed) {
  const auto* tree = node_.live_tree();
  if (!tree || !tree->contains(failed) || tree->role(failed) == Role::backend) return;
  std::vector<Rank> orphans = tree->backends_below(failed);
  if (orphans.empty()) return;
  auto timer = std::make_unique<Timer>(node_.io());
  const auto& fault = node_.plan().fault;
  timer->expires_after(fault.lost + fault.suspect);
  timer->async_wait([this, failed, orphans = std::move(orphans)](const boost::system::error_code& ec) {
    if (ec || node_.stopping()) return;
    const auto& fault = node_.plan().fault;
    const std::string why = " was not adopted within " + std::to_string((fault.lost + fault.suspect).count()) +
                            " ms after its parent " + node_.describe(failed) + " failed: it died or hung with it";
    root().holding_change = true;  // all of them in one view change
    for (Rank r : orphans) {
      if (view_.contains(r) && !node_.live_tree()->attached(r)) {
        const std::string reason = node_.describe(r) + why;
        if (observer_) observer_->on_orphan_lost(r, reason, fault.lost * 2);
        if (node_.is_root()) {
          Event failure;
          failure.kind = Event::Kind::failure;
          failure.rank = r;
          failure.reason = reason;
          failure.silent = fault.lost * 2;
          node_.publish(std::move(failure));
        }
        report(r, {.kind = ReportKind::failure, .reason = reason});
      }
    }
    root().holding_change = false;
    if (!root().pending_left.empty()) start_change();
  });
  root().orphan_watches.push_back(std::move(timer));
}

void MembershipService::initialise() {
  started_ = true;
  // Nothing a back-end sends below the epoch this node knows for it is taken: it was
  // declared failed, and its link is closing (cut_off) or it is a stale process.
  // A back-end has no back-end children: it needs no gate.
  if (node_.identity().role != Role::backend) {
    node_.set_gate([this](const core::Peer& from) {
      if (from.epoch >= std::min<std::uint32_t>(epoch(from.sender), 0xffff)) return true;
      if (from.kind == core::Peer::Kind::child && below_ && below_->rejoined.count(from.child)) return true;  // not welcomed yet
      count_stale(from.sender, from.epoch);
      return false;
    });
  }
  view_ = HeldView{};
  // A front-end that re-attached gets the view from the heir that held it.
  // A back-end holding its part of the tree has view 0 in its plan (docs/scale.md).
  if (!node_.plan().attach && !node_.plan().reattached) {
    // A part comes with view 0 (Node::send_topology), the whole tree without: its
    // back-ends are view 0. (A back-end's part is read without unfolding it.)
    if (node_.plan().view_zero.empty()) {
      view_.members = core::RankSet::of(node_.topology()->backends());
    } else {
      // Ascending, disjoint ranges: decode_plan refused anything else.
      core::RankSet::from_ranges(node_.plan().view_zero, view_.members);
    }
  }
  digest_ = digest_of(view_, epochs_);
  if (root_) root_->reported = view_;
}

// ---- detectors: reports up to the root, resent until it answers ----

void MembershipService::report_failure(const std::vector<Rank>& ranks, const std::string& reason) {
  for (Rank r : ranks) report(r, {.kind = ReportKind::failure, .reason = reason});
}

void MembershipService::report_end_to_end(Rank rank, const std::string& reason, std::chrono::milliseconds silent) {
  report(rank, {.kind = ReportKind::failure, .reason = reason, .end_to_end = true, .silent = silent});
}

void MembershipService::report(Rank rank, Report r) {
  log().info("membership: reporting {} {} ({})", r.kind == ReportKind::failure ? "the failure of" : "the join of",
             node_.describe(rank), r.reason.empty() ? "connected" : r.reason);
  r.epoch = epoch(rank);
  if (node_.is_root()) {
    if (r.kind == ReportKind::failure) return on_failure_report(node_.identity().rank, rank, r);
    return on_join_report(node_.identity().rank, rank);
  }
  if (!unacked_) unacked_ = std::make_unique<std::map<Rank, Report>>();
  (*unacked_)[rank] = std::move(r);
  send_reports(rank);  // the others went up already and are resent on the timer
  arm_resend();
}

void MembershipService::send_reports(std::optional<Rank> only) {
  // The overlay's own detections go in one message; each end-to-end one in its own
  // (it carries its silence).
  using Failures = std::vector<std::pair<Rank, const Report*>>;
  auto send_failures = [&](const Failures& failures) {
    if (failures.empty()) return;
    const Report& first = *failures.front().second;
    core::Outgoing message(node_.identity(), id(), Kind::NODE_FAILURE);
    auto f = message.init<wire::membership::NodeFailure>();
    f.setDetector(node_.identity().rank);
    auto list = f.initFailed(failures.size());
    for (std::size_t i = 0; i < failures.size(); ++i) {
      list[i].setRank(failures[i].first);
      list[i].setEpoch(failures[i].second->epoch);
    }
    f.setReason(first.reason);
    f.setEndToEnd(first.end_to_end);
    f.setSilentMs(static_cast<std::uint32_t>(first.silent.count()));
    node_.send_up(message);
  };
  Failures failures;
  std::vector<Rank> joins;
  if (!unacked_) return;
  for (const auto& [rank, r] : *unacked_) {
    if (only && rank != *only) continue;
    if (r.kind == ReportKind::join) {
      joins.push_back(rank);
    } else if (r.end_to_end) {
      send_failures({{rank, &r}});
    } else {
      failures.emplace_back(rank, &r);
    }
  }
  send_failures(failures);
  if (!joins.empty()) {
    core::Outgoing message(node_.identity(), id(), Kind::NEW_NODE);
    auto n = message.init<wire::membership::NewNode>();
    n.setDetector(node_.identity().rank);
    auto list = n.initJoined(joins.size());
    for (std::size_t i = 0; i < joins.size(); ++i) list.set(i, joins[i]);
    node_.send_up(message);
  }
}

// Messages up die with a commnode that fails while they pass it: resend until the
// root answers, after the tree's own detection could have healed the path.
void MembershipService::arm_resend() {
  resend_.expires_after(std::max(std::chrono::milliseconds(500), node_.plan().fault.lost));
  resend_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !reporting() || node_.stopping()) return;
    log().info("membership: no answer from the root yet; reporting again");
    send_reports();
    arm_resend();
  });
}

void MembershipService::on_det_ack(wire::membership::DetAck::Reader ack, std::uint16_t kind) {
  const Rank detector = ack.getDetector();
  if (detector == node_.identity().rank) {
    if (!unacked_) return;
    for (Rank r : ack.getRanks()) unacked_->erase(r);
    if (unacked_->empty()) {
      resend_.cancel();
      unacked_.reset();
    }
    return;
  }
  auto child = child_towards(detector);
  if (!child) return;  // that detector is gone; it will not need the answer
  core::Outgoing message(node_.identity(), id(), static_cast<Kind>(kind));
  message.set<wire::membership::DetAck>(ack);
  node_.send_to_child(*child, message);
}

// ---- the root: orders views ----

void MembershipService::on_failure_report(Rank detector, Rank rank, const Report& report) {
  const std::uint32_t reported_epoch = report.epoch;
  const std::string& reason = report.reason;
  answer_detector(detector, {rank}, Kind::FAILURE_DET_ACK);
  const auto* tree = node_.live_tree();
  if (!tree || !tree->contains(rank) || tree->role(rank) != Role::backend) {
    log().warn("membership: ignoring a failure report about {}, which is not a back-end", rank);
    return;
  }
  if (report.end_to_end && observer_) observer_->on_gossip_report(rank, detector, report.silent);
  if (report.end_to_end && node_.is_root()) node_.publish(gossip_event(rank, detector, report.silent));
  if (reported_epoch < epoch(rank)) {
    count_stale(rank, reported_epoch);
    log().info("membership: dropping a report about back-end {} at epoch {}: it is at epoch {}", rank,
               reported_epoch, epoch(rank));
    return;
  }
  if (!view_.contains(rank) && !root().pending_joined.count(rank)) return;  // a copy: it has left already
  if (root().pending_left.count(rank)) return;
  // A detector that is gone, or no longer the back-end's parent (it hung, its
  // children were adopted elsewhere, and it woke up to find their links closed),
  // speaks of a tree that is no more. (The root's own detectors may speak of any.)
  // An end-to-end detector is a live member, wherever it is.
  const bool from_parent = tree->alive(detector) && tree->parent(rank) == detector;
  const bool from_member = report.end_to_end && tree->alive(detector) && view_.contains(detector);
  if (detector != node_.identity().rank && !from_parent && !from_member) {
    count_stale(rank, reported_epoch);
    log().warn("membership: ignoring {}'s report that back-end {} failed: its parent is now {}",
               node_.describe(detector), rank, tree->parent(rank));
    return;
  }
  log().info("membership: back-end {} failed ({}), reported by {}", rank, reason, node_.describe(detector));
  if (root().pending_joined.erase(rank)) return;  // joined and left before a view had it
  root().pending_left.emplace(rank, reason);
  if (!root().first_pending) root().first_pending = StableClock::now();
  if (!root().holding_change) start_change();
}

void MembershipService::on_join_report(Rank detector, Rank rank) {
  answer_detector(detector, {rank}, Kind::JOIN_DET_ACK);
  if (view_.contains(rank) || root().pending_joined.count(rank) || root().pending_left.count(rank)) return;
  log().info("membership: back-end {} joins, reported by {}", rank, node_.describe(detector));
  root().pending_joined.insert(rank);
  if (!root().first_pending) root().first_pending = StableClock::now();
  start_change();
}

void MembershipService::answer_detector(Rank detector, const std::vector<Rank>& ranks, Kind kind) {
  if (detector == node_.identity().rank) return;
  auto child = child_towards(detector);
  if (!child) return;
  core::Outgoing message(node_.identity(), id(), kind);
  auto ack = message.init<wire::membership::DetAck>();
  ack.setDetector(detector);
  auto list = ack.initRanks(ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) list.set(i, ranks[i]);
  node_.send_to_child(*child, message);
}

// One view at a time: the next starts once the last is stable, with every report
// that arrived meanwhile; but a view still unstable a heartbeat after it went out,
// with reports waiting, is superseded (arm_supersede).
void MembershipService::start_change() {
  if (root().pending_left.empty() && root().pending_joined.empty()) return;
  if (root().change) return arm_supersede();
  HeldView next = view_;
  ++next.id;
  auto epochs = epochs_;
  for (const auto& [rank, reason] : root().pending_left) {
    next.members.erase(rank);
    ++epochs[rank];
  }
  for (Rank rank : root().pending_joined) next.members.insert(rank);
  root().pending_left.clear();
  root().pending_joined.clear();
  Change change{.applied = apply(std::move(next), epochs),
                .first_report = *root().first_pending,
                .sent = StableClock::now()};
  cut_off(change.applied.left);
  root().first_pending.reset();
  root().change = std::move(change);
  pass_down();
  check_acks();
}

// A member that hangs holds up the acknowledgements of a view that still has it until
// its parent finds it lost (`lost`); the report that it failed (its gossip's, say)
// must not wait that long behind that view. So a view not stable a heartbeat after it
// went out, while reports wait, gives way: the next view goes out at once (every
// process applies the newest; acknowledgements of the old one no longer count), and
// the root tells its observer of both as one change once the newest is stable.
void MembershipService::arm_supersede() {
  if (root().supersede_armed) return;
  root().supersede_armed = true;
  root().supersede.expires_at(root().change->sent + node_.plan().fault.heartbeat);
  root().supersede.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: whoever cancelled it cleared root().supersede_armed
    root().supersede_armed = false;
    if (!root().change || node_.stopping() || (root().pending_left.empty() && root().pending_joined.empty())) return;
    log().info("membership: view {} is not stable after {} ms; the next view supersedes it",
               root().change->applied.view.id, node_.plan().fault.heartbeat.count());
    root().first_pending = root().change->first_report;  // the next change counts from the first report
    root().change.reset();
    start_change();
  });
}

void MembershipService::stable() {
  ViewChange done = std::move(root().change->applied);
  done.stabilise =
      std::chrono::duration_cast<std::chrono::microseconds>(StableClock::now() - root().change->first_report);
  root().change.reset();
  root().supersede.cancel();
  root().supersede_armed = false;
  // view_ is the view that is now stable (one is applied at a time). What changed
  // since the last view the observer heard of (the views in between, if any, were
  // superseded before they were stable).
  done.left.clear();
  done.joined.clear();
  HeldView& reported = root().reported;
  reported.members.minus(view_.members, done.left);
  view_.members.minus(reported.members, done.joined);
  reported = view_;
  log().info("membership: view {} is stable: {} members, left [{}], joined [{}], {} us", done.view.id,
             view_.members.size(), ranks_text(done.left), ranks_text(done.joined), done.stabilise.count());
  if (observer_) observer_->on_view(done);
  node_.publish(view_event(done));
  start_change();
}

// A re-attached front-end: the view the heir held, once, before any change this
// front-end orders (the heir's held reports follow it).
void MembershipService::inherit_view(wire::membership::ViewChange::Reader change) {
  if (root().inherited || root().change) return;
  root().inherited = true;
  auto whole = read_view(change);
  if (!whole) return;
  auto& [next, epochs] = *whole;
  ViewChange applied = apply(std::move(next), epochs);
  root().reported = view_;
  applied.joined = view_.members.to_vector();  // this front-end held none before
  if (observer_) observer_->on_view(applied);
  node_.publish(view_event(applied));
}

// ---- every process: apply, pass down, acknowledge up ----

void MembershipService::on_view_change(wire::membership::ViewChange::Reader change) {
  if (change.getWelcome()) {
    // This process rejoined under its rank: not a member yet, but at the epoch the
    // tree knows for the rank now.
    if (change.getId() >= view_.id) {
      auto whole = read_view(change);
      if (!whole) return;
      auto& [next, epochs] = *whole;
      view_ = std::move(next);
      epochs_ = std::move(epochs);
      digest_ = digest_of(view_, epochs_);
      last_change_.reset();
      node_.set_epoch(epoch(node_.identity().rank));
      log().info("membership: rejoining at view {} with epoch {}", view_.id, epoch(node_.identity().rank));
    }
    return;
  }
  switch (change.getForm()) {
    case wire::membership::ViewChange::Form::WHOLE: return on_whole_view(change);
    case wire::membership::ViewChange::Form::CHANGE: return on_change(change);
    case wire::membership::ViewChange::Form::OFFER:
      // From an adopter: its view by number and digest.
      if (change.getId() > view_.id || (change.getId() == view_.id && change.getDigest() != digest_)) {
        return request_whole("the adopter holds view " + std::to_string(change.getId()));
      }
      return ack_held();
  }
}

void MembershipService::on_whole_view(wire::membership::ViewChange::Reader change) {
  requested_ = false;
  if (change.getId() < view_.id) return ack_held();
  auto whole = read_view(change);
  if (!whole) return;
  auto& [next, epochs] = *whole;
  if (change.getId() == view_.id) {
    // Asked for after a digest that differed: the parent's stands.
    if (const auto digest = digest_of(next, epochs); digest != digest_) {
      log().warn("membership: view {} here was not the parent's; taking the parent's", view_.id);
      view_ = std::move(next);
      epochs_ = std::move(epochs);
      digest_ = digest;
      last_change_.reset();
    }
    return ack_held();
  }
  accept(std::move(next), epochs);
}

void MembershipService::on_change(wire::membership::ViewChange::Reader change) {
  if (change.getId() <= view_.id) return ack_held();  // it came in a whole view already
  if (change.getBase() != view_.id) {
    return request_whole("a change from view " + std::to_string(change.getBase()) + " to " +
                         std::to_string(change.getId()) + " came to view " + std::to_string(view_.id));
  }
  HeldView next = view_;
  next.id = change.getId();
  for (Rank r : change.getLeft()) next.members.erase(r);
  for (Rank r : change.getJoined()) next.members.insert(r);
  auto epochs = epochs_;
  for (auto m : change.getEpochChanges()) {
    if (m.getEpoch() == 0) epochs.erase(m.getRank());
    else epochs[m.getRank()] = m.getEpoch();
  }
  if (digest_of(next, epochs) != change.getDigest()) {
    log().warn("membership: view {} made from view {} and its change is not the root's (digest); asking for it whole",
               next.id, view_.id);
    return request_whole("the digest of view " + std::to_string(next.id) + " differs");
  }
  accept(std::move(next), epochs, change.getDigest());
}

void MembershipService::accept(HeldView next, const Epochs& epochs,
                               std::optional<std::uint64_t> digest) {
  ViewChange applied = apply(std::move(next), epochs, digest);
  cut_off(applied.left);
  if (observer_) observer_->on_view(applied);
  node_.publish(view_event(applied));
  const Rank self = node_.identity().rank;
  if (node_.identity().role == Role::backend &&
      std::find(applied.left.begin(), applied.left.end(), self) != applied.left.end()) {
    // Declared failed while alive (it hung, or its link broke): fail-stop.
    return node_.shutdown("this back-end was declared failed and is not a member of view " + std::to_string(view_.id));
  }
  pass_down();
  check_acks();
}

void MembershipService::ack_held() {
  // Not acknowledged yet: it will be, to the parent of the moment, once the subtree
  // has acknowledged.
  if (node_.is_root() || !acked_ || awaiting_id_ < view_.id) return;
  core::Outgoing message(node_.identity(), id(), Kind::VIEW_ACK);
  message.init<wire::membership::ViewAck>().setId(view_.id);
  node_.send_up(message);
}

void MembershipService::request_whole(const std::string& why) {
  if (requested_ || node_.is_root()) return;
  requested_ = true;
  ++asked_whole_;
  log().info("membership: asking the parent for the whole view: {}", why);
  core::Outgoing message(node_.identity(), id(), Kind::VIEW_REQUEST);
  message.init<wire::membership::ViewAck>().setId(view_.id);
  node_.send_up(message);
}

std::uint64_t MembershipService::digest_of(const HeldView& view, const Epochs& epochs) {
  // FNV-1a over the view's number, its size, its ranges of members and the epochs
  // above 0, in order: O(ranges), not O(members).
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](std::uint64_t x) {
    for (int i = 0; i < 8; ++i) {
      h ^= (x >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  mix(view.id);
  mix(view.members.size());
  for (const auto& [first, last] : view.members.ranges()) mix((std::uint64_t{first} << 32) | last);
  for (const auto& [r, e] : epochs) mix((std::uint64_t{r} << 32) | e);
  return h;
}

ViewChange MembershipService::apply(HeldView next, const Epochs& epochs,
                                    std::optional<std::uint64_t> digest) {
  ViewChange out;
  view_.members.minus(next.members, out.left);
  next.members.minus(view_.members, out.joined);
  Delta change{.base = view_.id, .left = out.left, .joined = out.joined, .epochs = {}};
  for (const auto& [rank, e] : epochs) {
    if (epoch(rank) != e) change.epochs.emplace_back(rank, e);
  }
  for (const auto& [rank, e] : epochs_) {
    if (!epochs.count(rank)) change.epochs.emplace_back(rank, 0);
  }
  if (node_.identity().role == Role::backend) last_change_.reset();  // no child to send it to
  else last_change_ = std::make_unique<Delta>(std::move(change));
  // Copied, not moved: held at its size, without the room its edits grew into (at a
  // back-end of b:16^2, 160 bytes where its 11 ranges take 88 after 10 failures).
  view_ = next;
  epochs_ = epochs;
  digest_ = digest ? *digest : digest_of(view_, epochs_);
  out.view.id = view_.id;
  if (observer_ || node_.publishes()) out.view.members = view_.members.to_vector();
  if (node_.identity().role == Role::backend) node_.set_epoch(epoch(node_.identity().rank));
  log().info("membership: view {}: {} members, left [{}], joined [{}]", view_.id, view_.members.size(),
             ranks_text(out.left), ranks_text(out.joined));
  return out;
}

// A back-end child that left the view while still connected (it was declared failed
// by a detector other than this node's, or an adopter took it in before the view
// declaring it failed arrived): it is told to stop, and what it sends from now on is
// not taken.
void MembershipService::cut_off(const std::vector<Rank>& left) {
  const auto& children = node_.children();
  for (Rank r : left) {
    auto index = children.index_of(r);
    if (!index || !children[*index].link || !children[*index].link->is_open()) continue;
    count_stale(r, epoch(r) - 1);
    // Told why; a process this node started is fenced as the detection service
    // fences a lost one: a hung process must not wake up and act.
    node_.cut_child(*index, "this back-end was declared failed and is not a member of view " + std::to_string(view_.id),
                    /*say_why=*/true, /*fence=*/true);
    below().cut.insert(*index);
    below().awaiting.erase(*index);
  }
}

std::optional<std::pair<MembershipService::HeldView, Epochs>> MembershipService::read_view(
    wire::membership::ViewChange::Reader change) {
  HeldView view;
  view.id = change.getId();
  if (!core::read_ranges(change.getRanges(), view.members) || view.members.size() > core::kMaxViewZero) {
    log().error("membership: ignoring view {} from the parent: its members are not ascending, disjoint ranges "
                "of at most {} ranks",
                view.id, core::kMaxViewZero);
    return std::nullopt;
  }
  Epochs epochs;
  for (auto m : change.getEpochs()) epochs[m.getRank()] = m.getEpoch();
  return std::pair{std::move(view), std::move(epochs)};
}

void MembershipService::write_view(wire::membership::ViewChange::Builder v) const {
  v.setId(view_.id);
  const auto& held = view_.members.ranges();
  core::write_ranges(held, v.initRanges(static_cast<unsigned>(2 * held.size())));
  auto epochs = v.initEpochs(epochs_.size());
  std::size_t i = 0;
  for (const auto& [rank, e] : epochs_) {
    epochs[i].setRank(rank);
    epochs[i++].setEpoch(e);
  }
}

void MembershipService::write_change(wire::membership::ViewChange::Builder v) const {
  v.setForm(wire::membership::ViewChange::Form::CHANGE);
  v.setId(view_.id);
  v.setBase(last_change_->base);
  v.setDigest(digest_);
  auto left = v.initLeft(last_change_->left.size());
  for (std::size_t i = 0; i < last_change_->left.size(); ++i) left.set(i, last_change_->left[i]);
  auto joined = v.initJoined(last_change_->joined.size());
  for (std::size_t i = 0; i < last_change_->joined.size(); ++i) joined.set(i, last_change_->joined[i]);
  auto epochs = v.initEpochChanges(last_change_->epochs.size());
  for (std::size_t i = 0; i < last_change_->epochs.size(); ++i) {
    epochs[i].setRank(last_change_->epochs[i].first);
    epochs[i].setEpoch(last_change_->epochs[i].second);
  }
}

void MembershipService::write_offer(wire::membership::ViewChange::Builder v) const {
  v.setForm(wire::membership::ViewChange::Form::OFFER);
  v.setId(view_.id);
  v.setDigest(digest_);
}

void MembershipService::send_view(std::size_t child) {
  core::Outgoing message(node_.identity(), id(), Kind::VIEW_CHANGE);
  auto v = message.init<wire::membership::ViewChange>();
  const std::uint64_t holds = below().view_of(child);
  if (last_change_ && holds == last_change_->base) write_change(v);
  else write_view(v);
  below().set_view(child, view_.id);
  node_.send_to_child(child, message);
}

void MembershipService::welcome(std::size_t child) {
  core::Outgoing message(node_.identity(), id(), Kind::VIEW_CHANGE);
  auto v = message.init<wire::membership::ViewChange>();
  write_view(v);
  v.setWelcome(true);
  below().set_view(child, view_.id);
  node_.send_to_child(child, message);
}

// Sends this process's view to every connected child (and waits for all of them):
// the change to those that held the view before, the whole view to the others. Or
// offers it to `only_child`, a child adopted meanwhile, which asks for it whole only
// if it holds an older one (waited for too if the view is not yet acknowledged).
void MembershipService::pass_down(std::optional<std::size_t> only_child) {
  auto& children = node_.children();
  auto connected = [&](std::size_t c) { return children[c].link && children[c].link->is_open() && !below().cut.count(c); };
  if (only_child) {
    if (!connected(*only_child)) return;
    core::Outgoing message(node_.identity(), id(), Kind::VIEW_CHANGE);
    write_offer(message.init<wire::membership::ViewChange>());
    below().set_view(*only_child, view_.id);
    node_.send_to_child(*only_child, message);
    const bool waiting = node_.is_root() ? root().change.has_value() : !acked_;
    if (waiting && awaiting_id_ == view_.id) below().awaiting.insert(*only_child);
    return;
  }
  awaiting_id_ = view_.id;
  if (below_) below_->awaiting.clear();
  acked_ = node_.is_root();
  for (std::size_t c = 0; c < children.size(); ++c) {
    if (!connected(c)) continue;
    send_view(c);
    below().awaiting.insert(c);
  }
}

void MembershipService::on_view_ack(std::size_t child, std::uint64_t ack_id) {
  if (ack_id >= awaiting_id_ && below().awaiting.erase(child)) check_acks();
}

void MembershipService::check_acks() {
  if (below_ && !below_->awaiting.empty()) return;
  if (node_.is_root()) {
    if (changing() && awaiting_id_ == root_->change->applied.view.id) stable();
    return;
  }
  if (acked_) return;
  acked_ = true;
  core::Outgoing message(node_.identity(), id(), Kind::VIEW_ACK);
  message.init<wire::membership::ViewAck>().setId(awaiting_id_);
  node_.send_up(message);
}

// The child of this process below which `rank` now is, following the live tree.
std::optional<std::size_t> MembershipService::child_towards(Rank rank) const {
  const auto* tree = node_.live_tree();
  const Rank self = node_.identity().rank;
  if (!tree || !tree->contains(rank)) return std::nullopt;
  for (std::size_t steps = 0; steps < 64; ++steps) {
    const Rank parent = tree->parent(rank);
    if (parent == self) return node_.children().index_of(rank);
    if (parent == core::TreeView::kNone) return std::nullopt;
    rank = parent;
  }
  return std::nullopt;
}

// ---- the handshake: epochs fence processes declared failed ----

void MembershipService::fill_hello(wire::Hello::Builder hello) {
  if (node_.identity().role == Role::backend) hello.setEpoch(epoch(node_.identity().rank));
}

std::optional<std::string> MembershipService::refuse_hello(wire::Hello::Reader hello) {
  if (!started_ || hello.getRole() != wire::Role::BACKEND) return std::nullopt;
  const Rank rank = hello.getRank();
  if (!hello.getAdopt()) {
    // A new process under the rank of a lost back-end: it may rejoin once the view
    // without the old one is out (else that view would cut the new one off).
    auto index = node_.children().index_of(rank);
    if (!index || node_.children()[*index].state != core::ChildState::gone || !view_.contains(rank)) return std::nullopt;
    return "back-end " + std::to_string(rank) + " is lost but still a member of view " + std::to_string(view_.id) +
           " here: the view without it is not out yet; attach again once it is";
  }
  if (hello.getEpoch() >= epoch(rank)) return std::nullopt;
  count_stale(rank, hello.getEpoch());
  return "back-end " + std::to_string(rank) + " asks at epoch " + std::to_string(hello.getEpoch()) +
         ", but it was declared failed (epoch " + std::to_string(epoch(rank)) + ", view " +
         std::to_string(view_.id) + "): it must stop";
}

// Counted here, logged, and reported up so that the front-end can say, per rank,
// how much from stale processes the tree kept out (canopy status).
void MembershipService::count_stale(Rank rank, std::uint32_t stale_epoch) {
  ++stale_dropped_;
  log().info("membership: kept out something from back-end {} at stale epoch {} (it is at epoch {})", rank,
             stale_epoch, epoch(rank));
  if (node_.is_root()) {
    ++root().stale_in_tree[rank];
    return;
  }
  core::Outgoing message(node_.identity(), id(), Kind::STALE_DROPPED);
  auto m = message.init<wire::membership::Member>();
  m.setRank(rank);
  m.setEpoch(stale_epoch);
  node_.send_up(message);
}

// ---- messages ----

// Reports travel to the root hop by hop: each commnode passes them on unread.
template <typename T>
void MembershipService::forward_up(Kind kind, typename T::Reader body) {
  core::Outgoing up(node_.identity(), id(), kind);
  up.set<T>(body);
  node_.send_up(up);
}

void MembershipService::on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) {
  switch (static_cast<Kind>(kind)) {
    case Kind::NODE_FAILURE: {
      if (from.kind != core::Peer::Kind::child) break;
      auto f = body.getAs<wire::membership::NodeFailure>();
      if (!node_.is_root()) return forward_up<wire::membership::NodeFailure>(Kind::NODE_FAILURE, f);
      for (auto m : f.getFailed()) {
        on_failure_report(f.getDetector(), m.getRank(),
                          {.kind = ReportKind::failure,
                           .epoch = m.getEpoch(),
                           .reason = f.getReason(),
                           .end_to_end = f.getEndToEnd(),
                           .silent = std::chrono::milliseconds(f.getSilentMs())});
      }
      return;
    }
    case Kind::NEW_NODE: {
      if (from.kind != core::Peer::Kind::child) break;
      auto n = body.getAs<wire::membership::NewNode>();
      if (!node_.is_root()) return forward_up<wire::membership::NewNode>(Kind::NEW_NODE, n);
      for (Rank r : n.getJoined()) on_join_report(n.getDetector(), r);
      return;
    }
    case Kind::FAILURE_DET_ACK:
    case Kind::JOIN_DET_ACK:
      if (from.kind != core::Peer::Kind::parent) break;
      return on_det_ack(body.getAs<wire::membership::DetAck>(), kind);
    case Kind::VIEW_CHANGE:
      if (from.kind == core::Peer::Kind::child && node_.is_root() && node_.plan().reattached) {
        return inherit_view(body.getAs<wire::membership::ViewChange>());
      }
      if (from.kind != core::Peer::Kind::parent) break;
      return on_view_change(body.getAs<wire::membership::ViewChange>());
    case Kind::STALE_DROPPED: {
      if (from.kind != core::Peer::Kind::child) break;
      auto m = body.getAs<wire::membership::Member>();
      if (!node_.is_root()) return forward_up<wire::membership::Member>(Kind::STALE_DROPPED, m);
      ++root().stale_in_tree[m.getRank()];
      return;
    }
    case Kind::VIEW_ACK:
      if (from.kind != core::Peer::Kind::child) break;
      return on_view_ack(from.child, body.getAs<wire::membership::ViewAck>().getId());
    case Kind::VIEW_REQUEST: {
      // A child that missed a change: the whole view, which it acknowledges as it
      // would the change (it is still awaited if it was).
      if (from.kind != core::Peer::Kind::child) break;
      core::Outgoing message(node_.identity(), id(), Kind::VIEW_CHANGE);
      write_view(message.init<wire::membership::ViewChange>());
      below().set_view(from.child, view_.id);
      node_.send_to_child(from.child, message);
      return;
    }
  }
  log().warn("membership: ignoring a message of kind {} from {}", kind, node_.describe(from.sender));
}

Event view_event(const ViewChange& change) {
  Event event;
  event.kind = Event::Kind::view;
  event.view = change.view;
  event.left = change.left;
  event.joined = change.joined;
  event.stabilise = change.stabilise;
  return event;
}

Event gossip_event(Rank rank, Rank detector, std::chrono::milliseconds silent) {
  Event event;
  event.kind = Event::Kind::gossip;
  event.rank = rank;
  event.detector = detector;
  event.silent = silent;
  return event;
}

}  // namespace canopy::membership
