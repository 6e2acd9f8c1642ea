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
  viewRequest @7;                # body: ViewAck (the view the sender holds); child ->
                                 # parent: a change did not apply to the view the
                                 # sender holds (it missed one), send the whole view
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
  # FAILED_NODE and NEW_NODE_JOIN of paper 000 in one message. Since protocol
  # version 10 a view travels as the change from the view before it (`form` change):
  # who left and joined, the epochs that changed, and a digest of the view after it,
  # which a process that held `base` applies and checks. A process that does not hold
  # `base` (it missed a change while it was cut off), or whose digest differs, asks its
  # parent for the whole view (viewRequest). The whole view (`form` whole) goes to a
  # process that asked, to a child whose view the sender does not know, and in a
  # welcome; an adopted orphan is offered the adopter's view by number and digest
  # (`form` offer) and asks for the whole view only if it holds an older one.
  enum Form {
    whole @0;                    # id, ranges, epochs
    change @1;                   # id, base, left, joined, epochChanges, digest
    offer @2;                    # id, digest
  }
  id @0 :UInt64;                 # the view number; 0 is the view at launch
  ranges @1 :List(UInt32);       # whole: the live back-ends as ascending, disjoint
                                 # ranges, first and last of each (before version 12:
                                 # every member; the digest too is over ranges now)
  epochs @2 :List(Member);       # whole: every back-end whose epoch is above 0
  welcome @3 :Bool;              # to a back-end that rejoined under its old rank,
                                 # from its parent, before it is a member again: the
                                 # view as it stands and the epoch it speaks at now;
                                 # applied without an event and not acknowledged
  form @4 :Form;
  base @5 :UInt64;               # change: the view it applies to
  left @6 :List(UInt32);         # change: members of `base` not in `id`
  joined @7 :List(UInt32);       # change: members of `id` not in `base`
  epochChanges @8 :List(Member); # change: back-ends whose epoch changed, with the new one
  digest @9 :UInt64;             # change, offer: of view `id` (membership/membership.h)
}

struct ViewAck {
  # FAILURE_ACK: every process of the sender's subtree holds view `id` (or later).
  id @0 :UInt64;
}
