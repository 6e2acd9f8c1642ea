# The membership service (membership/membership.h, docs/membership.md): views of the
# live back-ends with epochs, after Varma et al. (paper 000) on the Canopy tree, and
# Bland's epochs (paper 001). Carried in Message's `service` envelope with id 6 and
# a kind below.
@0x80004b27091722c8;

$import "/capnp/c++.capnp".namespace("canopy::wire::membership");

const serviceId :UInt16 = 6;

enum Kind {
  nodeFailure @0;                # body: NodeFailure; detector -> root, hop by hop up
  failureDetAck @1;              # body: DetAck; root -> detector, down the live tree
  viewChange @2;                 # body: ViewChange; root -> everyone, down the tree
  viewAck @3;                    # body: ViewAck; up, once a whole subtree has the view
  newNode @4;                    # body: NewNode; a back-end's parent -> root: it joined
  joinDetAck @5;                 # body: DetAck; root -> that parent
  staleDropped @6;               # body: Member; up to the root: something from a
                                 # process at a stale epoch was refused or dropped here
}

struct Member {
  rank @0 :UInt32;
  epoch @1 :UInt32;              # the member's epoch as the sender knows it
}

struct NodeFailure {
  # NODE_FAILURE of paper 000: `detector` (the failed back-end's parent) lost these
  # members. Resent until the root's DetAck arrives; the root acts on the first copy.
  detector @0 :UInt32;
  failed @1 :List(Member);
  reason @2 :Text;
  endToEnd @3 :Bool;             # the detector is a member whose gossip detector
                                 # confirmed it (docs/gossip.md), not the parent
  silentMs @4 :UInt32;           # end to end: how long its heartbeat had been still
}

struct NewNode {
  # NEW_NODE / NODE_ALIVE of paper 000: these back-ends connected to `detector` after
  # the first view (attach mode, or a rank attaching again after it was declared
  # failed). Resent until the root's DetAck arrives.
  detector @0 :UInt32;
  joined @1 :List(UInt32);
}

struct DetAck {
  # FAILURE_DET_ACK / JOIN_DET_ACK: the root has the report of `detector` about
  # these ranks; it stops resending them.
  detector @0 :UInt32;
  ranks @1 :List(UInt32);
}

struct ViewChange {
  # FAILED_NODE and NEW_NODE_JOIN of paper 000 in one message, carrying the whole
  # view rather than the change: a process that missed a change (it was orphaned
  # meanwhile) catches up, and each process finds who left and joined by comparing
  # with the view it held.
  id @0 :UInt64;                 # the view number; 0 is the view at launch
  members @1 :List(UInt32);      # live back-ends, ascending
  epochs @2 :List(Member);       # every back-end whose epoch is above 0
  welcome @3 :Bool;              # to a back-end that rejoined under its old rank,
                                 # from its parent, before it is a member again: the
                                 # view as it stands and the epoch it speaks at now;
                                 # applied without an event and not acknowledged
}

struct ViewAck {
  # FAILURE_ACK: every process of the sender's subtree holds view `id` (or later).
  id @0 :UInt64;
}
