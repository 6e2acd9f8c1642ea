// Waves (docs/fault-tolerance.md, "Waves after a failure"): a packet going up joins
// the wave of its number; a wave closes once no member child can still add to it,
// or its time is up; what the filter makes of it goes up as the same wave; packets
// for closed waves are counted late.
#include <algorithm>

#include "core/log.h"
#include "services/streams.h"

namespace canopy::services {

using core::log;
using Kind = wire::streams::Kind;

// ---- up ----

void StreamService::send_up(StreamId stream, Packet packet) {
  const Rank me = node_.identity().rank;
  packet.set_source(me);
  packet.set_contributors(1);
  auto it = streams_.find(stream);
  if (it == streams_.end()) {
    // A stream this back-end was not told of: its parent drops the packet as well.
    report_upstream(stream, packet, {.held = 1, .digest = wave_digest(me)});
    return;
  }
  Stream& s = it->second;
  const WaveTag tag{.wave = s.next_wave, .held = 1, .digest = wave_digest(me)};
  if (s.filter) {  // the back-end keeps a state-recoverable filter's state
    s.wave.clear();
    s.wave.push_back(std::move(packet));
    return emit_wave(s, tag);
  }
  // Sent as it is: nothing of it stays behind (a wave's slot is a commnode's).
  s.next_wave = tag.wave + 1;
  report_upstream(stream, packet, tag);
}

void StreamService::accept_upstream(std::size_t child, StreamId id, Packet packet, const WaveTag& tag) {
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    log().warn("dropping a packet from child {} for unknown stream {}", node_.children()[child].rank, id);
    return;
  }
  Stream& stream = it->second;
  const auto m = member_index(stream, child);
  if (!m) {
    log().warn("dropping a packet on stream {} from non-member child {}", id, node_.children()[child].rank);
    return;
  }
  const bool foldable = stream.spec.fold_state && stream.spec.sync != SyncMode::dont_wait;
  if (tag.state && foldable) {
    // An orphan's filter state, for the next wave to close here.
    if (!tag.empty) stream.below().folded.push_back(std::move(packet));
    return;
  }
  if (tag.state || stream.spec.sync == SyncMode::dont_wait) {
    // Filtered on its own as it comes: an orphan's filter state (of no wave), or
    // any packet of a don't-wait stream (its wave's number goes on with it).
    stream.wave.clear();
    if (!tag.empty) stream.wave.push_back(std::move(packet));
    return emit_wave(stream, tag);
  }
  // Only a loosened wait-for-all wave asks when a member was last heard from.
  if (hears_stragglers(stream)) stream.below().heard[*m] = NodeClock::now();
  auto& owes = stream.below().owes[*m];
  if (tag.wave < owes || tag.wave < stream.below().next_close) {
    // Its wave has closed here: a time-out, or the member was given up for it.
    owes = std::max(owes, tag.wave + (tag.more ? 0 : 1));
    if (tag.empty || !stream.filter->state_recoverable()) return count_late(stream);
    // A state-recoverable filter's output is whole whatever waves it comes in (the
    // union stays complete): the packet joins the next wave to close here, or is
    // filtered on its own, of no wave.
    if (foldable) {
      stream.below().folded.push_back(std::move(packet));
      return;
    }
    stream.wave.clear();
    stream.wave.push_back(std::move(packet));
    return emit_wave(stream, {.state = true});
  }
  // A member sends its waves in order: from this one on, it adds to no earlier one.
  owes = tag.wave + (tag.more ? 0 : 1);
  auto at = find_wave(stream, tag.wave);
  if (at == stream.below().open.end() || at->number != tag.wave) {
    // Only a timer asks when a wave opened (one opened before its stream was
    // loosened waits from when its members were last heard, set then).
    at = stream.below().open.insert(at, OpenWave{.number = tag.wave,
                                         .first = stream.below().wave_timer ? NodeClock::now() : NodeClock::time_point{}});
  }
  if (!tag.empty) {
    queue_of(stream, child).packets.insert(tag.wave, std::move(packet));
  }
  at->cut |= tag.cut;
  if (!tag.more) {
    at->held += tag.held;
    at->digest += tag.digest;
  }
  run_waves(stream);
  // A member far ahead of the oldest open wave is read no more until the others
  // catch up (kMaxLead): its packets would wait here without bound.
  if (!stream.below().open.empty() && owes > stream.below().open.front().number + kMaxLead &&
      std::find(leading_.begin(), leading_.end(), child) == leading_.end() &&
      ahead_of_every_stream(child, kMaxLead)) {
    log().debug("stream {}: child {} is {} waves ahead of wave {}: not read until the others catch up", id,
                node_.children()[child].rank, owes - stream.below().open.front().number, stream.below().open.front().number);
    leading_.push_back(child);
    node_.hold_reading(child, true);
  }
}

// Whether `child` is more than `lead` waves ahead of some stream's oldest open wave
// and owes none of them: every stream it belongs to has its packet of its oldest
// open wave. Only such a child may go unread: a wave waits for it nowhere, so
// holding it cannot hold up the waves that would let it go (two children each ahead
// on one stream and owed on the other would wait for each other for ever).
bool StreamService::ahead_of_every_stream(std::size_t child, std::uint64_t lead) const {
  bool ahead = false;
  for (const auto& [id, stream] : streams_) {
    const auto m = member_index(stream, child);
    if (!m || stream.below().open.empty() || stream.spec.sync == SyncMode::dont_wait) continue;
    const std::uint64_t oldest = stream.below().open.front().number;
    if (stream.below().owes[*m] <= oldest) return false;  // owed
    ahead = ahead || stream.below().owes[*m] > oldest + lead;
  }
  return ahead;
}

// A member held for its lead is read again once it is within half of kMaxLead of
// the oldest open wave of every stream it belongs to, or is owed one (or has left
// them all).
void StreamService::release_leads() {
  for (auto c = leading_.begin(); c != leading_.end();) {
    if (ahead_of_every_stream(*c, kMaxLead / 2)) {
      ++c;
      continue;
    }
    node_.hold_reading(*c, false);
    c = leading_.erase(c);
  }
}

StreamService::OpenWaves::iterator StreamService::find_wave(Stream& stream, std::uint64_t wave) {
  auto& open = stream.below().open;
  if (open.empty() || wave > open.back().number) return open.end();
  // Open waves mostly have every number from the oldest on: the wave is where its
  // number says, without a search.
  const std::uint64_t offset = wave - std::min(wave, open.front().number);
  if (offset < open.size() && open[offset].number == wave) return open.begin() + static_cast<std::ptrdiff_t>(offset);
  return std::lower_bound(open.begin(), open.end(), wave,
                          [](const OpenWave& w, std::uint64_t n) { return w.number < n; });
}

void StreamService::PacketQueue::insert(std::uint64_t wave, Packet packet) {
  if (!first_) {
    first_.emplace(wave, std::move(packet));
    return;
  }
  if (!rest_) rest_ = std::make_unique<Rest>();
  if (wave < first_->first) {
    rest_->push_front(std::move(*first_));
    *first_ = {wave, std::move(packet)};
    return;
  }
  // A child's packets come in order, so this is the end; the search only keeps the
  // queue in order whatever comes.
  auto pos = rest_->end();
  while (pos != rest_->begin() && std::prev(pos)->first > wave) --pos;
  rest_->emplace(pos, wave, std::move(packet));
}

void StreamService::PacketQueue::pop_front() {
  if (rest_ && !rest_->empty()) {
    *first_ = std::move(rest_->front());
    rest_->pop_front();
  } else {
    first_.reset();
  }
}

StreamService::ChildQueue& StreamService::queue_of(Stream& stream, std::size_t child) {
  auto& queues = stream.below().queues;
  if (queues.empty()) {
    // A wave's first packet since every queue was empty: a queue for each member at
    // once, in one allocation, so that the others' packets find theirs without moving
    // any (children come in any order). Members are ascending, so are the queues.
    queues.reserve(stream.below().members.size());
    for (const std::size_t m : stream.below().members) queues.push_back(ChildQueue{.child = static_cast<std::uint32_t>(m)});
  }
  auto it = std::lower_bound(queues.begin(), queues.end(), child,
                             [](const ChildQueue& q, std::size_t c) { return q.child < c; });
  if (it == queues.end() || it->child != child) it = queues.insert(it, ChildQueue{.child = static_cast<std::uint32_t>(child)});
  return *it;
}

void StreamService::run_waves(Stream& stream) {
  const auto lowest = std::min_element(stream.below().owes.begin(), stream.below().owes.end());
  std::uint64_t limit = lowest == stream.below().owes.end() ? ~std::uint64_t{0} : *lowest;
  // An adopted child that has not joined yet may add to any open wave.
  if (!stream.below().joining.empty()) limit = std::min(limit, stream.below().next_close);
  while (!stream.below().open.empty() && stream.below().open.front().number < limit) close_front_wave(stream);
  if (!leading_.empty()) release_leads();
  if (stream.below().wave_timer) {
    // The timer measures from the first packet of the oldest open wave.
    if (stream.below().open.empty()) {
      stream.below().timer_armed = false;
      stream.below().wave_timer->cancel();
    } else if (!stream.below().timer_armed) {
      arm_wave_timer(stream);
    }
  }
}

void StreamService::close_front_wave(Stream& stream) {
  const OpenWave w = stream.below().open.front();
  stream.below().open.pop_front();
  stream.below().next_close = std::max(stream.below().next_close, w.number + 1);
  // In the order of the children, as a wave always was, whatever order they came
  // in; a child's own packets (a filter below that made several) in theirs.
  stream.wave.clear();
  stream.wave.reserve(stream.below().folded.size() + stream.below().queues.size());  // one allocation a wave
  // Orphans' state first: it is older than any packet of this wave.
  for (auto& state : stream.below().folded) stream.wave.push_back(std::move(state));
  stream.below().folded.clear();
  bool waiting = false;  // a packet of a later wave
  for (auto q = stream.below().queues.begin(); q != stream.below().queues.end();) {
    auto& packets = q->packets;
    while (!packets.empty() && packets.front().first <= w.number) {
      if (packets.front().first == w.number) {
        stream.wave.push_back(std::move(packets.front().second));
      } else {
        count_late(stream);  // of a wave closed without it (never expected: see accept_upstream)
      }
      packets.pop_front();
    }
    // A child that has left keeps its queue only while it holds packets.
    if (packets.empty() && q->left) {
      q = stream.below().queues.erase(q);
    } else {
      waiting |= !packets.empty();
      ++q;
    }
  }
  // Between waves no queue is held: 80 bytes a child, and the deque of one that once
  // had two waves waiting (docs/scale.md, "A commnode's state per child").
  if (!waiting) stream.below().queues = std::vector<ChildQueue>();
  emit_wave(stream, {.wave = w.number, .held = w.held, .digest = w.digest, .cut = w.cut});
}

std::chrono::milliseconds StreamService::patience(const Stream& stream) const {
  // After the tree changed shape, wait-for-all waits at most the suspect threshold
  // for a silent straggler (see loosen_waves).
  return stream.spec.sync == SyncMode::time_out ? stream.spec.sync_timeout : node_.plan().fault.suspect;
}

NodeClock::time_point StreamService::wave_deadline(const Stream& stream, const OpenWave& w) const {
  // A time-out wave closes its time after its first packet, as the user asked.
  if (stream.spec.sync == SyncMode::time_out) return w.first + patience(stream);
  // A loosened wait-for-all wave waits for each member that owes it until that member
  // has been silent for `suspect` since the wave opened. One that keeps sending is
  // behind, not gone: on a loaded machine back-ends drift apart by more than any
  // fixed time, and cutting every wave a slow member is behind on would cut them all.
  auto latest = w.first;
  for (std::size_t m = 0; m < stream.below().owes.size(); ++m) {
    if (stream.below().owes[m] <= w.number) latest = std::max(latest, stream.below().heard[m]);
  }
  return latest + patience(stream);
}

void StreamService::arm_wave_timer(Stream& stream) {
  stream.below().timer_armed = true;
  stream.below().wave_timer->expires_at(wave_deadline(stream, stream.below().open.front()));
  stream.below().wave_timer->async_wait([this, id = stream.spec.id](const boost::system::error_code& ec) {
    if (!ec) run_partial_wave(id);
  });
}

// The time is up for the oldest open wave: it closes with what has come, and so
// does every later one whose time is up too. The members it waited for skip it:
// what they send for it later is late.
void StreamService::run_partial_wave(StreamId id) {
  auto it = streams_.find(id);
  if (it == streams_.end() || !it->second.below().timer_armed) return;
  Stream& stream = it->second;
  stream.below().timer_armed = false;
  const auto now = NodeClock::now();
  while (!stream.below().open.empty() && wave_deadline(stream, stream.below().open.front()) <= now) {
    const std::uint64_t number = stream.below().open.front().number;
    for (auto& owes : stream.below().owes) {
      if (owes <= number) stream.below().open.front().cut = true;
      owes = std::max(owes, number + 1);
    }
    log().debug("stream {}: wave {} closed by time-out with {} back-end(s)", id, number,
                stream.below().open.front().held);
    close_front_wave(stream);
  }
  run_waves(stream);
}

// Once a child has left or joined, a wave may wait for a packet that will never
// come (a member whose next wave was lost, a restarted back-end that sends nothing
// yet). From the first failure or adoption this node hears of, its wait-for-all
// streams close a wave with the packets present (the root flags it incomplete) once
// every member that owes it has been silent for the suspect threshold. Every node floods the reports,
// so every node loosens its streams.
void StreamService::loosen_waves() {
  if (node_.children().empty()) return;
  for (auto& [id, stream] : streams_) {
    if (stream.below().wave_timer || !stream.filter) continue;
    stream.below().wave_timer = std::make_unique<Timer>(node_.io());
    if (hears_stragglers(stream)) stream.below().heard.assign(stream.below().members.size(), NodeClock::now());
    log().info("stream {}: the tree changed; waves wait at most {} ms for stragglers", id,
               node_.plan().fault.suspect.count());
    run_waves(stream);
  }
}

void StreamService::emit_wave(Stream& stream, WaveTag tag) {
  auto& out = stream.output;
  out.clear();
  const bool numbered = !tag.state;
  if (numbered) stream.next_wave = std::max(stream.next_wave, tag.wave + 1);
  const bool more = tag.more;  // of a don't-wait packet passed on: its sender's flag
  tag.more = false;
  tag.empty = false;
  if (!stream.wave.empty()) {
    auto r = stream.filter->execute(stream.wave, out);
    // Its packets are spent: they go now (their values, 40 bytes and more a child's
    // packet), not at the next wave, and so does their room once it is more than a
    // few packets' (48 bytes a child at a commnode between waves; close_front_wave
    // reserves a wave's at once).
    if (stream.wave.capacity() > kKeptWaveRoom) {
      std::vector<Packet>().swap(stream.wave);
    } else {
      stream.wave.clear();
    }
    if (!r) {
      report_stream_error(stream.spec.id, r.error());
      // The wave goes on without what this node held: the root flags it.
      out.clear();
      tag.held = 0;
      tag.digest = 0;
      tag.cut = true;
    }
  }
  if (out.empty()) {
    // Nothing to send, but the parent learns this node's part in the wave.
    if (numbered && !node_.is_root()) {
      tag.empty = true;
      tag.more = more;
      report_upstream(stream.spec.id, Packet{}, tag);
    }
    return;
  }
  // An aggregate comes from this node; what `pass` forwards keeps its sender.
  const bool forwarded = stream.spec.upstream_filter_of(node_.identity().rank) == "pass";
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!forwarded) out[i].set_source(node_.identity().rank);
    tag.more = i + 1 < out.size() || more;
    report_upstream(stream.spec.id, out[i], tag);
  }
  out.clear();  // sent: as the wave's packets, they go now
}

void StreamService::count_late(Stream& stream) {
  ++stream.late;
  Batches& b = batches();
  if (b.late_armed) return;
  b.late_armed = true;
  b.late_timer.expires_after(kLateBatch);
  b.late_timer.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) send_late_reports();
  });
}

void StreamService::send_late_reports() {
  batches().late_armed = false;
  const Rank me = node_.identity().rank;
  for (auto& [sid, stream] : streams_) {
    const std::uint64_t n = std::exchange(stream.late, 0);
    if (n == 0) continue;
    log().info("stream {}: dropped {} packet(s) whose wave had closed", sid, n);
    if (node_.is_root()) {
      root().late_by_rank[me] += n;
      continue;
    }
    core::Outgoing message(node_.identity(), id(), Kind::LATE);
    auto late = message.init<wire::streams::Late>();
    late.setStreamId(sid);
    late.setRank(me);
    late.setCount(n);
    node_.send_up(message);
  }
}

// A lost child leaves the stream: no wave waits for it any more, and those that
// waited only for it close now. What it sent before it was lost stays in the
// waves of its numbers.
void StreamService::drop_member(Stream& stream, std::size_t child) {
  std::erase(stream.below().joining, child);
  if (auto m = member_index(stream, child)) {
    // A back-end's packets for the open waves it owed are lost for good: those
    // waves close short, flagged. A commnode's back-ends may still bring theirs
    // through their adopters; what they do not bring, the root finds missing.
    if (node_.children()[child].role == Role::backend) {
      for (auto& w : stream.below().open) w.cut |= w.number >= stream.below().owes[*m];
    }
    for (auto& q : stream.below().queues) q.left |= q.child == child;
    stream.below().members.erase(stream.below().members.begin() + *m);
    stream.below().owes.erase(stream.below().owes.begin() + *m);
    if (hears_stragglers(stream)) stream.below().heard.erase(stream.below().heard.begin() + *m);
  }
  auto& waiting = stream.below().awaiting_ack;
  if (auto w = std::find(waiting.begin(), waiting.end(), child); w != waiting.end()) {
    waiting.erase(w);
    stream.below().ack_failures.add(node_.children()[child].rank, std::string(kLostMember));
    if (waiting.empty()) creation_acked(stream);
  }
  run_waves(stream);
}

std::optional<std::size_t> StreamService::member_index(const Stream& stream, std::size_t child) {
  const auto& members = stream.below().members;
  auto pos = std::lower_bound(members.begin(), members.end(), child);
  if (pos == members.end() || *pos != child) return std::nullopt;
  return static_cast<std::size_t>(pos - members.begin());
}

void StreamService::add_member(Stream& stream, std::size_t child, std::uint64_t from) {
  if (member_index(stream, child)) return;
  for (auto& q : stream.below().queues) q.left &= q.child != child;
  // In order (a child that comes back keeps its index, below those adopted since).
  auto& below = stream.below();
  const auto at = std::lower_bound(below.members.begin(), below.members.end(), child) - below.members.begin();
  below.members.insert(below.members.begin() + at, child);
  below.owes.insert(below.owes.begin() + at, std::max(from, below.next_close));
  if (hears_stragglers(stream)) below.heard.insert(below.heard.begin() + at, NodeClock::now());
}

}  // namespace canopy::services
