// How a Canopy tree detects failures and heals itself: the options a front-end
// launches with, which every process of the tree then uses (docs/fault-tolerance.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace canopy {

// The gossip failure detector among the back-ends (paper 003; docs/gossip.md): who
// each member sends its heartbeat table to, round by round.
enum class GossipSchedule : std::uint8_t {
  off,     // no gossip: the tree's own detection only (the default)
  random,  // a random member each round
  rr,      // round-robin: (s + r) mod n
  brr,     // binary round-robin: (s + 2^(r-1)) mod n
  dbrr,    // double binary round-robin: BRR clockwise, then counter-clockwise
};

// "off", "random", "rr", "brr", "dbrr"; and back (nothing for another word).
std::string_view to_string(GossipSchedule schedule);
std::optional<GossipSchedule> gossip_schedule_from(std::string_view text);

struct GossipOptions {
  GossipSchedule schedule = GossipSchedule::off;
  // T_gossip: one round; each member sends its table once per round.
  std::chrono::milliseconds period{500};
  // T_max_hangup, added to the schedule's T_cleanup before a still heartbeat makes
  // its member suspect.
  std::chrono::milliseconds max_hangup{500};
  // How long a suspect's answer to a ping may take before it is declared failed;
  // 0: the tree's `lost` (an answer can be held up that long by a hung commnode
  // before the tree cuts it out).
  std::chrono::milliseconds ping_timeout{0};

  bool operator==(const GossipOptions&) const = default;
};

// How the tree detects failures and heals itself (docs/fault-tolerance.md).
struct FaultToleranceOptions {
  // false: losing its parent stops a process and its subtree (no healing).
  bool enabled = true;
  // A link with nothing to send for this long carries a heartbeat.
  std::chrono::milliseconds heartbeat{500};
  // A peer silent this long is suspect (logged); this long, lost (its link is cut,
  // and a lost child process started by the node is killed).
  std::chrono::milliseconds suspect{2000};
  std::chrono::milliseconds lost{5000};
  // An orphan that no adopter has accepted after this long stops its subtree.
  std::chrono::milliseconds adoption_timeout{30000};
  // Every process but the root keeps an idle, authenticated connection to its first
  // potential adopter (a standby link), so that its adoption, should its parent
  // fail, is one message on an open connection rather than a connect and a
  // handshake. Costs one connection per process (two descriptors), no traffic.
  // Plain TCP links only: a process whose first potential adopter is reached by a
  // striped link connects when it needs to, as without this option.
  bool standby_links = false;
  // How long the tree outlives its front-end (paper 004 §IV-C; docs/fault-tolerance.md,
  // "When the front-end fails"). 0, the default: losing the front-end stops every
  // process at once. Otherwise the lowest live commnode among the front-end's
  // children is promoted to the root's place, adopts the others and keeps the
  // state of every stream, and a new front-end may re-attach
  // (Network::reattach, `canopy attach-frontend`) within this long; if none does,
  // every process exits. Needs `enabled`.
  std::chrono::milliseconds keep_tree_for{0};
  // How many bytes of the broadcasts it sent the front-end keeps, over all streams,
  // oldest dropped first, to send again to an orphan whose failed parent had not
  // passed them on (docs/fault-tolerance.md, "Broadcasts across a failure"). An
  // orphan that missed broadcasts no longer kept gets an error on their stream.
  // 0: none kept. The front-end's alone: not sent down the tree.
  std::size_t broadcast_log_bytes = std::size_t{64} << 20;
  // End-to-end failure detection among the back-ends, on top of the links' own.
  GossipOptions gossip;
};

}  // namespace canopy
