// The orphan's side of healing (paper 004): its parent lost, the node holds its
// output back and asks potential adopters (chosen by the recovery service) to take
// it, on a new connection or on its standby link; the adopter's answer makes the
// link its parent, the services send their state and the held output follows. The
// adopter's side is in node_accept.cpp and core/held_adoptions.h; the heir of a lost
// root and a re-attaching front-end in node_reattach.cpp. The state all of them keep
// (core/healing.h) is made here when first needed and given back when idle.
#include "core/codec.h"
#include "core/log.h"
#include "core/node.h"

namespace canopy::core {

using transport::Link;
using Clock = std::chrono::steady_clock;

void Node::become_orphan(const std::string& reason) {
  const Rank failed = tree().view().parent(id_.rank);
  log().info("parent {} lost ({}): orphaned", describe(failed), reason);
  // Left without the root (the front-end lost, the tree kept), the heir takes the
  // root's place. Known before anything else: requests of the others held here
  // meanwhile are then taken, not refused as if this node were looking for an
  // adopter itself (they would ask again 100 ms later). Only when the root is the
  // parent or already lost: the view is copied for it, not on every adoption.
  bool without_root = false, heir = false;
  if (const TreeView& view = tree().view(); failed == view.root() || !view.alive(view.root())) {
    TreeView after = view;
    after.apply_failure(failed);
    without_root = after.without_root(id_.rank);
    heir = without_root && after.heir() == id_.rank;
  }
  parent_.reset();
  Orphaned orphaned;
  orphaned.state->failed_parent = failed;
  orphaned.state->promoted = heir;
  set_phase(std::move(orphaned), "lost parent " + std::to_string(failed));
  review_held_adoptions();  // refused: an orphan adopts no one (the heir adopts)
  on_failure_report(failed, describe(failed) + ": " + reason, nullptr);
  if (heir) return promote(plan_.fault.keep_tree_for, describe(failed) + ": " + reason);
  // The others have until the grace period ends to reach the heir.
  const auto timeout = without_root ? plan_.fault.keep_tree_for : plan_.fault.adoption_timeout;
  auto& o = *orphan();
  o.deadline = std::make_unique<Timer>(io_, timeout);
  o.deadline->async_wait([this, timeout](const boost::system::error_code& ec) {
    if (ec || phase() != Phase::orphaned) return;
    begin_stop("no adopter accepted this node within " + std::to_string(timeout.count()) + " ms");
  });
  emit(events::Orphaned{failed, reason});
}

bool Node::promoted() const {
  const auto* o = orphan();
  return o && o->promoted;
}

void Node::request_adoption(std::shared_ptr<Link> link, Rank candidate, std::function<void(Result<Adoption>)> done) {
  auto* o = orphan();
  if (!o) return link->abort("not an orphan");
  if (o->trying) o->trying->abort("another adoption request replaces it");
  o->trying = link;
  o->trying_rank = candidate;
  o->done = std::move(done);
  // A fresh incarnation for every request: an adopter given up on may still accept
  // late and report the number it was asked for, which would make it stale.
  const std::uint32_t incarnation = tree().next_incarnation(id_.incarnation);
  attach_parent(link);
  healer().up.begin(link, incarnation, true, false, candidate, services_.in_order(),
                    [this](wire::Hello::Builder h) { fill_adoption(h); });
  log().info("asked {} ({}) to adopt this node under incarnation {}", describe(candidate), link->peer(), incarnation);
}

void Node::open_standby(std::shared_ptr<Link> link, Rank acceptor) {
  close_standby("replaced");
  if (phase() != Phase::running) return link->abort("not running");
  if (!healing_on_) return link->abort("healing is off");
  attach_parent(link);
  healer().open_standby(link, acceptor, id_.incarnation, services_.in_order(),
                        [this](wire::Hello::Builder h) { fill_adoption(h); });
  log().info("standby link to {} ({}) opened", describe(acceptor), link->peer());
}

// ---- the healing state (core/healing.h) ----

Healing& Node::healer() {
  if (!healing_) {
    healing_ = std::make_unique<Healing>(io_, id_, children_, *this,
                                         [this](const OrphanRequest& request) { adopt_orphan(request); });
  }
  return *healing_;
}

void Node::shed_healer() {
  if (healing_ && healing_->idle()) healing_.reset();
}

bool Node::handshake_read(const Link* link, capnp::MessageReader& message) {
  if (!healing_ || !healing_->up.under_way(link)) return true;
  if (healing_->up.on_message(link, message.getRoot<wire::Message>())) return true;
  shed_healer();  // the handshake done: a back-end without a standby link keeps nothing
  return false;
}

std::optional<Rank> Node::standby() const { return healing_ ? healing_->standby() : std::nullopt; }

void Node::close_standby(std::string_view why) {
  if (!healing_) return;
  healing_->close_standby(why);
  shed_healer();
}

bool Node::request_adoption_on_standby(Rank candidate, std::function<void(Result<Adoption>)> done) {
  auto* o = orphan();
  if (!o) return false;
  auto link = healing_ ? healing_->take_standby(candidate) : nullptr;
  if (!link) return false;
  if (o->trying) o->trying->abort("another adoption request replaces it");
  o->trying = std::move(link);
  o->trying_rank = candidate;
  o->done = std::move(done);
  const std::uint32_t incarnation = tree().next_incarnation(id_.incarnation);
  // Proved when the link was opened: this hello carries the same rank and role.
  Message hello(id_);
  auto h = hello.body().initHello();
  init_hello(h, id_, incarnation);
  h.setAdopt(true);
  for (Service* service : services_.in_order()) service->fill_hello(h);
  fill_adoption(h);
  o->trying->send(hello.builder());
  log().info("asked {} on the standby link to adopt this node under incarnation {}", describe(candidate), incarnation);
  return true;
}

void Node::cancel_adoption() {
  auto* o = orphan();
  if (!o || !o->trying) return;
  auto link = std::move(o->trying);
  o->done = nullptr;
  link->abort("adoption request given up");
}

void Node::on_trying_message(capnp::MessageReader& message) {
  auto body = message.getRoot<wire::Message>().getBody();
  if (body.isAdopted()) return adopted_by(body.getAdopted());
  if (body.isShutdown()) {
    // The adopter is stopping because the network is: stop with it rather than look
    // for a parent until the adoption time-out.
    return begin_stop("shutdown while orphaned: " + std::string(body.getShutdown().getReason()));
  }
}

void Node::on_trying_closed(std::string_view reason) {
  auto& o = *orphan();
  log().warn("potential adopter {} refused or failed: {}", o.trying_rank, reason);
  o.trying.reset();
  auto done = std::move(o.done);
  o.done = nullptr;
  if (done) done(Error{std::string(reason)});
}

void Node::adopted_by(wire::Adopted::Reader answer) {
  auto& o = *orphan();
  Adoption adoption;
  adoption.adopter = answer.getAdopter();
  adoption.incarnation = answer.getIncarnation();
  adoption.failed_parent = o.failed_parent;
  adoption.accepted = Clock::now();
  auto done = std::move(o.done);
  auto held = std::move(o.held);
  parent_ = std::move(o.trying);
  const transport::Cork burst(parent_);  // state, held output and reports in one write
  set_upstream_full(parent_->above_high());
  id_.incarnation = adoption.incarnation;
  set_phase(Running{}, "adopted by " + std::to_string(adoption.adopter));  // destroys the orphan's timer

  // Compensate: services send their state first (stream joins, filter states), then
  // the output held back meanwhile.
  emit(events::Adopted{adoption.adopter, adoption.incarnation, adoption.failed_parent});
  held.send_all(*parent_);
  adoption.compensated = Clock::now();
  on_attach_report(id_.rank, adoption.adopter, adoption.incarnation, nullptr);
  if (done) done(adoption);
}

}  // namespace canopy::core
