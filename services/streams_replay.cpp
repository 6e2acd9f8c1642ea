// Broadcasts across a failure (docs/fault-tolerance.md, "Broadcasts across a
// failure"). The root numbers every broadcast of a stream and keeps a bounded copy
// (DownLog); every node takes a stream's broadcasts in that order, once each. A
// process whose parent failed may have missed some: its parent had them but had not
// passed them on. Once adopted, it tells the root the last it took (Resume) and the
// root sends it again the later ones (Replay), routed down to it; it passes them on
// to its own members as if they came from its parent. Broadcasts that arrive after
// a gap wait for the gap to be filled; those the root no longer keeps are reported
// as lost, on the stream, and so are those that did not come within kHoldLimit.
#include <capnp/message.h>

#include "core/codec.h"
#include "core/log.h"
#include "services/streams.h"

namespace canopy::services {

using core::log;
using Kind = wire::streams::Kind;

namespace {

std::string seq_text(DownSeq seq) {
  const DownSeq generation = down_generation(seq);
  const std::string count = std::to_string(seq - down_start(generation));
  return generation == 0 ? count : std::to_string(generation) + ":" + count;
}

// A Replay of `stream` for `target`, routed towards back-end `via`.
wire::streams::Replay::Builder init_replay(core::Outgoing& message, StreamId stream, Rank target, Rank via) {
  auto r = message.init<wire::streams::Replay>();
  r.setStreamId(stream);
  r.setTarget(target);
  r.setVia(via);
  return r;
}

}  // namespace

void StreamService::take_broadcast(StreamId id, DownSeq seq, Packet packet) {
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    log().warn("dropping a broadcast for unknown stream {}", id);
    return;
  }
  Stream& stream = it->second;
  if (stream.down_known && down_generation(seq) < down_generation(stream.down_last)) return;  // a lost root's
  if (!stream.down_known || down_generation(seq) > down_generation(stream.down_last)) {
    // The first this node takes, or the first of a front-end that re-attached: it
    // starts here. What waited for a gap of the root before comes first.
    if (auto held = std::move(stream.held_down)) {
      for (auto& [seq_held, p] : held->packets) pass_on(stream, seq_held, std::move(p));
    }
    stream.down_known = true;
    pass_on(stream, seq, std::move(packet));
    return;
  }
  if (seq <= stream.down_last || (stream.held_down && stream.held_down->packets.count(seq))) return;  // taken already (replayed twice)
  if (seq != stream.down_last + 1) {
    if (!stream.held_down) stream.held_down = std::make_unique<Stream::HeldDown>();
    if (stream.held_down->packets.empty()) stream.held_down->since = NodeClock::now();
    stream.held_down->packets.emplace(seq, std::move(packet));
    log().debug("stream {}: broadcast {} waits for {}", id, seq_text(seq), seq_text(stream.down_last + 1));
    arm_hold_timer();
    return;
  }
  pass_on(stream, seq, std::move(packet));
  drain_held(stream);
}

void StreamService::pass_on(Stream& stream, DownSeq seq, Packet&& packet) {
  stream.down_last = seq;
  if (node_.children().empty()) {
    if (observer_) observer_->on_downstream(stream.spec.id, std::move(packet));
    return;
  }
  forward_down(stream.spec.id, packet, std::nullopt, seq);
}

void StreamService::drain_held(Stream& stream) {
  if (!stream.held_down) return;
  auto& held = stream.held_down->packets;
  while (!held.empty() && held.begin()->first <= stream.down_last + 1) {
    auto node = held.extract(held.begin());
    if (node.key() == stream.down_last + 1) pass_on(stream, node.key(), std::move(node.mapped()));
  }
  if (held.empty()) stream.held_down.reset();
  else stream.held_down->since = NodeClock::now();
}

// Gaps not filled within kHoldLimit: reported lost, and what waited goes on.
void StreamService::release_held() {
  const auto now = NodeClock::now();
  bool waiting = false;
  for (auto& [id, stream] : streams_) {
    if (!stream.held_down) continue;
    if (now - stream.held_down->since < kHoldLimit) {
      waiting = true;
      continue;
    }
    const DownSeq first = stream.held_down->packets.begin()->first;
    report_stream_error(id, "broadcasts " + seq_text(stream.down_last + 1) + " to " + seq_text(first - 1) +
                                " did not arrive within " + std::to_string(kHoldLimit.count()) +
                                " s after a failure; those after them are passed on without them");
    skip_to(stream, first - 1);
    waiting = waiting || stream.held_down != nullptr;
  }
  if (waiting) arm_hold_timer();
}

void StreamService::arm_hold_timer() {
  if (hold_armed_) return;
  hold_armed_ = true;
  hold_timer_.expires_after(kHoldLimit);
  hold_timer_.async_wait([this](const boost::system::error_code& ec) {
    hold_armed_ = false;
    if (!ec) release_held();
  });
}

// Broadcasts up to `lost` will not come: this node and its members go on without
// them (the members quietly: the loss was reported here, or above).
void StreamService::skip_to(Stream& stream, DownSeq lost) {
  stream.down_last = lost;
  for (std::size_t child : stream.below().members) {
    const auto& c = node_.children()[child];
    auto via = c.role == Role::backend ? std::optional<Rank>(c.rank) : backend_below(stream, child);
    if (!c.link || !via) continue;
    core::Outgoing message(node_.identity(), id(), Kind::REPLAY);
    auto r = init_replay(message, stream.spec.id, c.rank, *via);
    r.setLostUpTo(lost);
    r.setReported(true);
    node_.send_to_child(child, message);
  }
  drain_held(stream);
}

std::optional<Rank> StreamService::backend_below(const Stream& stream, std::optional<std::size_t> child) const {
  for (Rank b : stream.spec.backends) {
    auto via = node_.route_to(b);
    if (via && (!child || *via == *child)) return b;
  }
  return std::nullopt;
}

void StreamService::send_resume(const Stream& stream) {
  if (!stream.down_known) return;  // it has taken none: nothing to follow on from
  const Rank me = node_.identity().rank;
  Rank via = me;
  if (!node_.children().empty()) {
    // A back-end of the stream below this node: the replay is routed towards it.
    auto below = backend_below(stream, std::nullopt);
    if (!below) return;
    via = *below;
  }
  core::Outgoing message(node_.identity(), id(), Kind::RESUME);
  auto r = message.init<wire::streams::Resume>();
  r.setStreamId(stream.spec.id);
  r.setOrphan(me);
  r.setVia(via);
  r.setAfter(stream.down_last);
  node_.send_up(message);
}

void StreamService::on_resume(wire::streams::Resume::Reader resume) {
  if (!node_.is_root()) {
    core::Outgoing message(node_.identity(), id(), Kind::RESUME);
    message.set<wire::streams::Resume>(resume);
    node_.send_up(message);
    return;
  }
  const StreamId sid = resume.getStreamId();
  auto it = streams_.find(sid);
  auto via = live_route(resume.getVia());
  if (it == streams_.end() || !via) return;
  auto send = [&](DownSeq lost, DownSeq seq, const wire::DataPacket::Reader* packet) {
    core::Outgoing message(node_.identity(), id(), Kind::REPLAY);
    auto r = init_replay(message, sid, resume.getOrphan(), resume.getVia());
    r.setLostUpTo(lost);
    if (packet) {
      auto b = r.initBroadcast();
      b.setSeq(seq);
      b.setPacket(*packet);
    }
    node_.send_to_child(*via, message);
  };
  // What is no longer kept first, so that the orphan does not wait for it.
  const DownSeq lost = root().down_log.lost(sid, resume.getAfter(), it->second.down_last);
  if (lost != 0) send(lost, 0, nullptr);
  std::size_t sent = 0;
  root().down_log.replay(sid, resume.getAfter(), [&](DownSeq seq, wire::DataPacket::Reader packet) {
    send(0, seq, &packet);
    ++sent;
  });
  if (sent != 0 || lost != 0) {
    log().info("stream {}: {} broadcast(s) sent again to {}{}", sid, sent, resume.getOrphan(),
               lost != 0 ? ", those up to " + seq_text(lost) + " no longer kept" : "");
  }
}

void StreamService::on_replay(wire::streams::Replay::Reader replay) {
  const Rank me = node_.identity().rank;
  if (replay.getTarget() != me) {
    auto via = live_route(replay.getVia());
    if (!via) {
      log().warn("stream {}: no route to {} for a broadcast sent again", replay.getStreamId(), replay.getTarget());
      return;
    }
    core::Outgoing message(node_.identity(), id(), Kind::REPLAY);
    message.set<wire::streams::Replay>(replay);
    node_.send_to_child(*via, message);
    return;
  }
  auto it = streams_.find(replay.getStreamId());
  if (it == streams_.end()) return;
  Stream& stream = it->second;
  const DownSeq lost = replay.getLostUpTo();
  if (lost != 0 && stream.down_known && down_generation(lost) == down_generation(stream.down_last) &&
      lost > stream.down_last) {
    if (!replay.getReported()) {
      report_stream_error(stream.spec.id, "broadcasts " + seq_text(stream.down_last + 1) + " to " + seq_text(lost) +
                                              " were lost when this node's parent failed: the front-end no longer "
                                              "keeps them (FaultToleranceOptions::broadcast_log_bytes)");
    }
    skip_to(stream, lost);
  }
  if (replay.hasBroadcast()) {
    auto b = replay.getBroadcast();
    take_broadcast(stream.spec.id, b.getSeq(), core::decode_packet(b.getPacket()));
  }
}

}  // namespace canopy::services
