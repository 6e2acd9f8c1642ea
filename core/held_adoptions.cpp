#include "core/held_adoptions.h"

#include <algorithm>
#include <utility>

#include "core/codec.h"
#include "core/log.h"
#include "transport/tcp_link.h"

namespace canopy::core {

using transport::Link;
using transport::TcpLink;

HeldAdoptions::HeldAdoptions(ServiceContext& node, std::function<void(const OrphanRequest&)> adopt)
    : node_(node), adopt_(std::move(adopt)) {}

HeldAdoptions::~HeldAdoptions() {
  // Closed without their handlers, which would look for this.
  for (auto& h : held_) {
    if (h.probe_link) h.probe_link->detach();
  }
}

void HeldAdoptions::hold(OrphanRequest request, std::chrono::milliseconds kept) {
  log().info("holding the adoption request of {} (from {}): its parent {} has not been reported failed here yet",
             node_.describe(request.orphan), request.link->peer(), parent_of(request));
  auto& held = held_.emplace_back(Held{std::move(request), std::make_unique<Timer>(node_.io(), kept)});
  held.deadline->async_wait([this, raw = held.request.link.get(), kept](const boost::system::error_code& ec) {
    if (!ec) expired(raw, kept);
  });
  probe_parent(held);
}

bool HeldAdoptions::holds(const Link* orphan_link) const {
  return std::any_of(held_.begin(), held_.end(), [&](const Held& h) { return h.request.link.get() == orphan_link; });
}

HeldAdoptions::Held* HeldAdoptions::find(const Link* orphan_link) {
  for (auto& h : held_) {
    if (h.request.link.get() == orphan_link) return &h;
  }
  return nullptr;
}

Rank HeldAdoptions::parent_of(const OrphanRequest& request) const {
  const TreeView* tree = node_.live_tree();
  return tree->contains(request.orphan) ? tree->parent(request.orphan) : request.watched;
}

bool HeldAdoptions::found_gone(Rank parent, std::chrono::milliseconds within) const {
  const auto gone = parents_found_gone_.find(parent);
  return gone != parents_found_gone_.end() && NodeClock::now() - gone->second < within;
}

void HeldAdoptions::let_go(const std::vector<OrphanRequest>& requests) {
  for (const auto& request : requests) {
    release(request.link.get());
    adopt_(request);
  }
}

void HeldAdoptions::review(const std::function<bool(const OrphanRequest& request)>& ready) {
  std::vector<OrphanRequest> answered;
  for (const auto& h : held_) {
    if (ready(h.request)) answered.push_back(h.request);
  }
  let_go(answered);
}

// The hold ran out: refused if the parent answered the probe, else adopted, with
// every request held for the same parent.
void HeldAdoptions::expired(const Link* orphan_link, std::chrono::milliseconds kept) {
  Held* h = find(orphan_link);
  if (!h) return;
  const Rank orphan = h->request.orphan;
  const Rank parent = parent_of(h->request);
  if (h->probe == Probe::alive) {
    log().warn("refusing to adopt {}: its parent {} answered this node, and neither its failure nor the loss of its "
               "link to {} was reported within {} ms",
               node_.describe(orphan), node_.describe(parent), orphan, kept.count());
    auto link = h->request.link;
    release(orphan_link);
    return link->close("adoption refused: its parent " + std::to_string(parent) + " is alive");
  }
  // Silent: hung, or its host unreachable, as the orphan found. So for every
  // request held for that parent, adopted in this pass.
  std::vector<OrphanRequest> adopt;
  for (auto& held : held_) {
    if (held.probe == Probe::alive || parent_of(held.request) != parent) continue;
    held.probe = Probe::none;  // answered: released without probing again
    log().info("adopting {}: its parent {} did not answer within {} ms", node_.describe(held.request.orphan),
               node_.describe(parent), kept.count());
    adopt.push_back(held.request);
  }
  let_go(adopt);
}

void HeldAdoptions::release(const Link* orphan_link) {
  auto it = std::find_if(held_.begin(), held_.end(), [&](const Held& h) { return h.request.link.get() == orphan_link; });
  if (it == held_.end()) return;
  Held released = std::move(*it);
  held_.erase(it);
  // Closed without their handlers (which would look for the request just released).
  const bool was_probing = released.probe == Probe::asking && (released.probe_link || released.dial.under_way());
  if (released.probe_link) released.probe_link->detach();
  released.dial.cancel();
  if (!was_probing || !node_.live_tree()) return;
  // Requests that waited on its probe: the first of them probes again.
  const Rank parent = parent_of(released.request);
  for (auto& h : held_) {
    if (h.probe == Probe::asking && parent_of(h.request) == parent) {
      h.probe = Probe::none;
      return probe_parent(h);
    }
  }
}

void HeldAdoptions::probe_parent(Held& held) {
  const Rank parent = parent_of(held.request);
  if (std::any_of(held_.begin(), held_.end(), [&](const Held& h) {
        return &h != &held && h.probe == Probe::asking && (h.dial.under_way() || h.probe_link) &&
               parent_of(h.request) == parent;
      })) {
    held.probe = Probe::asking;  // answered with that probe
    return;
  }
  if (parent == node_.identity().rank) return;
  // One TCP connection even where the link is striped: the hello's challenge is
  // all the probe waits for.
  auto dialled = node_.dial(parent, true, [this, raw = held.request.link.get(), parent,
                                              alive = std::weak_ptr<int>(lifetime_)](Dialled dialled) {
    if (alive.expired()) return;
    Held* h = find(raw);
    if (!h) return;
    if (!dialled.link) return probe_answered(raw, Probe::gone, "connecting to it: " + dialled.error);
    auto link = std::move(dialled.link);
    h->probe_link = link;
    h->probe_nonce = new_nonce();
    link->start(
        [this, raw, parent](capnp::MessageReader& message) {
          Held* h = find(raw);
          if (!h) return;
          auto msg = message.getRoot<wire::Message>();
          auto body = msg.getBody();
          const bool proved =
              body.isChallenge() && msg.getSenderRank() == parent &&
              proof_matches(challenge_proof(node_.identity().secret, as_data(h->probe_nonce),
                                            body.getChallenge().getNonce(), parent),
                            body.getChallenge().getProof());
          probe_answered(raw, proved ? Probe::alive : Probe::gone,
                         proved ? "it answered" : "another process answers on its port");
        },
        [this, raw](std::string_view reason) {
          probe_answered(raw, Probe::gone, "it closed the connection: " + std::string(reason));
        });
    Message hello(node_.identity());
    auto h2 = hello.body().initHello();
    init_hello(h2, node_.identity(), node_.identity().incarnation);
    h2.setNonce(as_data(h->probe_nonce));
    link->send(hello.builder());
  });
  if (!dialled) return;  // no way to ask: the deadline decides
  held.probe = Probe::asking;
  ++probes_;
  held.dial = std::move(*dialled);
}

// The probe's answer holds for every request held for the same parent.
void HeldAdoptions::probe_answered(const Link* orphan_link, Probe result, const std::string& why) {
  Held* h = find(orphan_link);
  if (!h || h->probe != Probe::asking) return;
  if (h->probe_link) std::exchange(h->probe_link, nullptr)->detach();  // may be in its own handler
  const Rank parent = parent_of(h->request);
  if (result == Probe::gone) parents_found_gone_[parent] = NodeClock::now();
  std::vector<OrphanRequest> adopt;
  for (auto& held : held_) {
    if (held.probe != Probe::asking || parent_of(held.request) != parent) continue;
    held.probe = result;
    if (result == Probe::alive) {
      log().info("{}'s parent {} answered: {}; the request stays held", node_.describe(held.request.orphan),
                 node_.describe(parent), why);
    } else {
      log().info("{}'s parent {} is gone ({}): adopting it", node_.describe(held.request.orphan),
                 node_.describe(parent), why);
      adopt.push_back(held.request);
    }
  }
  let_go(adopt);
}

}  // namespace canopy::core
