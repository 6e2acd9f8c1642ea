# The gossip failure detector among the back-ends (membership/gossip.h,
# docs/gossip.md), after Genaud & Rattanapoka (paper 003). Carried in Message's
# `service` envelope with id 7 and a kind below. Every message goes from one member
# (back-end) to another through the tree: each process on the way passes it towards
# `destination` (down if it is below, else up).
@0xad89c69f1f7932fc;

$import "/capnp/c++.capnp".namespace("canopy::wire::gossip");

const serviceId :UInt16 = 7;

struct Options {
  # The gossip service's options for the whole tree, in the launch plan
  # (Topology.serviceOptions, serialised flat): FaultToleranceOptions::gossip.
  schedule @0 :UInt8;            # GossipSchedule (docs/gossip.md); 0: off
  periodMs @1 :UInt32;           # T_gossip
  maxHangupMs @2 :UInt32;        # T_max_hangup
  pingTimeoutMs @3 :UInt32;      # 0: the tree's lost time
}

enum Kind {
  table @0;                      # body: Table; one member's heartbeat table, once a round
  ping @1;                       # body: Ping; to a suspect
  pong @2;                       # body: Pong; the suspect's answer, or its parent's
}

struct Table {
  source @0 :UInt32;
  destination @1 :UInt32;
  entries @2 :Data;
  # The members the sender knows, ranks ascending, and their heartbeats (epoch << 40 |
  # counter): per member, the rank's difference from the previous member's and the
  # heartbeat's zigzag difference from the previous member's, as LEB128 varints
  # (membership/gossip_table.h). About 2-3 bytes a member instead of 12.
}

struct Ping {
  source @0 :UInt32;
  destination @1 :UInt32;        # the suspect
  nonce @2 :UInt64;
}

struct Pong {
  source @0 :UInt32;             # who answers: the suspect, or a process that knows it is gone
  destination @1 :UInt32;        # who pinged
  suspect @2 :UInt32;
  nonce @3 :UInt64;
  beat @4 :UInt64;               # the suspect's current heartbeat (alive answers)
  gone @5 :Bool;                 # the suspect's link is gone here: no process will answer
}
