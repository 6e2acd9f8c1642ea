# The Canopy wire protocol. This schema is the specification.
#
# Framing (transport/frame.h): every protocol message is one Cap'n Proto message,
# serialised flat (segment table included) and preceded by an 8-byte little-endian
# header holding the body length in bytes (always a multiple of 8). Readers refuse
# frames larger than the configured maximum (default 64 MiB) and read messages with
# a traversal limit, so a hostile or corrupt frame fails cleanly and closes that
# link only.
#
# This file holds the node core's messages and the types services share (Value,
# DataPacket); each service's own messages are in a schema file of its own
# (launch.capnp, detection.capnp, streams.capnp, requests.capnp, recovery.capnp),
# carried in Message's `service` envelope.

@0xc3d1e6a7a1f0b9e5;

$import "/capnp/c++.capnp".namespace("canopy::wire");

const protocolVersion :UInt32 = 18;
# 2: every service's messages travel in the `service` envelope (docs/protocol.md).
# 3: the gossip table is one compact `entries` field instead of two lists.
# 4: every connection is authenticated: Hello, Challenge, HelloProof
#    (docs/security.md).
# 5: broadcasts are numbered on their stream (streams.capnp, Broadcast), and an
#    adopted orphan gets again those its failed parent had not passed on (Resume
#    and Replay).
# 6: ports learnt after the topology go down as Endpoints, not as a second whole
#    Topology.
# 7: every upstream packet carries its wave number (streams.capnp).
# 8: each service's options travel in the launch plan as an opaque entry
#    (Topology.serviceOptions), which the service encodes itself; the gossip
#    fields of FaultTolerance are unused.
# 9: healing switched on and off while the tree runs (requests.capnp, SetHealing).
# 10: a membership view travels as the change from the one before it, with a digest;
#     a process that missed one asks for the whole view (membership.capnp).
# 11: a back-end receives its part of the tree, not the whole (Topology: `frontier`
#     nodes and view 0's `members`); a reader of 10 would take it for the whole tree.
# 12: a whole membership view travels as ranges of ranks, and its digest is over
#     them (membership.capnp, ViewChange `ranges`).
# 13: a stream's communicator travels as ranges of ranks (streams.capnp,
#     StreamCreate `backends`).
# 14: the topology's nodes travel in columns (Topology `compact`), about 15 bytes a
#     node instead of 69: a whole tree of a million processes fits in a frame.
# 15: commnodes receive their part of the tree, and an orphan's hello carries its
#     subtree and its ancestors (docs/scale.md).
# 16: the topology's columns travel as runs (Topology.Compact `...Runs`).
# 17: the topology carries the range of ports every process listens in
#     (`portsFirst`, `portsLast`).
# 18: the topology's known ports go as runs (Compact `portRuns`, `portValues`), and
#     Endpoints' ranks as runs (`rankRuns`): a back-end's part holds every sibling,
#     none of which listens.

enum Role {
  frontend @0;
  commnode @1;
  backend @2;
}

struct Message {
  # The node core's own messages (the handshake, the tree, the live tree's reports,
  # shutdown) are members of this union; everything else is a service's message in
  # the `service` envelope, and the core never looks inside it.

  senderRank @0 :UInt32;
  # Topology rank of the process that wrote this message (not of the original
  # source of a forwarded packet; see DataPacket.sourceRank).

  senderIncarnation @1 :UInt32;
  # The sender's incarnation when it wrote the message: 0 at launch, then the
  # incarnation of its latest adoption.

  senderEpoch @11 :UInt16;
  # A back-end's member epoch (membership.capnp) when it wrote the message, up to
  # 65535; 0 for other processes. Its parent drops a message below the epoch it
  # knows for the sender (the sender was declared failed). 16 bits so that it fits
  # the header's free bits: every message stays 16 bytes of header.

  body :union {
    hello @2 :Hello;
    topology @3 :Topology;
    adopted @4 :Adopted;
    shutdown @5 :Shutdown;
    failureReport @6 :FailureReport;
    attachReport @7 :AttachReport;
    challenge @12 :Challenge;
    helloProof @13 :HelloProof;
    attachReports @14 :List(AttachReport);
    endpoints @15 :Endpoints;
    # Adoption reports flooded down the tree, several in one message: a node sends
    # its children the reports it learnt in a short window (core/node.h,
    # kNewsWindow) together, so that a storm of adoptions wakes each process a few
    # times rather than once per orphan. Up, and to a newly joined peer,
    # `attachReport` goes one by one and at once.
    service :group {
      # A message of one service to the same service in another process. The rule
      # for a new protocol (docs/protocol.md): choose a free id, write a schema file
      # of its own with an enum of its message kinds and a struct for each, and send
      # them here. A process that has no service with this id drops the message
      # (logged at debug level). The fields are a group, inline in Message, so that
      # reading a service's message costs no more pointer hops than a message of
      # the core's own.
      id @8 :UInt16;
      # Ids in use: 1 launch, 2 detection, 3 streams, 4 requests, 5 recovery,
      # 6 membership; 7-99 reserved for Canopy's own services, 100 and up free for
      # tools and tests.
      kind @9 :UInt16;
      # Which of the service's messages this is: a value of the enum Kind in the
      # service's schema.
      body @10 :AnyPointer;
      # That message's struct, as the service's schema says for this kind (null
      # for a kind that carries nothing).
    }
  }
}

struct Hello {
  # First message on every connection, from the connecting (child) side. The parent
  # closes the connection at once if the version or network id is unexpected, and
  # otherwise answers with a Challenge; the rest of the hello (rank, role, adoption)
  # is looked at only once the HelloProof is right (docs/security.md).

  protocolVersion @0 :UInt32;   # must equal `protocolVersion` above
  networkId @1 :UInt64;         # random id chosen by the front-end for this tree
  role @2 :Role;                # role of the connecting process
  rank @3 :UInt32;              # its topology rank
  incarnation @4 :UInt32;       # its incarnation number (0 at launch)
  pid @5 :Int32;                # its process id, for logs and diagnostics
  adopt @6 :Bool;               # true: an orphan asking this process to adopt it;
                                # `incarnation` is then its new incarnation number
  epoch @7 :UInt32;             # a back-end's member epoch (membership.capnp): one
                                # below the epoch the tree knows for its rank is refused
  nonce @8 :Data;               # 32 random bytes of the connecting side, new for every hello
  standby @9 :Bool;             # true: a standby link (FaultTolerance.standbyLinks): the
                                # acceptor is the sender's first potential adopter and
                                # keeps the proven connection idle; should the sender's
                                # parent fail, it sends on it a second Hello, with `adopt`
                                # and no proof, of the same rank and role
  subtree @10 :Topology;        # with `adopt`, where commnodes hold their part of the tree
                                # (docs/scale.md): the orphan's live subtree, rooted at it
                                # (`compact` and `hosts` only), for an adopter that does not
                                # hold it
  ancestors @11 :List(UInt32);  # with `adopt`: the orphan's ancestors as it last knew them,
                                # from the root down to its failed parent; an adopter that
                                # does not hold the parent checks the deepest it holds
}

struct Challenge {
  # Parent -> child, in answer to a Hello of the right version and network: the
  # parent's nonce, and its proof that it knows the network's secret.

  nonce @0 :Data;               # 32 random bytes, new for every connection
  proof @1 :Data;               # HMAC-SHA256 under the secret of the Hello's nonce, this
                                # nonce and the parent's rank (core/auth.h has the bytes)
}

struct HelloProof {
  # Child -> parent, in answer to a Challenge whose proof is right: the child's proof.
  # A child sends it only to a parent that proved the secret first; a parent looks at
  # nothing of the hello but its version and network id until it is right.

  proof @0 :Data;               # HMAC-SHA256 under the secret of the Challenge's nonce, the
                                # Hello's nonce and every field of the Hello but `pid`
}

struct Topology {
  # Parent -> child, right after a valid Hello. A re-attached front-end receives the
  # whole tree; a commnode and a back-end, the part they need, unless `wholeTree`, or,
  # for a commnode, the fault tolerance's `keepTreeForMs` (docs/scale.md). An orphan's
  # subtree (Hello.subtree) is one too, rooted at the orphan, `compact` and `hosts` only.

  nodes @0 :List(Node);         # unused since version 14 (`compact`)
  hosts @1 :List(Host);
  startupTimeoutMs @2 :UInt32;  # how long a parent waits for its children
  launcher @3 :Text;            # launcher template for other hosts, e.g. "ssh {host} {command}"
  obsoleteIsUpdate @4 :Bool;    # unused since version 6: an update of endpoints is an
                                # Endpoints message, not a whole Topology again
  commnodeExe @5 :Text;         # program that runs a commnode on every host
  backendArgv @6 :List(Text);   # back-end program and its arguments
  attachMode @7 :Bool;          # true: back-ends are started by others and attach
                                # (docs/attach.md); parents do not launch them
  faultTolerance @8 :FaultTolerance;
  links @9 :Links;              # tree-wide link settings (docs/topology.md)
  mrnetBackendArgs @10 :Bool;   # append MRNet's five arguments to each back-end's
                                # command line (docs/mrnet.md): parent host, parent
                                # port, parent rank, own host, own rank
  bulkLaunch @11 :Bool;         # true: the front-end starts every process through the
                                # resource manager, level by level (docs/launch.md);
                                # parents start none and wait for their children
  openAttach @12 :Bool;         # attach mode: back-ends the topology does not name may
                                # join under any commnode, each under a rank of its own
                                # below 1,000,000 (docs/attach.md, "Open attach")
  reattachFile @13 :Text;       # the front-end's re-attach file (keepTreeForMs): a heir
                                # that stops at the end of the grace period removes it
                                # if it finds it, holding this tree's network id
  serviceOptions @14 :List(ServiceOptions);
                                # each service's options for the whole tree, encoded by
                                # the service itself (in its own schema): the core
                                # carries them without looking inside
  members @15 :List(UInt32);    # a back-end's part of the tree (some node is a
                                # `frontier`): the back-ends of view 0 (the launch
                                # topology's), as ranges, first and last rank of each
  wholeTree @16 :Bool;          # every back-end holds the whole tree (MRNet's model;
                                # the gossip detector needs it), not its part
  compact @17 :Compact;         # since version 14: the nodes in columns, about 15
                                # bytes a node where `nodes` took about 69
  portsFirst @18 :UInt16;       # since version 17: every process listens on a port in
  portsLast @19 :UInt16;        # portsFirst..portsLast (`ports:`, canopy run --ports);
                                # any port when portsFirst is 0

  struct Compact {
    # Node i of the tree, root first, then breadth-first: each node's children are
    # the nodes whose parent it is, in the order they come. Since version 16 the
    # columns of ranks, parents, roles, hosts and frontiers go as runs (the `...Runs`
    # fields; `ranks`, `parents`, `roles`, `hostOf` and `frontiers` are unused): a
    # generated tree's children are consecutive ranks of one parent, role and host,
    # so a part of the tree costs a few words per level, not per node.
    ranks @0 :List(UInt32);     # unused since version 16
    parents @1 :List(UInt32);   # unused since version 16
    roles @2 :Data;             # unused since version 16
    hostNames @3 :List(Text);   # the distinct host names
    hostOf @4 :List(UInt32);    # unused since version 16
    ports @5 :List(UInt16);     # unused since version 18 (`portRuns`, `portValues`)
    links @6 :List(NodeLink);   # nodes whose link to their parent is not the default
    frontiers @7 :List(NodeFrontier);  # unused since version 16
    rankRuns @8 :List(UInt32);  # (first rank, count) pairs: the next `count` nodes
                                # have ranks first, first + 1, ...; they give the
                                # number of nodes
    parentRuns @9 :List(UInt32);  # (parent index, count) pairs, from node 1: the next
                                # `count` nodes' parent (below them)
    roleRuns @10 :List(UInt32);   # (Role's ordinal, count) pairs, from node 0
    hostRuns @11 :List(UInt32);   # (index into hostNames, count) pairs, from node 0;
                                # empty: every node is on hostNames[0]
    frontierRuns @12 :List(UInt32);  # (node index, count, height, fanout) quads: those
                                # nodes are held without their children (a part)
    portRuns @13 :List(UInt32); # (first node, count) pairs, ascending and apart: the
                                # nodes whose port is known (not 0)
    portValues @14 :List(UInt16);  # their ports, run by run; every other port is 0

    struct NodeLink {
      node @0 :UInt32;          # index
      kind @1 :LinkKind;
    }
    struct NodeFrontier {
      node @0 :UInt32;          # index: held without its children (a back-end's part)
      height @1 :UInt32;
      fanout @2 :UInt32;
    }
  }

  struct ServiceOptions {
    id @0 :UInt16;              # the service's id (its schema's serviceId)
    bytes @1 :Data;
  }

  enum LinkKind {
    automatic @0;               # striped when both hosts have two NICs or more
    plain @1;
    striped @2;
  }

  enum Checksum {
    crc32c @0;
    additive @1;
    none @2;
  }

  struct Links {
    kind @0 :LinkKind;
    checksum @1 :Checksum;
    reliable @2 :Bool;
    corruptFraction @3 :Float64;  # fault injection; 0 in real use
  }

  struct Node {
    rank @0 :UInt32;
    role @1 :Role;
    host @2 :Text;
    port @3 :UInt16;            # listening port; 0 while unknown
    parent @4 :UInt32;          # ignored for the root
    hasParent @5 :Bool;
    children @6 :List(UInt32);
    hasLink @7 :Bool;           # false: the tree's default kind
    link @8 :LinkKind;          # the link to the parent
    frontier @9 :Bool;          # a commnode held without its children (a back-end's
                                # part of the tree): its height and fan-out at launch
    frontierHeight @10 :UInt32;
    frontierFanout @11 :UInt32;
  }

  struct Host {
    name @0 :Text;
    address @1 :Text;
    nics @2 :List(Text);        # numeric NIC addresses; empty: `address` alone
  }
}

struct Endpoints {
  # Parent -> child, after the Topology: the listening ports of processes that became
  # known later (every commnode's, once all of them listen at launch; a re-attached
  # front-end's). The receiver sets them in its topology and passes the message on
  # to its children. Two lists of the same length, rank by rank. Before version 6 a
  # whole Topology went down again for this: 273 nodes decoded by every process of
  # b:16^2 for 17 ports.

  ranks @0 :List(UInt32);       # unused since version 18 (`rankRuns`)
  ports @1 :List(UInt16);       # the port of each rank of `rankRuns`, in order
  rankRuns @2 :List(UInt32);    # (first rank, count) pairs: consecutive ranks (a
                                # parent's commnodes) cost one pair
}

struct DataPacket {
  streamId @0 :UInt32;
  tag @1 :Int32;                 # user-defined; kept through filters
  sourceRank @2 :UInt32;         # the back-end (or front-end) that originated it
  destination @3 :UInt32;        # downstream point-to-point target rank
  pointToPoint @4 :Bool;         # true: route down to `destination` only
  contributors @5 :UInt32;       # number of back-end packets aggregated into this one
  values @6 :List(Value);
  # Wave identity (upstream, not point-to-point; docs/fault-tolerance.md, "Waves
  # after a failure"). Each back-end numbers its packets on a stream from 0; a node
  # builds a wave from its children's packets of one number, and what the filter
  # makes of it carries that number up. The root calls a wave complete when `held`
  # and `digest` are those of every back-end of the stream in its membership view.
  wave @7 :UInt64;               # the wave's number on its stream
  state @8 :Bool;                # an adopted orphan's filter state (state
                                 # composition): of no wave, filtered on its own
  held @9 :UInt32;               # the back-ends whose packets the wave holds (each
                                 # once; unlike `contributors`, whatever the filter says)
  digest @10 :UInt64;            # sum of waveDigest(rank) over those back-ends, mod 2^64
  more @11 :Bool;                # more packets of this wave follow from the sender
                                 # (a filter that made several of one wave); `held`
                                 # and `digest` count in the last one only
  empty @12 :Bool;               # no packet: the sender's part in wave `wave` gave
                                 # no output (or its filter failed; then held = 0).
                                 # It counts its back-ends and holds no values
  cut @13 :Bool;                 # some node closed the wave without a member that
                                 # owed it a packet (lost, or past a time-out): the
                                 # root flags it incomplete whatever it holds
}

struct Value {
  # One typed value. Arrays keep their element type so that filters and format
  # strings ("%d %lf %ad %s") can check them.
  union {
    int32 @0 :Int32;
    int64 @1 :Int64;
    uint32 @2 :UInt32;
    uint64 @3 :UInt64;
    float32 @4 :Float32;
    float64 @5 :Float64;
    string @6 :Text;
    bytes @7 :Data;
    int32Array @8 :List(Int32);
    int64Array @9 :List(Int64);
    uint32Array @10 :List(UInt32);
    uint64Array @11 :List(UInt64);
    float32Array @12 :List(Float32);
    float64Array @13 :List(Float64);
    stringArray @14 :List(Text);
  }
}

struct Shutdown {
  # Down the tree: close every stream, shut down children, then exit.
  reason @0 :Text;
}

struct FaultTolerance {
  # Sent down with the topology: how every process watches its peers and heals.
  enabled @0 :Bool;              # false: losing the parent stops the subtree (issue 2)
  heartbeatMs @1 :UInt32;        # a link idle this long carries a heartbeat
  suspectMs @2 :UInt32;          # a peer silent this long is suspect (logged)
  lostMs @3 :UInt32;             # a peer silent this long is lost (link closed)
  adoptionTimeoutMs @4 :UInt32;  # an orphan gives up (and stops) after this long
  obsoleteGossipSchedule @5 :UInt8;  # unused since version 8: the gossip service's
  obsoleteGossipPeriodMs @6 :UInt32;  # own options (gossip.capnp, Options)
  obsoleteGossipMaxHangupMs @7 :UInt32;
  obsoleteGossipPingTimeoutMs @8 :UInt32;
  standbyLinks @9 :Bool;         # every process keeps a standby link to its first
                                 # potential adopter (docs/fault-tolerance.md)
  keepTreeForMs @10 :UInt32;     # 0: losing the front-end stops the tree; else its
                                 # grace period (docs/fault-tolerance.md)
}

struct Adopted {
  # Adopter -> orphan, in answer to a Hello with `adopt`: the orphan is now a child.
  adopter @0 :UInt32;
  incarnation @1 :UInt32;        # the orphan's incarnation the adopter recorded
}

struct FailureReport {
  # Floods the tree (each process forwards it to every peer but the sender, if it
  # was news): process `rank` is gone.
  rank @0 :UInt32;
  reason @1 :Text;
  incarnation @2 :UInt32;
  toTheLost @3 :Bool;
  # True when a child sends it to the parent it declared lost (below); a front-end
  # that reads one about itself was taken for lost (stopped too long), and leaves.
  # The incarnation of `rank` the reporter knew: a report about an incarnation the
  # receiver knows was adopted since (a higher one) is stale and ignored. A child
  # that declares its parent lost sends this report about the parent to the parent
  # itself before it leaves: a parent that was only stalled (a zombie) reads it when
  # it wakes, and leaves the tree instead of acting on it (docs/fault-tolerance.md).
}

struct AttachReport {
  # Floods the tree: `orphan`, at `incarnation`, is now a child of `adopter`. Named
  # AdoptionReport before version 8 (the same wire form): it reports every way a rank
  # comes to hang under a parent, an orphan's adoption, a lost back-end's rank back
  # again (rejoin), a back-end joining a running tree (open attach: first as a request
  # with incarnation 0, up to the root, then as the root's answer).
  # Every process applies reports in one total order, whatever order they arrive
  # in: the higher incarnation wins, and at equal incarnations the higher adopter
  # rank (an orphan asks each adopter under a fresh incarnation, so a tie means a
  # forged or buggy report; the order still makes every process agree).
  orphan @0 :UInt32;
  adopter @1 :UInt32;
  incarnation @2 :UInt32;
  orphanIsCommnode @3 :Bool;  # for a back-end holding its part of the tree, which
                              # takes an adopted back-end it does not hold under its
                              # own parent as a sibling (docs/scale.md)
  subtree @4 :Topology;       # going up, where commnodes hold parts: the orphan's subtree,
                              # for the adopter's ancestors up to the first that holds it
                              # (the adopter's parent holds it unless the adopter moved
                              # since the orphan last heard)
}


struct Failure {
  # One failure many nodes may share: a request's or a stream creation's ack carries
  # its subtree's failures grouped by message, so that what 256 commnodes report
  # alike travels, and is shown, once (core/failures.h).
  message @0 :Text;              # what failed, without the node ("cannot load ...")
  ranks @1 :List(UInt32);        # the nodes that reported it, ascending
}
