// StreamService: streams, waves and the filter host (docs/filters.md).
//
// A stream is a communicator (a set of back-ends), an upstream filter, a sync mode
// and a downstream filter. StreamCreate goes down into the subtrees holding
// members; every node records which of its children take part and acknowledges
// once they all have. Packets going up are gathered into waves per the sync mode and
// aggregated by the filter; packets going down pass the downstream filter and go to
// the member children, or to one back-end (point-to-point). Back-ends also send to
// each other through the nearest common ancestor.
//
// Waves have identity (docs/fault-tolerance.md, "Waves after a failure"): every
// back-end numbers its packets on a stream from 0, and a node builds each wave from
// its children's packets of one number. It knows, for each member child, the lowest
// wave that child may still send (a child sends its waves in order), and closes a
// wave once no member can still add to it: a lost child no longer holds a wave
// open, and an orphan's packets join the waves of their own numbers at its adopter.
// No filter ever sees a wave mixed from two numbers. The root calls a wave complete
// when it holds exactly the stream's back-ends in its membership view (by count and
// by a digest of their ranks), and flags every other one incomplete.
//
// On the node's events: a lost child leaves the streams; once the tree has changed
// shape, wait-for-all waves wait at most the suspect threshold for stragglers;
// after this node is adopted it rejoins its streams at the adopter, saying which
// wave it sends next, and sends the state of each state-recoverable filter (state
// composition, of no wave); a restarted back-end that rejoins under its rank takes
// part again in the streams that name it, from its parent's current wave.
#pragma once

#include <boost/asio.hpp>
#include <boost/container/deque.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "canopy/packet.h"
#include "canopy/stream.h"
#include "canopy/view.h"
#include "core/failures.h"
#include "core/rank_set.h"
#include "core/service_context.h"
#include "filters/filter.h"
#include "services/down_log.h"
#include "services/stream_spec.h"
#include "streams.capnp.h"

namespace canopy::services {

namespace asio = boost::asio;

// A packet's place in the waves of its stream (DataPacket.wave, held, digest, state).
struct WaveTag {
  std::uint64_t wave = 0;
  std::uint32_t held = 0;     // back-ends whose packets it holds
  std::uint64_t digest = 0;   // sum of wave_digest(rank) over them
  bool state = false;         // filter state after a heal: of no wave
  bool more = false;          // more packets of this wave follow from the sender
  bool empty = false;         // no packet: the wave gave no output at the sender
  bool cut = false;           // closed somewhere without a member that owed it
};
// One back-end's share of a wave digest: a 64-bit mix of its rank, so that a wave
// holding other back-ends than expected, in the same number, is told apart.
std::uint64_t wave_digest(Rank rank);
// What the root says of a wave it delivers.
struct WaveVerdict {
  std::optional<std::uint64_t> wave;  // none: of no wave (filter state)
  std::uint32_t holds = 0;
  bool complete = false;
};

// The membership view as a stream reads it: its number, and whether a back-end is a
// member. An interface, borrowed (Runtime's is its membership service): two
// std::functions held 64 bytes at every process.
class ViewSource {
 public:
  virtual std::uint64_t view_id() const = 0;
  virtual bool holds(Rank rank) const = 0;

 protected:
  ~ViewSource() = default;
};

class StreamService final : public core::Service {
 public:
  class Observer {
   public:
    virtual ~Observer() = default;
    // Root only:
    virtual void on_stream_ack(StreamId stream, const std::string& error) {}
    virtual void on_stream_error(StreamId stream, const std::string& error) {}
    virtual void on_upstream(StreamId stream, Packet&& packet, const WaveVerdict& wave) {}
    // Leaf only:
    virtual void on_downstream(StreamId stream, Packet&& packet) {}
  };

  // `node`, `filters` and `observer` (may be null) are borrowed.
  StreamService(core::ServiceContext& node, filters::FilterRegistry& filters, Observer* observer);
  // Root: where the membership view comes from, against which waves are judged
  // complete (Runtime gives its membership service's); without it, a wave is
  // complete when it holds every back-end of the stream.
  // `view` is borrowed and must outlive the service.
  void set_view_source(const ViewSource* view) { view_ = view; }

  core::ServiceId id() const override { return wire::streams::SERVICE_ID; }
  std::string_view name() const override { return "streams"; }
  // A lost child is reported up by detection and membership before the streams
  // close waves without it: the front-end holds the view without a failed back-end
  // when the first aggregate without it arrives.
  std::vector<core::ServiceId> runs_after() const override;
  void on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) override;
  void on_event(const core::NodeEvent& event) override;

  // Root: creates a stream in the subtrees holding its back-ends; on_stream_ack
  // reports the outcome.
  void create_stream(const StreamSpec& spec);
  // Root: sends a packet down a stream, to all its back-ends or to one.
  void send_down(StreamId stream, const Packet& packet, std::optional<Rank> destination);
  // Leaf: sends a packet up a stream.
  void send_up(StreamId stream, Packet packet);
  // Leaf: sends a packet to another back-end through the nearest common ancestor.
  void send_to_backend(Rank destination, StreamId stream, Packet packet);

  // For the request service: whether this node has stream `id`; new parameters for
  // one of its filters (applied where the node has children); its member children
  // that are commnodes.
  bool has_stream(StreamId id) const { return streams_.count(id) != 0; }
  // Whether back-end `backend` is a member of stream `id`: one it was made with, or a
  // joiner it took in.
  bool made_with(StreamId id, Rank backend) const;
  // Every stream this node is on, ascending.
  std::vector<StreamId> stream_ids() const;
  Result<void> set_params(StreamId id, FilterSlot slot, const Packet& params);
  // The member children that run filters of the stream, to take new parameters:
  // its commnodes, and back-ends with a filter of their own (upstream_filter_at).
  std::vector<std::size_t> children_with_filters(StreamId id) const;
  // For the recovery service: the streams of this node's latest adoption that may
  // lack data (filters that are not state recoverable, or output dropped while
  // orphaned), ascending.
  const std::vector<StreamId>& incomplete_after_adoption() const;
  // Root: packets dropped at each node because their wave had closed there, as
  // reported so far (NodeStatus::late_packets).
  const std::map<Rank, std::uint64_t>& late_packets() const;

  // A member this far ahead of a stream's oldest open wave, and owed by none, is not
  // read until it is within half of it of every stream's (core::ServiceContext::hold_reading):
  // a child that outruns its siblings held 40,000 packets in each queue at b:8^2
  // flooded with waves (issue 45), growing every node's memory with the gap.
  static constexpr std::uint64_t kMaxLead = 4096;

 private:
  // A wave being built: what has come of it so far. Its packets wait in their
  // children's queues (ChildQueue), not here: with a child thousands of waves ahead
  // of another, a vector per open wave was megabytes of memory touched once each.
  struct OpenWave {
    std::uint64_t number = 0;
    std::uint32_t held = 0;
    std::uint64_t digest = 0;
    bool cut = false;
    NodeClock::time_point first{};  // when its first packet came
  };
  // One child's packets for the open waves, ascending by wave (each child sends its
  // waves in order); kept after the child has left until its packets' waves close.
  // A child rarely has more than one wave waiting here: the first waits in place,
  // and those after it in a deque made the first time a second one waits (blocks of
  // 2 packets, not Boost's default 9); the queues go once all are empty after a wave
  // closes (close_front_wave), 80 bytes a child until stop 81. Until stop 76 every child that had
  // sent a packet kept a deque's block and map, 176 bytes (568 before stop 73):
  // docs/scale.md, "A commnode's state per child".
  class PacketQueue {
   public:
    bool empty() const { return !first_; }
    std::pair<std::uint64_t, Packet>& front() { return *first_; }
    void pop_front();
    // After the packets of waves up to its own (of its wave, after those there).
    void insert(std::uint64_t wave, Packet packet);

   private:
    using Rest = boost::container::deque<std::pair<std::uint64_t, Packet>, void,
                                         boost::container::deque_options_t<boost::container::block_size<2u>>>;
    std::optional<std::pair<std::uint64_t, Packet>> first_;
    std::unique_ptr<Rest> rest_;  // after first_
  };
  using OpenWaves =
      boost::container::deque<OpenWave, void, boost::container::deque_options_t<boost::container::block_size<4u>>>;
  struct ChildQueue {
    std::uint32_t child = 0;  // index
    bool left = false;  // no longer a member: the queue goes once it is empty
    PacketQueue packets;  // (wave, packet)
  };
  // What a node gathers from its children on a stream: their waves, the members
  // that owe them, the acknowledgements of its creation. Made when first needed: a
  // back-end, which has no children, never makes it (docs/scale.md, "A back-end's
  // own state").
  struct Below {
    // Participating children (indexes), ascending: a packet finds its member by a
    // binary search (a linear one made each wave O(F²) at a commnode of F children).
    std::vector<std::size_t> members;
    // One per member: the lowest wave it may still send. A wave closes once every
    // member's is above it.
    std::vector<std::uint64_t> owes;
    // One per member, kept once the waves are loosened: when its last packet came. A
    // straggler holds a wave for as long as it keeps sending (see wave_deadline).
    std::vector<NodeClock::time_point> heard;
    // Ascending wave number. Boost's deque allocates at its first element, not when
    // it is made (std::deque: 576 bytes), and here in blocks of 4 waves: a commnode
    // has one or two open at a time, and kept Boost's default block (512 bytes, 12
    // waves) with its map, 544 bytes, until stop 84.
    OpenWaves open;
    // Ascending child index; one a member once a wave's first packet has come, none
    // once every one is empty after a wave closes (queue_of, close_front_wave).
    std::vector<ChildQueue> queues;
    // Waves below this are closed here (or were never open here).
    std::uint64_t next_close = 0;
    // fold_state: orphans' filter state, to be filtered with the next wave to close.
    std::vector<Packet> folded;
    std::vector<std::size_t> awaiting_ack;       // member children yet to ack
    // Adopted children whose join of this stream has not come, nor their `joined`:
    // not members yet, but no wave closes while one may still add to it
    // (await_joins).
    std::vector<std::size_t> joining;
    core::Failures ack_failures;  // of the subtree's acks so far
    // time_out mode, and wait-for-all once the tree has changed: closes a wave
    // that has waited its time with what has come.
    std::unique_ptr<Timer> wave_timer;
    bool timer_armed = false;
    // Root: the count and digest of the stream's back-ends in the view, for view
    // `expected_view` and `expected_size` back-ends in the spec.
    std::uint64_t expected_view = ~std::uint64_t{0};
    std::size_t expected_size = 0;
    std::uint32_t expected_held = 0;
    std::uint64_t expected_digest = 0;
  };
  struct Stream {
    StreamSpec spec;
    // The number of the next wave this node sends up: a back-end's next packet, a
    // commnode's next aggregate.
    std::uint64_t next_wave = 0;
    // Orphaned: the first wave sent up since the parent was lost (what the new
    // parent is told to expect first).
    std::optional<std::uint64_t> orphaned_at;
    std::uint64_t late = 0;                      // dropped since the last report
    std::unique_ptr<filters::Filter> filter;      // upstream
    std::unique_ptr<filters::Filter> downstream;  // null: packets pass unchanged
    // A wave's packets while filtered and its output while sent: reused, but the wave's
    // room goes once it is more than kKeptWaveRoom (one allocation a wave).
    std::vector<Packet> wave, output;
    // Broadcasts (services/streams_replay.cpp): the last taken from the parent (at
    // the root: the last sent); false until the first is taken at a node that
    // joined the stream for an adopted orphan (it has no earlier one to follow).
    DownSeq down_last = 0;
    bool down_known = true;
    // Those that came after a gap, until the gap is filled (by the root's replay)
    // or kHoldLimit has passed.
    // Made by the first that waits (a gap after a failure), gone once none does.
    struct HeldDown {
      std::map<DownSeq, Packet> packets;
      NodeClock::time_point since{};
    };
    std::unique_ptr<HeldDown> held_down;

    // Made on first use, its waves starting where this node's are.
    Below& below() {
      if (!below_) {
        below_ = std::make_unique<Below>();
        below_->next_close = next_wave;
      }
      return *below_;
    }
    const Below& below() const {
      static const Below none;
      return below_ ? *below_ : none;
    }

   private:
    std::unique_ptr<Below> below_;
  };

  // `down_from`: the last broadcast before the stream reached this node;
  // `first_wave`: the wave it starts at.
  void open_stream(const StreamSpec& spec, DownSeq down_from, std::uint64_t first_wave = 0);
  void on_ack(std::size_t child, wire::streams::StreamAck::Reader ack);
  void deliver_down(wire::DataPacket::Reader packet);
  void forward_down(StreamId stream, const Packet& packet, std::optional<Rank> destination, DownSeq seq = 0);
  // ---- broadcasts across a failure (services/streams_replay.cpp) ----
  // A numbered broadcast from the parent, or replayed: taken in order, once.
  void take_broadcast(StreamId id, DownSeq seq, Packet packet);
  void pass_on(Stream& stream, DownSeq seq, Packet&& packet);
  void drain_held(Stream& stream);
  void release_held();
  void skip_to(Stream& stream, DownSeq lost);
  // The connected child through which back-end `backend` is reached, if any.
  std::optional<std::size_t> live_route(Rank backend) const;
  // A back-end of the stream below this node (below child `child`, if given).
  std::optional<Rank> backend_below(const Stream& stream, std::optional<std::size_t> child) const;
  void arm_hold_timer();
  // Orphan: asks the root for the broadcasts after its last, stream by stream.
  void send_resume(const Stream& stream);
  void on_resume(wire::streams::Resume::Reader resume);
  void on_replay(wire::streams::Replay::Reader replay);
  static constexpr std::chrono::seconds kHoldLimit{5};
  void accept_upstream(std::size_t child, StreamId stream, Packet packet, const WaveTag& tag);
  Result<void> make_filters(Stream& stream);
  // A filter instance's context here and now (its place in the live tree included).
  FilterContext filter_context(const Stream& stream, bool upstream) const;
  // The tree changed: every instance here is told its context again.
  void refresh_contexts();
  // Where wave `wave` is in `stream.below().open`, or where it would go.
  static OpenWaves::iterator find_wave(Stream& stream, std::uint64_t wave);
  // Child `child`'s queue, made if it has none.
  static ChildQueue& queue_of(Stream& stream, std::size_t child);
  // Whether the stream keeps when each member was last heard from (Below::heard):
  // a wait-for-all stream once its waves are loosened, and only then.
  static bool hears_stragglers(const Stream& stream) {
    return stream.below().wave_timer && stream.spec.sync == SyncMode::wait_for_all;
  }
  // The packets a stream's wave slot keeps room for between waves (Stream::wave).
  static constexpr std::size_t kKeptWaveRoom = 4;
  // Closes, in order, every open wave no member can still add to, and (re)arms the
  // wave timer.
  void run_waves(Stream& stream);
  // The timer: every open wave that has waited its time closes with what it has;
  // the members it waited for skip it.
  void run_partial_wave(StreamId id);
  void arm_wave_timer(Stream& stream);
  // When wave `w`, open at this node, stops waiting for what has not come.
  NodeClock::time_point wave_deadline(const Stream& stream, const OpenWave& w) const;
  std::chrono::milliseconds patience(const Stream& stream) const;
  void close_front_wave(Stream& stream);
  // Filters `stream.wave` and sends what comes out up, as wave `tag`.
  void emit_wave(Stream& stream, WaveTag tag);
  void loosen_waves();
  void count_late(Stream& stream);
  void send_late_reports();
  static constexpr std::chrono::milliseconds kLateBatch{50};
  void route_point_to_point(wire::DataPacket::Reader packet);
  void join_stream(std::size_t child, const StreamSpec& spec, DownSeq joined, std::uint64_t next_wave);
  void await_joins(std::size_t child);
  void joins_done(std::size_t child);
  void rejoin_streams(std::size_t child, Rank rank);
  // Back-end `rank` joined the tree (or joined it again): the streams that take in
  // joiners take it in.
  void take_in(Rank rank);
  // Member `child`'s position in `members` and `owes`, or null if it is not one.
  static std::optional<std::size_t> member_index(const Stream& stream, std::size_t child);
  bool ahead_of_every_stream(std::size_t child, std::uint64_t lead) const;
  void release_leads();
  // `child` takes part (again) in the stream's waves, from wave `from` (or the
  // first still open here, if later); a member already keeps its place.
  static void add_member(Stream& stream, std::size_t child, std::uint64_t from);
  void drop_member(Stream& stream, std::size_t child);
  void compensate();

  void send_create(std::size_t child, const Stream& stream);
  // ---- a creation across a heal (services/streams_heal.cpp) ----
  // Every member has acknowledged the creation (or was lost): reported up, or, at
  // the root, tried again once the tree has healed if members were lost on the way.
  void creation_acked(Stream& stream);
  // The stream again, to every member child (those that reach its back-ends now,
  // adopted ones included): each opens it or, having it, does the same below it,
  // and this node acknowledges once all have.
  void reopen(Stream& stream);
  // Root: sends again the creations whose orphans have all been adopted (or lost).
  void check_healing();
  // Root: the processes `lost` are known to have failed, and every back-end of
  // `spec` hangs from the root again or is gone.
  bool healed(const StreamSpec& spec, const std::set<Rank>& lost) const;
  static constexpr std::string_view kLostMember = "lost";
  static constexpr int kHealRounds = 3;
  struct Healing {
    core::Failures failures;  // of the last round: reported if the tree does not heal
    std::set<Rank> lost;      // the members lost, in every round
    NodeClock::time_point deadline;
    int rounds = 0;
    bool in_flight = false;  // sent again, acknowledgements awaited
  };

  void report_stream_ack(StreamId stream, const core::Failures& failures);
  // This node's own failure to create stream `stream`.
  void report_stream_failure(StreamId stream, const std::string& message);
  // This node's own error on `stream` (no node name in `message`: it is added).
  // Errors are held for kErrorBatch and sent up, or handed to the observer at the
  // root, as one report per stream in which errors alike are one line naming the
  // nodes by rank ranges: a filter failing at 256 commnodes is one error.
  void report_stream_error(StreamId stream, const std::string& message);
  void hold_stream_errors(StreamId stream, const core::Failures& failures);
  void send_stream_errors();
  static constexpr std::chrono::milliseconds kErrorBatch{50};
  void report_upstream(StreamId stream, const Packet& packet, const WaveTag& tag);
  // Root: whether wave `tag` holds exactly the stream's back-ends in the view.
  bool complete(Stream& stream, const WaveTag& tag);

  core::ServiceContext& node_;
  filters::FilterRegistry& filters_;
  Observer* observer_;
  std::map<StreamId, Stream> streams_;  // a map: no bucket array at a back-end of one stream
  // An orphan's streams, made when it first loses output or is adopted: a process
  // that never was an orphan holds none (40 bytes; docs/scale.md).
  struct Adoption {
    std::vector<StreamId> overflowed;  // output dropped while orphaned
    std::vector<StreamId> incomplete;  // of the latest adoption
  };
  Adoption& adoption();
  std::unique_ptr<Adoption> adoption_;
  DownSeq down_generation_ = 0;  // root: above every one the tree had taken
  Timer hold_timer_;
  bool hold_armed_ = false;
  const ViewSource* view_ = nullptr;     // root: the membership view
  // The root's own state, made when first needed: a commnode or a back-end never
  // makes it (docs/scale.md, "A back-end's own state").
  struct Root {
    explicit Root(boost::asio::io_context& io) : heal_timer(io) {}
    DownLog down_log;  // healing on: the broadcasts sent
    std::map<StreamId, Healing> healing;  // creations waiting for the tree to heal
    Timer heal_timer;
    std::map<Rank, std::uint64_t> late_by_rank;  // late packets dropped, by node
  };
  Root& root();
  std::unique_ptr<Root> root_;
  // Children held for their lead (kMaxLead), by index, a few at most: a vector, 24
  // bytes at a back-end, not a set's 48.
  std::vector<std::size_t> leading_;
  // What waits to go up in a batch: stream errors (kErrorBatch) and the counts of
  // packets that came after their wave closed (kLateBatch, commnodes only). Made by
  // the first, so not at a back-end whose filters never fail (88 bytes before).
  struct Batches {
    explicit Batches(boost::asio::io_context& io) : error_timer(io), late_timer(io) {}
    std::map<StreamId, core::Failures> held_errors;  // until error_timer fires
    Timer error_timer;
    Timer late_timer;
    bool late_armed = false;
  };
  std::unique_ptr<Batches> batches_;
  Batches& batches();
};

}  // namespace canopy::services
