#include "services/streams.h"

#include <algorithm>
#include <utility>

#include <capnp/serialize.h>

#include "core/codec.h"
#include "core/log.h"
#include "detection.capnp.h"
#include "membership.capnp.h"
#include "transport/frame.h"

namespace canopy::services {

std::vector<core::ServiceId> StreamService::runs_after() const { return {wire::detection::SERVICE_ID, wire::membership::SERVICE_ID}; }

using core::log;
using Kind = wire::streams::Kind;

namespace {

constexpr const char* kBadCommunicator =
    "a stream's back-ends came as ranges that are not ascending and disjoint, or name more than 2^24 ranks";

WaveTag read_tag(wire::DataPacket::Reader d) {
  return {.wave = d.getWave(), .held = d.getHeld(), .digest = d.getDigest(), .state = d.getState(),
          .more = d.getMore(), .empty = d.getEmpty(), .cut = d.getCut()};
}

void write_tag(wire::DataPacket::Builder d, const WaveTag& tag) {
  d.setWave(tag.wave);
  d.setHeld(tag.held);
  d.setDigest(tag.digest);
  d.setState(tag.state);
  d.setMore(tag.more);
  d.setEmpty(tag.empty);
  d.setCut(tag.cut);
}

}  // namespace

std::uint64_t wave_digest(Rank rank) {
  // splitmix64's finaliser: every bit of the rank reaches every bit of the share.
  std::uint64_t z = rank + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

StreamService::StreamService(core::ServiceContext& node, filters::FilterRegistry& filters, Observer* observer)
    : node_(node),
      filters_(filters),
      observer_(observer),
      hold_timer_(node.io()) {}

StreamService::Batches& StreamService::batches() {
  if (!batches_) batches_ = std::make_unique<Batches>(node_.io());
  return *batches_;
}

StreamService::Root& StreamService::root() {
  if (!root_) root_ = std::make_unique<Root>(node_.io());
  return *root_;
}

const std::map<Rank, std::uint64_t>& StreamService::late_packets() const {
  static const std::map<Rank, std::uint64_t> none;
  return root_ ? root_->late_by_rank : none;
}

// ---- messages and events ----

void StreamService::on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) {
  const bool from_child = from.kind == core::Peer::Kind::child;
  switch (static_cast<Kind>(kind)) {
    case Kind::DATA: {
      // Once the node stops, nothing it would compute could be delivered: a filter's
      // work on data still arriving would only hold up the stop (a filter emitting
      // 200,000 packets a wave kept the front-end busy for 50 s: issue 16).
      if (node_.stopping()) return;
      auto d = body.getAs<wire::DataPacket>();
      if (!from_child) return deliver_down(d);
      if (d.getPointToPoint()) return route_point_to_point(d);
      return accept_upstream(from.child, d.getStreamId(), core::decode_packet(d), read_tag(d));
    }
    case Kind::BROADCAST:
      if (!from_child && !node_.stopping()) {
        auto b = body.getAs<wire::streams::Broadcast>();
        take_broadcast(b.getPacket().getStreamId(), b.getSeq(), core::decode_packet(b.getPacket()));
      }
      return;
    case Kind::CREATE:
      if (!from_child) {
        auto create = body.getAs<wire::streams::StreamCreate>();
        auto spec = read_spec(create);
        if (!spec) return report_stream_failure(create.getStreamId(), kBadCommunicator);
        open_stream(*spec, create.getDownSeq(), create.getNextWave());
      }
      return;
    case Kind::ACK:
      if (from_child) on_ack(from.child, body.getAs<wire::streams::StreamAck>());
      return;
    case Kind::ERROR:
      if (from_child) {
        auto e = body.getAs<wire::streams::StreamError>();
        core::Failures failures;
        failures.merge(e.getFailures());
        hold_stream_errors(e.getStreamId(), failures);
      }
      return;
    case Kind::JOIN:
      if (from_child) {
        auto join = body.getAs<wire::streams::StreamCreate>();
        auto spec = read_spec(join);
        if (!spec) return report_stream_error(join.getStreamId(), kBadCommunicator);
        join_stream(from.child, *spec, join.getDownSeq(), join.getNextWave());
      }
      return;
    case Kind::JOINED:
      if (from_child) joins_done(from.child);
      return;
    case Kind::LATE:
      if (from_child) {
        auto late = body.getAs<wire::streams::Late>();
        if (node_.is_root()) {
          root().late_by_rank[late.getRank()] += late.getCount();
        } else {
          core::Outgoing message(node_.identity(), id(), Kind::LATE);
          message.set<wire::streams::Late>(late);
          node_.send_up(message);
        }
      }
      return;
    case Kind::RESUME:
      if (from_child) on_resume(body.getAs<wire::streams::Resume>());
      return;
    case Kind::REPLAY:
      if (!from_child) on_replay(body.getAs<wire::streams::Replay>());
      return;
  }
  log().warn("ignoring stream message of unknown kind {}", kind);
}

void StreamService::on_event(const core::NodeEvent& event) {
  if (auto* lost = std::get_if<core::events::ChildLost>(&event)) {
    // Reports and data share the ordered link up: the loss was reported before
    // this, so aggregates without the child follow the report.
    for (auto& [id, stream] : streams_) drop_member(stream, lost->child);
    if (!leading_.empty()) release_leads();  // a member gone, or its waves closed without it
  } else if (auto* connected = std::get_if<core::events::ChildConnected>(&event)) {
    if (connected->rejoined || connected->joined) rejoin_streams(connected->child, connected->rank);
  } else if (auto* changed = std::get_if<core::events::TreeChanged>(&event)) {
    if (changed->kind != core::events::TreeChanged::Kind::failure) take_in(changed->rank);
    refresh_contexts();
    loosen_waves();
    if (root_ && !root_->healing.empty()) check_healing();
  } else if (auto* adopted = std::get_if<core::events::ChildAdopted>(&event)) {
    await_joins(adopted->child);
  } else if (std::holds_alternative<core::events::Adopted>(event)) {
    compensate();
  } else if (std::holds_alternative<core::events::Orphaned>(event) ||
             std::holds_alternative<core::events::Promoted>(event)) {
    // What was sent up before is lost with the parent or reached it; what is sent
    // from now on is held for the new one, which is told where it starts.
    for (auto& [sid, stream] : streams_) {
      if (!stream.orphaned_at) stream.orphaned_at = stream.next_wave;
    }
  }
}

// ---- creating streams ----

namespace {

std::string too_many_streams() {
  return "this node has " + std::to_string(kMaxStreams) + " streams, the most a network can have";
}

}  // namespace

void StreamService::create_stream(const StreamSpec& spec) {
  // The front-end and every commnode check that each rank is a back-end; a back-end
  // does not (the processes above it have, and it holds only its part of the tree:
  // docs/scale.md), so that it works in O(ranges), not O(back-ends).
  const bool part = node_.topology()->partial();
  if (node_.identity().role != Role::backend) {
    for (Rank b : spec.backends) {
      const canopy::TopologyNode* n = node_.topology()->find(b);
      if (part && !n) continue;
      if (!n || n->role != Role::backend) {
        report_stream_failure(spec.id, "rank " + std::to_string(b) + " is not a back-end of this network");
        return;
      }
    }
  }
  // Back-ends load no plugin unless a stream needs one there: a state-recoverable
  // upstream filter, whose instance over a back-end's own packets is the state it
  // gives a new parent (docs/filters.md, "Where filters run").
  StreamSpec opened = spec;
  if (filters_.state_recoverable(spec.upstream_filter)) {
    if (auto path = filters_.plugin_path(spec.upstream_filter); !path.empty()) opened.set_extra().upstream_plugin = path;
  }
  for (const auto& [rank, own] : spec.extra().upstream_filter_at) {
    const std::string& filter = own.filter;
    const canopy::TopologyNode* n = node_.topology()->find(rank);
    if (part && !n) continue;
    if (!n) {
      report_stream_failure(spec.id, "the upstream filter '" + filter + "' is given to rank " + std::to_string(rank) +
                                         ", which is no node of this network");
      return;
    }
    if (!filters_.contains(filter)) {
      report_stream_failure(spec.id, "the upstream filter '" + filter + "' given to rank " + std::to_string(rank) +
                                         " is not loaded");
      return;
    }
    if (n->role == Role::backend) {
      if (auto path = filters_.plugin_path(filter); !path.empty()) opened.set_extra().upstream_plugin_at[rank] = path;
    }
  }
  open_stream(opened, down_start(down_generation_));
}

void StreamService::open_stream(const StreamSpec& spec, DownSeq down_from, std::uint64_t first_wave) {
  if (auto it = streams_.find(spec.id); it != streams_.end()) {
    // Sent again by the root after the tree healed (services/streams_heal.cpp); a
    // stream that takes in joiners may have taken in some here that the sender has
    // not heard of yet, or the other way round.
    StreamSpec& mine = it->second.spec;
    if (mine.joiners && spec.joiners && mine.upstream_filter == spec.upstream_filter) {
      mine.backends.unite(spec.backends);
      reopen(it->second);
    } else if (mine.backends == spec.backends && mine.upstream_filter == spec.upstream_filter) {
      reopen(it->second);
    } else {
      report_stream_failure(spec.id, "stream " + std::to_string(spec.id) + " already exists");
    }
    return;
  }
  if (streams_.size() >= kMaxStreams) {
    report_stream_failure(spec.id, too_many_streams());
    return;
  }
  Stream stream;
  stream.spec = spec;
  stream.down_last = down_from;
  stream.next_wave = first_wave;
  if (auto made = make_filters(stream); !made) {
    report_stream_failure(spec.id, made.error());
    return;
  }
  const auto& children = node_.children();
  if (!children.empty()) {
    std::vector<bool> member(children.size(), false);
    for (Rank b : spec.backends) {
      if (auto via = node_.route_to(b)) member[*via] = true;
    }
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (member[i] && children[i].link) stream.below().members.push_back(i);
    }
    stream.below().owes.assign(stream.below().members.size(), first_wave);
    stream.below().awaiting_ack = stream.below().members;
  }
  auto [it, inserted] = streams_.emplace(spec.id, std::move(stream));
  log().info("stream {} opened: filter {}, sync {}, {} member children", spec.id,
             spec.upstream_filter_of(node_.identity().rank),
             static_cast<int>(spec.sync), std::as_const(it->second).below().members.size());
  if (std::as_const(it->second).below().members.empty()) {
    report_stream_ack(spec.id, {});
    return;
  }
  for (std::size_t i : it->second.below().members) send_create(i, it->second);
}

void StreamService::send_create(std::size_t child, const Stream& stream) {
  core::Outgoing message(node_.identity(), id(), Kind::CREATE);
  write_spec(message.init<wire::streams::StreamCreate>(), stream.spec, stream.down_last, stream.below().next_close);
  node_.send_to_child(child, message);
}

void StreamService::on_ack(std::size_t child, wire::streams::StreamAck::Reader ack) {
  auto it = streams_.find(ack.getStreamId());
  if (it == streams_.end()) return;
  Stream& stream = it->second;
  auto& waiting = stream.below().awaiting_ack;
  auto pos = std::find(waiting.begin(), waiting.end(), child);
  if (pos == waiting.end()) {
    // From a member taken in after the creation was acknowledged (a joiner, a
    // rejoined back-end): nobody waits for it, but what failed there is told.
    core::Failures failures;
    failures.merge(ack.getFailures());
    if (!failures.empty()) hold_stream_errors(stream.spec.id, failures);
    return;
  }
  stream.below().ack_failures.merge(ack.getFailures());
  waiting.erase(pos);
  if (waiting.empty()) creation_acked(stream);
}

FilterContext StreamService::filter_context(const Stream& stream, bool upstream) const {
  const Rank me = node_.identity().rank;
  FilterContext context{.rank = me, .stream = stream.spec.id, .upstream = upstream,
                        .children = static_cast<std::uint32_t>(node_.children().connected())};
  if (const auto place = node_.own_place()) {
    context.siblings = place->siblings;
    context.descendants = place->descendants;
    context.backends = place->backends;
    context.depth = place->depth;
    context.height = place->height;
  }
  return context;
}

void StreamService::refresh_contexts() {
  for (auto& [id, stream] : streams_) {
    for (auto* filter : {stream.filter.get(), stream.downstream.get()}) {
      if (!filter) continue;
      if (auto told = filter->set_context(filter_context(stream, filter == stream.filter.get())); !told) {
        log().warn("stream {}: the filter's new context: {}", id, told.error());
      }
    }
  }
}

Result<void> StreamService::make_filters(Stream& stream) {
  const StreamSpec& spec = stream.spec;
  const StreamSpec::Extra& extra = spec.extra();
  const FilterContext context = filter_context(stream, true);
  const Rank me = node_.identity().rank;
  if (node_.children().empty()) {
    if (auto named = extra.upstream_filter_at.find(me); named != extra.upstream_filter_at.end()) {
      // A back-end filter of its own (MRNet's): it runs over each packet sent.
      const NodeFilter& own = named->second;
      if (auto plugin = extra.upstream_plugin_at.find(me); plugin != extra.upstream_plugin_at.end()) {
        if (auto loaded = filters_.load(plugin->second, own.filter); !loaded) {
          return Error{loaded.error() + " (the back-end's upstream filter '" + own.filter + "')"};
        }
      }
      auto filter = filters_.create(own.filter, context, own.params);
      if (!filter) return Error{filter.error()};
      stream.filter = std::move(*filter);
      return {};
    }
    // A back-end keeps an instance of a state-recoverable upstream filter over its
    // own packets: its state is what it sends a new parent if its parent dies. Such
    // a filter from a plugin is the only plugin a back-end loads.
    if (!extra.upstream_plugin.empty()) {
      if (auto loaded = filters_.load(extra.upstream_plugin, spec.upstream_filter); !loaded) {
        return Error{loaded.error() + " (back-ends keep the state of the state-recoverable filter '" +
                     spec.upstream_filter + "')"};
      }
    }
    auto filter = filters_.create(spec.upstream_filter, context, extra.upstream_params);
    if (filter && (*filter)->state_recoverable()) stream.filter = std::move(*filter);
    return {};
  }
  if (node_.plan().reattached && !extra.upstream_plugin.empty()) {
    // A front-end that re-attached has loaded no plugin: a state-recoverable filter's
    // comes with the stream, as back-ends load it.
    if (auto loaded = filters_.load(extra.upstream_plugin, spec.upstream_filter); !loaded) return loaded;
  }
  auto filter = filters_.create(spec.upstream_filter_of(me), context, spec.upstream_params_of(me));
  if (!filter) return Error{filter.error()};
  stream.filter = std::move(*filter);
  if (!extra.downstream_filter.empty()) {
    auto downstream = filters_.create(extra.downstream_filter, filter_context(stream, false), extra.downstream_params);
    if (!downstream) return Error{"downstream " + downstream.error()};
    stream.downstream = std::move(*downstream);
  }
  if (spec.sync == SyncMode::time_out && !stream.below().wave_timer) {
    stream.below().wave_timer = std::make_unique<Timer>(node_.io());
  }
  return {};
}

// ---- down ----

void StreamService::send_down(StreamId stream, const Packet& packet, std::optional<Rank> destination) {
  forward_down(stream, packet, destination);
}

// A point-to-point packet from the parent (a stream's packets to all its back-ends
// come as broadcasts: take_broadcast).
void StreamService::deliver_down(wire::DataPacket::Reader packet) {
  const StreamId stream = packet.getStreamId();
  if (!packet.getPointToPoint()) {
    log().warn("dropping a data packet from the parent that is not point-to-point (stream {})", stream);
    return;
  }
  const Rank destination = packet.getDestination();
  if (node_.children().empty()) {
    if (destination != node_.identity().rank) {
      log().warn("dropping a packet for rank {} delivered to rank {}", destination, node_.identity().rank);
      return;
    }
    if (observer_) observer_->on_downstream(stream, core::decode_packet(packet));
    return;
  }
  // A point-to-point packet on no stream this node has (a back-end's send_to on
  // stream 0, "no stream"): routed on towards its destination, with no filter.
  if (streams_.count(stream) == 0) return route_point_to_point(packet);
  forward_down(stream, core::decode_packet(packet), destination);
}

void StreamService::forward_down(StreamId id, const Packet& input, std::optional<Rank> destination, DownSeq seq) {
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    if (node_.is_root() && observer_) observer_->on_stream_error(id, "no such stream " + std::to_string(id));
    log().warn("dropping a packet for unknown stream {}", id);
    return;
  }
  Stream& stream = it->second;
  const Packet* packet = &input;
  std::vector<Packet> filtered;
  if (stream.downstream) {
    if (auto r = stream.downstream->execute(std::span<const Packet>(&input, 1), filtered); !r) {
      report_stream_error(id, r.error());
      return;
    }
    if (filtered.empty()) return;
    packet = &filtered.front();
  }
  // A broadcast is numbered (by the root), and kept there while healing is on: an
  // orphan whose parent failed before passing it on gets it again
  // (services/streams_replay.cpp).
  core::Outgoing message(node_.identity(), this->id(), destination ? Kind::DATA : Kind::BROADCAST);
  wire::DataPacket::Builder d = nullptr;
  if (destination) {
    d = message.init<wire::DataPacket>();
  } else {
    auto b = message.init<wire::streams::Broadcast>();
    if (node_.is_root()) seq = ++stream.down_last;
    b.setSeq(seq);
    d = b.initPacket();
  }
  d.setStreamId(id);
  core::encode_packet(*packet, d);
  if (destination) {
    d.setPointToPoint(true);
    d.setDestination(*destination);
    auto via = live_route(*destination);
    if (!via) {
      report_stream_error(id, "no route to back-end " + std::to_string(*destination));
      return;
    }
    node_.send_to_child(*via, message);
    return;
  }
  if (const auto& fault = node_.plan().fault; node_.is_root() && fault.enabled && fault.broadcast_log_bytes != 0) {
    root().down_log.add(id, seq, d.asReader(), fault.broadcast_log_bytes);
  }
  for (std::size_t i : stream.below().members) node_.send_to_child(i, message);
}

// ---- point-to-point between back-ends ----

void StreamService::send_to_backend(Rank destination, StreamId stream, Packet packet) {
  packet.set_source(node_.identity().rank);
  packet.set_contributors(1);
  capnp::MallocMessageBuilder builder;
  auto d = builder.initRoot<wire::DataPacket>();
  d.setStreamId(stream);
  core::encode_packet(packet, d);
  d.setPointToPoint(true);
  d.setDestination(destination);
  route_point_to_point(d.asReader());
}

std::optional<std::size_t> StreamService::live_route(Rank backend) const {
  auto via = node_.route_to(backend);
  if (!via || !node_.children()[*via].link) return std::nullopt;
  return via;
}

// Down towards `destination` if it is below this node, else up; the first node on the
// way up that has it below is the nearest common ancestor.
void StreamService::route_point_to_point(wire::DataPacket::Reader packet) {
  const Rank destination = packet.getDestination();
  if (destination == node_.identity().rank && node_.children().empty()) {
    if (observer_) observer_->on_downstream(packet.getStreamId(), core::decode_packet(packet));
    return;
  }
  core::Outgoing message(node_.identity(), id(), Kind::DATA);
  message.set<wire::DataPacket>(packet);
  if (auto via = node_.route_to(destination)) {
    if (!node_.children()[*via].link) {
      report_stream_error(packet.getStreamId(), "point-to-point packet from rank " +
                                                    std::to_string(packet.getSourceRank()) + " to back-end " +
                                                    std::to_string(destination) + " dropped: its subtree is gone");
      return;
    }
    node_.send_to_child(*via, message);
  } else if (!node_.is_root()) {
    node_.send_up(message);  // held back while orphaned
  } else {
    report_stream_error(packet.getStreamId(), "point-to-point packet from rank " +
                                                  std::to_string(packet.getSourceRank()) + " dropped: " +
                                                  std::to_string(destination) + " is not a back-end of this network");
  }
}

// ---- parameters (for the request service) ----

Result<void> StreamService::set_params(StreamId id, FilterSlot slot, const Packet& params) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return Error{"no stream " + std::to_string(id)};
  Stream& stream = it->second;
  if (node_.children().empty()) {
    // A back-end runs only a filter of its own (upstream_filter_at), and a
    // state-recoverable one's instance, which keeps the parameters it was made with.
    if (slot != FilterSlot::upstream || !stream.spec.extra().upstream_filter_at.count(node_.identity().rank)) return {};
    return stream.filter->set_params(params);
  }
  switch (slot) {
    case FilterSlot::upstream:
      return stream.filter->set_params(params);
    case FilterSlot::downstream:
      if (stream.downstream) return stream.downstream->set_params(params);
      if (params.size() != 0) return Error{"the stream has no downstream filter"};
      return {};
    case FilterSlot::sync: {
      auto timeout = sync_timeout_param(params);
      if (!timeout) return Error{timeout.error()};
      stream.spec.sync_timeout = *timeout;
      return {};
    }
  }
  return {};
}

bool StreamService::made_with(StreamId id, Rank backend) const {
  auto it = streams_.find(id);
  if (it == streams_.end()) return false;
  return it->second.spec.backends.contains(backend);
}

std::vector<StreamId> StreamService::stream_ids() const {
  std::vector<StreamId> out;
  for (const auto& [id, stream] : streams_) out.push_back(id);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::size_t> StreamService::children_with_filters(StreamId id) const {
  std::vector<std::size_t> out;
  auto it = streams_.find(id);
  if (it == streams_.end()) return out;
  const auto& own = it->second.spec.extra().upstream_filter_at;
  for (std::size_t i : it->second.below().members) {
    const auto& child = node_.children()[i];
    if (child.link && (child.role == Role::commnode || own.count(child.rank))) out.push_back(i);
  }
  return out;
}

// ---- recovery ----

// A stream of an adopted orphan: join it to the local stream, creating the stream
// here (and asking upwards) if this node was not on it.
void StreamService::join_stream(std::size_t child, const StreamSpec& spec, DownSeq joined, std::uint64_t next_wave) {
  auto it = streams_.find(spec.id);
  if (it == streams_.end()) {
    if (streams_.size() >= kMaxStreams) {
      report_stream_error(spec.id, "cannot join stream for an adopted orphan: " + too_many_streams());
      return;
    }
    Stream stream;
    stream.spec = spec;
    // Its waves start where the orphan's do.
    stream.below().next_close = stream.next_wave = next_wave;
    if (node_.is_root()) {
      // A front-end that re-attached: its broadcasts are numbered in a generation
      // above the tree's, which it has not sent.
      down_generation_ = std::max(down_generation_, down_generation(joined) + 1);
      stream.down_last = down_start(down_generation_);
    } else {
      stream.down_known = false;  // its first broadcast from above sets where it is
    }
    if (auto made = make_filters(stream); !made) {
      report_stream_error(spec.id, "cannot join stream for an adopted orphan: " + made.error());
      return;
    }
    it = streams_.emplace(spec.id, std::move(stream)).first;
    if (!node_.is_root()) {
      core::Outgoing join(node_.identity(), id(), Kind::JOIN);
      write_spec(join.init<wire::streams::StreamCreate>(), spec, joined, next_wave);
      node_.send_up(join);
    }
    log().info("stream {} created here for an adopted orphan", spec.id);
    loosen_waves();
  }
  // Its packets join the waves of their numbers here, from the first it sends; an
  // orphan behind this node's waves adds to those still open.
  Stream& stream = it->second;
  add_member(stream, child, next_wave);
  log().info("stream {}: child {} sends from wave {} (waves here close from {})", spec.id,
             node_.children()[child].rank, next_wave, stream.below().next_close);
  // Held for it since its adoption: the waves it does not add to may close now.
  if (std::erase(stream.below().joining, child) > 0) run_waves(stream);
}

// An orphan has just been adopted here. Its joins say which streams it is on and
// the first wave it sends on each, but they come after the adoption is reported up
// the tree: the front-end may send a wave first, and this node's other children
// answer it. Until its joins come, every open wave here is one it may add to, so no
// wave closes (a wave closed before its join came missed the orphan's packet,
// flagged incomplete: a tool's first wave after the adoption event was short). It
// is not a member meanwhile: nothing is sent down to it, nothing waits for its
// acknowledgement. The `joined` it sends after its joins ends the wait on the
// streams it is not on; its loss ends every wait; so does the straggler rule.
void StreamService::await_joins(std::size_t child) {
  for (auto& [sid, stream] : streams_) {
    if (stream.spec.sync == SyncMode::dont_wait || member_index(stream, child)) continue;
    stream.below().joining.push_back(child);
  }
}

// The adopted child has joined every stream it is on: the others wait no more.
void StreamService::joins_done(std::size_t child) {
  for (auto& [sid, stream] : streams_) {
    if (std::erase(stream.below().joining, child) > 0) run_waves(stream);
  }
}

// A back-end has joined the tree (open attach), or joined it again under its rank:
// every stream here that takes in joiners has it, and the child it is reached
// through becomes a member, told of the stream if it was not one (a commnode that
// had no back-end of it, created there now). The back-end itself, if it is this
// node's child, is told when it connects (rejoin_streams).
void StreamService::take_in(Rank rank) {
  const core::TreeView* view = node_.live_tree();
  if (!view || !view->contains(rank) || view->role(rank) != Role::backend) return;
  for (auto& [sid, stream] : streams_) {
    if (!stream.spec.joiners) continue;
    stream.spec.backends.insert(rank);
    auto via = live_route(rank);
    if (!via || member_index(stream, *via)) continue;
    add_member(stream, *via, stream.below().next_close);
    if (!stream.below().awaiting_ack.empty()) stream.below().awaiting_ack.push_back(*via);  // still being created
    send_create(*via, stream);
    log().info("stream {}: takes in back-end {} (below child {})", sid, rank, node_.children()[*via].rank);
  }
}

// A restarted back-end connected again under its rank: it takes part again in every
// stream here whose communicator names it (it is created at the back-end as at
// launch), from the lowest wave still open here: its first packet bears that number.
void StreamService::rejoin_streams(std::size_t child, Rank rank) {
  std::vector<StreamId> ids;
  for (auto& [sid, stream] : streams_) {
    if (!stream.spec.backends.contains(rank)) continue;
    add_member(stream, child, stream.below().next_close);
    ids.push_back(sid);
  }
  std::sort(ids.begin(), ids.end());
  for (StreamId sid : ids) send_create(child, streams_.at(sid));
  if (!ids.empty()) log().info("back-end {} rejoined {} stream(s)", rank, ids.size());
}

// This node has just been adopted: join every stream at the adopter, and send the
// state of every state-recoverable filter as channel state; the output held back
// while orphaned follows (the core sends it).
void StreamService::compensate() {
  const Rank me = node_.identity().rank;
  std::vector<StreamId>& incomplete = adoption().incomplete;
  incomplete = std::exchange(adoption().overflowed, {});
  std::vector<StreamId> ids;
  for (const auto& [id, stream] : streams_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (StreamId sid : ids) {
    Stream& stream = streams_.at(sid);
    // The first wave the adopter hears of from here: the first sent while orphaned
    // (held back for it), or the next. A state-recoverable filter's output was not
    // held (its state stands for it): its next.
    const bool recoverable = stream.filter && stream.filter->state_recoverable();
    const std::uint64_t next = recoverable ? stream.next_wave : stream.orphaned_at.value_or(stream.next_wave);
    stream.orphaned_at.reset();
    core::Outgoing join(node_.identity(), id(), Kind::JOIN);
    write_spec(join.init<wire::streams::StreamCreate>(), stream.spec, stream.down_last, next);
    node_.send_up(join);
    send_resume(stream);
    if (!stream.filter || !stream.filter->state_recoverable()) {
      incomplete.push_back(sid);
      continue;
    }
    auto state = stream.filter->extract_state();
    if (!state) {
      report_stream_error(sid, "cannot extract filter state: " + state.error());
      incomplete.push_back(sid);
      continue;
    }
    state->set_source(me);
    state->set_contributors(0);  // state, not new input
    report_upstream(sid, *state, {.state = true});
  }
  // On no other stream: the adopter's waves stop waiting for this node.
  core::Outgoing joined(node_.identity(), id(), Kind::JOINED);
  node_.send_up(joined);
  std::sort(incomplete.begin(), incomplete.end());
  incomplete.erase(std::unique(incomplete.begin(), incomplete.end()), incomplete.end());
}

StreamService::Adoption& StreamService::adoption() {
  if (!adoption_) adoption_ = std::make_unique<Adoption>();
  return *adoption_;
}

const std::vector<StreamId>& StreamService::incomplete_after_adoption() const {
  static const std::vector<StreamId> none;
  return adoption_ ? adoption_->incomplete : none;
}

// ---- reports travelling up ----

void StreamService::report_stream_failure(StreamId stream, const std::string& message) {
  core::Failures failures;
  failures.add(node_.identity().rank, message);
  report_stream_ack(stream, failures);
}

void StreamService::report_stream_ack(StreamId stream, const core::Failures& failures) {
  if (node_.is_root()) {
    if (observer_) observer_->on_stream_ack(stream, failures.describe(node_.topology() ? &*node_.topology() : nullptr));
    return;
  }
  core::Outgoing message(node_.identity(), id(), Kind::ACK);
  auto a = message.init<wire::streams::StreamAck>();
  a.setStreamId(stream);
  failures.write(a.initFailures(static_cast<unsigned>(failures.size())));
  node_.send_up(message);
}

void StreamService::report_stream_error(StreamId stream, const std::string& message) {
  log().error("stream {}: {}", stream, message);
  core::Failures failures;
  failures.add(node_.identity().rank, message);
  hold_stream_errors(stream, failures);
}

void StreamService::hold_stream_errors(StreamId stream, const core::Failures& failures) {
  Batches& b = batches();
  const bool armed = !b.held_errors.empty();
  b.held_errors[stream].merge(failures);
  if (armed) return;
  b.error_timer.expires_after(kErrorBatch);
  b.error_timer.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) send_stream_errors();
  });
}

void StreamService::send_stream_errors() {
  for (const auto& [stream, failures] : std::exchange(batches().held_errors, {})) {
    if (node_.is_root()) {
      if (observer_) {
        observer_->on_stream_error(stream, failures.describe(node_.topology() ? &*node_.topology() : nullptr));
      }
      continue;
    }
    core::Outgoing message(node_.identity(), id(), Kind::ERROR);
    auto e = message.init<wire::streams::StreamError>();
    e.setStreamId(stream);
    failures.write(e.initFailures(static_cast<unsigned>(failures.size())));
    node_.send_up(message);
  }
}

bool StreamService::complete(Stream& stream, const WaveTag& tag) {
  const bool viewed = view_ != nullptr;
  const std::uint64_t view_id = viewed ? view_->view_id() : 0;
  if (stream.below().expected_view != view_id || stream.below().expected_size != stream.spec.backends.size()) {
    stream.below().expected_view = view_id;
    stream.below().expected_size = stream.spec.backends.size();
    stream.below().expected_held = 0;
    stream.below().expected_digest = 0;
    for (Rank b : stream.spec.backends) {
      if (viewed && !view_->holds(b)) continue;
      ++stream.below().expected_held;
      stream.below().expected_digest += wave_digest(b);
    }
  }
  return !tag.cut && tag.held == stream.below().expected_held && tag.digest == stream.below().expected_digest;
}

void StreamService::report_upstream(StreamId stream, const Packet& packet, const WaveTag& tag) {
  if (node_.is_root()) {
    if (!observer_) return;
    WaveVerdict verdict;
    if (!tag.state) {
      verdict.wave = tag.wave;
      verdict.holds = tag.held;
      auto it = streams_.find(stream);
      verdict.complete = it != streams_.end() && complete(it->second, tag);
    }
    observer_->on_upstream(stream, Packet(packet), verdict);
    return;
  }
  if (node_.phase() == core::Phase::orphaned) {
    // The filter state of a recoverable stream subsumes its pending output: the
    // state goes to the new parent instead.
    auto it = streams_.find(stream);
    if (it != streams_.end() && it->second.filter && it->second.filter->state_recoverable()) return;
  }
  core::Outgoing message(node_.identity(), id(), Kind::DATA);
  auto d = message.init<wire::DataPacket>();
  d.setStreamId(stream);
  core::encode_packet(packet, d);
  write_tag(d, tag);
  // Refused here, with the filter and the size, not sent for the parent to refuse:
  // that closed the link, and the user saw only a missing result (issue 16).
  if (const auto bytes = capnp::computeSerializedSizeInWords(message.builder()) * sizeof(capnp::word);
      bytes > transport::kDefaultMaxFrameBytes) {
    auto it = streams_.find(stream);
    const std::string filter = it != streams_.end() ? it->second.spec.upstream_filter_of(node_.identity().rank) : "?";
    return report_stream_error(stream, "filter '" + filter +
                                           "' produced a packet of " + std::to_string(bytes) +
                                           " bytes, over the frame limit of " +
                                           std::to_string(transport::kDefaultMaxFrameBytes) +
                                           " bytes; it was not sent");
  }
  if (!node_.send_up(message) && node_.phase() == core::Phase::orphaned) adoption().overflowed.push_back(stream);
}

}  // namespace canopy::services
