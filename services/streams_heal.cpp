// A stream created while the tree loses a process (docs/fault-tolerance.md, "A
// stream created across a failure"). A member lost before it acknowledged the
// creation never passed it on: the orphans below it, once adopted, do not have the
// stream. With healing on, the root then waits until every back-end of the stream
// hangs from it again (or is gone for good), and sends the creation again; a node
// that has the stream already passes it on to its members as they are now, adopted
// ones included, and acknowledges once they all have. Only if the tree does not heal
// within the adoption time-out, or members are still lost after kHealRounds
// rounds, does the creation fail, naming them.
#include "core/log.h"
#include "services/streams.h"

namespace canopy::services {

using core::log;

void StreamService::creation_acked(Stream& stream) {
  const StreamId sid = stream.spec.id;
  std::vector<std::size_t>().swap(stream.below().awaiting_ack);  // its room too: 8 bytes a member child
  if (node_.is_root() && node_.plan().fault.enabled && stream.below().ack_failures.only(kLostMember)) {
    auto [it, fresh] = root().healing.try_emplace(sid);
    Healing& healing = it->second;
    if (fresh) healing.deadline = NodeClock::now() + node_.plan().fault.adoption_timeout;
    if (++healing.rounds <= kHealRounds && NodeClock::now() < healing.deadline) {
      healing.failures = stream.below().ack_failures;
      healing.lost.merge(stream.below().ack_failures.ranks_of(std::string(kLostMember)));
      healing.in_flight = false;
      log().info("stream {}: members lost while it was created ({}); sent again once the tree has healed", sid,
                 stream.below().ack_failures.describe(node_.topology() ? &*node_.topology() : nullptr));
      root().heal_timer.expires_at(std::min_element(root().healing.begin(), root().healing.end(), [](const auto& a, const auto& b) {
                               return a.second.deadline < b.second.deadline;
                             })->second.deadline);
      root().heal_timer.async_wait([this](const boost::system::error_code& ec) {
        if (!ec) check_healing();
      });
      // The tree may have healed already (the orphans adopted before the last
      // acknowledgement came); checked after this handler, not inside it, since
      // sending again may end in creation_acked.
      boost::asio::post(node_.io(), [this] { check_healing(); });
      return;
    }
  }
  if (root_) root_->healing.erase(sid);
  report_stream_ack(sid, stream.below().ack_failures);
}

void StreamService::reopen(Stream& stream) {
  for (Rank b : stream.spec.backends) {
    if (auto via = live_route(b)) add_member(stream, *via, stream.below().next_close);
  }
  stream.below().ack_failures = {};
  stream.below().awaiting_ack.clear();
  for (std::size_t i : stream.below().members) {
    if (!node_.children()[i].link) continue;
    stream.below().awaiting_ack.push_back(i);
    send_create(i, stream);
  }
  if (stream.below().awaiting_ack.empty()) creation_acked(stream);
}

void StreamService::check_healing() {
  const auto now = NodeClock::now();
  std::vector<StreamId> ready, expired;
  for (const auto& [sid, healing] : root().healing) {
    if (healing.in_flight) continue;
    if (!streams_.count(sid)) {
      expired.push_back(sid);
    } else if (healed(streams_.at(sid).spec, healing.lost)) {
      ready.push_back(sid);
    } else if (now >= healing.deadline) {
      expired.push_back(sid);
    }
  }
  for (StreamId sid : expired) {
    core::Failures failures = std::move(root().healing.at(sid).failures);
    root().healing.erase(sid);
    report_stream_ack(sid, failures);
  }
  for (StreamId sid : ready) {
    root().healing.at(sid).in_flight = true;
    log().info("stream {}: the tree has healed; its creation is sent again", sid);
    reopen(streams_.at(sid));
  }
}

bool StreamService::healed(const StreamSpec& spec, const std::set<Rank>& lost) const {
  const core::TreeView* view = node_.live_tree();
  if (!view) return true;
  // An acknowledgement that names a member lost may come before the failure report
  // that the member's parent sends after it (core/node.cpp, finish_child_loss):
  // until the report is here, the orphans still look attached.
  for (Rank r : lost) {
    if (view->contains(r) && view->alive(r)) return false;
  }
  for (Rank b : spec.backends) {
    if (view->contains(b) && view->alive(b) && !view->attached(b)) return false;
  }
  return true;
}

}  // namespace canopy::services
