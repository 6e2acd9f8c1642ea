// GossipService: failure detection among the back-ends, end to end (docs/gossip.md).
//
// Genaud and Rattanapoka's gossip detector (paper 003) over the Canopy tree. Every
// member (back-end of the membership view) keeps a heartbeat table: one counter per
// member and the time it last grew here. Every T_gossip it increments its own counter
// and sends its table to one member, chosen by the schedule (random, RR, BRR, DBRR;
// membership/gossip_schedule.h) over the ring of the current view; tables merge by
// element-wise maximum. A counter still for T_cleanup + T_max_hangup makes its member
// suspect; the suspect is pinged end to end (the ping procedure of §5, instead of
// consensus): an answer clears it, and so does its parent saying its link is gone
// (no process will answer: confirmed at once); no answer within the ping time-out
// confirms the failure, which goes to the membership service as NODE_FAILURE.
//
// What the tree knows is used so that the tree's own healing is never taken for a
// member's failure: while this member is an orphan, or a suspect does not hang from
// the root through live processes (a commnode above it failed and it is not yet
// adopted), suspicion of it waits; adoption restarts the clocks of those whose
// heartbeats it held back. The ring is the view: it shrinks and grows with it.
//
// Runs on every process: commnodes and the front-end pass messages on towards their
// destination; only members gossip. On the node's io_context thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "core/service_context.h"
#include "gossip.capnp.h"
#include "membership/gossip_schedule.h"
#include "membership/gossip_table.h"
#include "membership/membership.h"

namespace canopy::membership {

class GossipService final : public core::Service {
 public:
  enum class MemberState : std::uint8_t { alive, pinging, failed };

  class Observer {
   public:
    virtual ~Observer() = default;
    // This member's detector confirmed that member `rank` failed; its heartbeat had
    // been still for `silent` (the suspicion time plus the ping's).
    virtual void on_confirmed(Rank rank, std::chrono::milliseconds silent) {}
  };

  // `node`, `membership` and `observer` (may be null) are borrowed.
  GossipService(core::ServiceContext& node, MembershipService& membership, Observer* observer);

  core::ServiceId id() const override { return wire::gossip::SERVICE_ID; }
  std::string_view name() const override { return "gossip"; }
  // Gossips over the members of the view the membership service applied.
  std::vector<core::ServiceId> runs_after() const override;
  void on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) override;
  void on_event(const core::NodeEvent& event) override;
  // At the root: FaultToleranceOptions::gossip of the plan it started with, for the
  // whole tree (gossip.capnp, Options).
  std::string plan_options() const override;

  // The options the tree gossips with, from the launch plan (off until it is known).
  GossipOptions options() const;
  static std::string encode_options(const GossipOptions& options);
  // Nothing if `bytes` are not an Options message.
  static std::optional<GossipOptions> decode_options(std::string_view bytes);

  // What this member knows of member `rank`: nothing if it is not in the ring.
  std::optional<MemberState> state_of(Rank rank) const;
  std::uint64_t heartbeat_of(Rank rank) const;
  // T_cleanup + T_max_hangup for the current ring: how long a heartbeat may stay
  // still before its member is pinged.
  std::chrono::milliseconds suspicion_time() const;
  // How long a ping may go unanswered.
  std::chrono::milliseconds ping_timeout() const;
  // Tables and pings this member sent, and messages passed on here for others.
  std::uint64_t tables_sent() const { return ring_ ? ring_->tables_sent : 0; }
  std::uint64_t pings_sent() const { return ring_ ? ring_->pings_sent : 0; }
  std::uint64_t forwarded() const { return forwarded_; }

 private:
  struct Member {
    std::uint64_t beat = 0;
    bool heard = false;  // its counter has grown here at least once
    NodeClock::time_point grew;
    MemberState state = MemberState::alive;
    std::uint64_t nonce = 0;
    NodeClock::time_point pinged;
    // Its heartbeat counts as just grown, and a ping under way as just sent.
    void restart(NodeClock::time_point now) { grew = pinged = now; }
  };

  bool member() const;
  void arm();
  void tick();
  void refresh_ring();
  void restart_clocks(const std::vector<Rank>& ranks);
  bool paused(Rank rank) const;
  void send_table(Rank to);
  void merge(wire::gossip::Table::Reader table);
  void check();
  void ping(Rank rank, Member& peer);
  void on_ping(wire::gossip::Ping::Reader ping);
  void on_pong(wire::gossip::Pong::Reader pong);
  void confirm(Rank rank, Member& peer, const std::string& how);
  std::uint64_t own_beat() const;
  // Towards member `destination`: down if it is below this process, else up. False
  // if it cannot go on from here; `gone` then says whether its link is gone here.
  bool route(core::Outgoing& message, Rank destination, bool* gone = nullptr);
  void answer_gone(wire::gossip::Ping::Reader ping);
  // Another member's message, on towards `destination` (route's result).
  template <typename T>
  bool pass_on(std::uint16_t kind, typename T::Reader body, Rank destination, bool* gone = nullptr);

  core::ServiceContext& node_;
  MembershipService& membership_;
  Observer* observer_;
  // A member's gossip, made when it starts: a process without gossip (every process
  // of most trees, and every commnode) holds none of it (docs/scale.md, "A
  // back-end's own state").
  struct Ring {
    Ring(boost::asio::io_context& io, Rank me) : timer(io), rng(0x9e3779b97f4a7c15ULL ^ me) {}
    GossipOptions options;  // the tree's, from the plan, as it started
    Timer timer;
    // The members of view `view`, ascending; this member is `ranks[self]`.
    std::uint64_t view = ~std::uint64_t{0};
    std::vector<Rank> ranks;
    std::uint32_t self = 0;
    std::uint32_t round = 0;
    std::uint64_t counter = 0;
    std::map<Rank, Member> peers;  // every other member of the ring
    std::mt19937_64 rng;
    std::uint64_t next_nonce = 1;
    std::uint64_t tables_sent = 0, pings_sent = 0;
  };
  std::unique_ptr<Ring> ring_;  // null: not started

  std::uint64_t forwarded_ = 0;  // commnodes pass gossip on without a ring
};

}  // namespace canopy::membership
