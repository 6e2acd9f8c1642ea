# The Canopy wire protocol. This schema is the specification.
#
# Framing (transport/frame.h): every protocol message is one Cap'n Proto message,
# serialised flat (segment table included) and preceded by an 8-byte little-endian
# header holding the body length in bytes (always a multiple of 8). Readers refuse
# frames larger than the configured maximum (default 64 MiB) and read messages with
# a traversal limit, so a hostile or corrupt frame fails cleanly and closes that
# link only.
#
# Every message carries the sender's rank and incarnation so that, once the tree
# can heal itself, stale and duplicate messages can be recognised and dropped.

@0xc3d1e6a7a1f0b9e5;

$import "/capnp/c++.capnp".namespace("canopy::wire");

const protocolVersion :UInt32 = 1;

enum Role {
  frontend @0;
  commnode @1;
  backend @2;
}

struct Message {
  senderRank @0 :UInt32;
  # Topology rank of the process that wrote this message (not of the original
  # source of a forwarded packet; see DataPacket.sourceRank).

  senderIncarnation @1 :UInt32;
  # Incremented each time the sender is adopted by a new parent; 0 at launch.

  body :union {
    hello @2 :Hello;
    topology @3 :Topology;
    launched @4 :Launched;
    ready @5 :Ready;
    launchFailed @6 :LaunchFailed;
    nodeLost @7 :NodeLost;
    streamCreate @8 :StreamCreate;
    streamAck @9 :StreamAck;
    data @10 :DataPacket;
    shutdown @11 :Shutdown;
    streamError @12 :StreamError;
    loadFilter @13 :LoadFilter;
    setParams @14 :SetParams;
    requestAck @15 :RequestAck;
    adopted @16 :Adopted;
    heartbeat @17 :Void;
    failureReport @18 :FailureReport;
    adoptionReport @19 :AdoptionReport;
    recovered @20 :Recovered;
    streamJoin @21 :StreamCreate;
  }
}

struct Hello {
  # First message on every connection, from the connecting (child) side. The parent
  # closes the connection at once if the version, network id or rank is unexpected.

  protocolVersion @0 :UInt32;   # must equal `protocolVersion` above
  networkId @1 :UInt64;         # random id chosen by the front-end for this tree
  role @2 :Role;                # role of the connecting process
  rank @3 :UInt32;              # its topology rank
  incarnation @4 :UInt32;       # its incarnation number (0 at launch)
  pid @5 :Int32;                # its process id, for logs and diagnostics
  adopt @6 :Bool;               # true: an orphan asking this process to adopt it;
                                # `incarnation` is then its new incarnation number
}

struct Topology {
  # Parent -> child, right after a valid Hello, and again whenever endpoints become
  # known. Every process holds the whole tree.

  nodes @0 :List(Node);         # root first, then breadth-first
  hosts @1 :List(Host);
  startupTimeoutMs @2 :UInt32;  # how long a parent waits for its children
  launcher @3 :Text;            # launcher template for other hosts, e.g. "ssh {host} {command}"
  isUpdate @4 :Bool;            # true: endpoints changed only; do not launch again
  commnodeExe @5 :Text;         # program that runs a commnode on every host
  backendArgv @6 :List(Text);   # back-end program and its arguments
  attachMode @7 :Bool;          # true: back-ends are started by others and attach
                                # (docs/attach.md); parents do not launch them
  faultTolerance @8 :FaultTolerance;
  links @9 :Links;              # tree-wide link settings (docs/topology.md)

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
  }

  struct Host {
    name @0 :Text;
    address @1 :Text;
    nics @2 :List(Text);        # numeric NIC addresses; empty: `address` alone
  }
}

struct Launched {
  # Child -> parent, forwarded to the front-end: process `rank` connected and said
  # hello. Drives the launch progress display and tells the front-end which nodes
  # are up when a launch times out.
  rank @0 :UInt32;
}

struct Ready {
  # Child -> parent once the child's whole subtree is connected.
  endpoints @0 :List(Endpoint);  # listening endpoints of the commnodes in the subtree

  struct Endpoint {
    rank @0 :UInt32;
    port @1 :UInt16;
  }
}

struct LaunchFailed {
  # Child -> parent, forwarded to the front-end: `rank` did not come up.
  rank @0 :UInt32;
  reason @1 :Text;               # e.g. "exited with status 3 before connecting"
}

struct NodeLost {
  # Child -> parent, forwarded to the front-end: a connected process went away.
  rank @0 :UInt32;
  reason @1 :Text;
}

enum SyncMode {
  waitForAll @0;                 # one packet from every participating child per wave
  dontWait @1;                   # every packet is filtered (alone) as it arrives
  timeOut @2;                    # wait-for-all, but a wave closes `syncTimeoutMs` after
                                 # its first packet with whatever has arrived
}

struct StreamCreate {
  # Down the tree, only into subtrees that hold members of the communicator.
  streamId @0 :UInt32;
  backends @1 :List(UInt32);     # the communicator: back-end ranks, ascending
  upstreamFilter @2 :Text;       # name of the filter applied on the way up
  syncMode @3 :SyncMode;
  downstreamFilter @4 :Text;     # name of the filter applied on the way down ("" = none)
  syncTimeoutMs @5 :UInt32;      # for syncMode timeOut
  upstreamParams @6 :List(Value);    # parameters given to the upstream filter's create
  downstreamParams @7 :List(Value);  # and to the downstream filter's
}

struct StreamAck {
  # Up the tree once the whole subtree has created the stream, or with an error.
  streamId @0 :UInt32;
  error @1 :Text;                # "" on success, else what went wrong and where
}

struct DataPacket {
  streamId @0 :UInt32;
  tag @1 :Int32;                 # user-defined; kept through filters
  sourceRank @2 :UInt32;         # the back-end (or front-end) that originated it
  destination @3 :UInt32;        # downstream point-to-point target rank
  pointToPoint @4 :Bool;         # true: route down to `destination` only
  contributors @5 :UInt32;       # number of back-end packets aggregated into this one
  values @6 :List(Value);
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

struct StreamError {
  # Up the tree to the front-end: a filter could not aggregate a wave (for
  # example, sum over strings). The wave is not forwarded; the error says why.
  streamId @0 :UInt32;
  rank @1 :UInt32;               # the node where the filter failed
  message @2 :Text;
}

struct Shutdown {
  # Down the tree: close every stream, shut down children, then exit.
  reason @0 :Text;
}

struct LoadFilter {
  # Down to every process that has children: load filter `name` (symbol
  # canopy_filter_<name>) from the shared object `path`. Answered by a RequestAck.
  requestId @0 :UInt64;
  path @1 :Text;
  name @2 :Text;
}

enum FilterSlot {
  upstream @0;
  sync @1;                       # parameter: the time-out in milliseconds (integer)
  downstream @2;
}

struct SetParams {
  # Down the nodes of a stream: new parameters for one of its filters. Answered by a
  # RequestAck.
  requestId @0 :UInt64;
  streamId @1 :UInt32;
  slot @2 :FilterSlot;
  params @3 :List(Value);
}

struct RequestAck {
  # Up the tree once the whole subtree has carried out request `requestId`.
  requestId @0 :UInt64;
  error @1 :Text;                # "" on success, else every failure with its node
}

struct FaultTolerance {
  # Sent down with the topology: how every process watches its peers and heals.
  enabled @0 :Bool;              # false: losing the parent stops the subtree (issue 2)
  heartbeatMs @1 :UInt32;        # a link idle this long carries a heartbeat
  suspectMs @2 :UInt32;          # a peer silent this long is suspect (logged)
  lostMs @3 :UInt32;             # a peer silent this long is lost (link closed)
  adoptionTimeoutMs @4 :UInt32;  # an orphan gives up (and stops) after this long
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
}

struct AdoptionReport {
  # Floods the tree: `orphan`, at `incarnation`, is now a child of `adopter`.
  # Reports with a lower incarnation than one already applied are ignored.
  orphan @0 :UInt32;
  adopter @1 :UInt32;
  incarnation @2 :UInt32;
}

struct Recovered {
  # Orphan -> front-end (up the tree): the orphan has been adopted and has
  # compensated its lost state. Times in microseconds.
  orphan @0 :UInt32;
  adopter @1 :UInt32;
  failedParent @2 :UInt32;
  incarnation @3 :UInt32;
  chooseUs @4 :UInt64;           # computing the list of potential adopters
  connectUs @5 :UInt64;          # from the parent's loss to acceptance by the adopter
  compensateUs @6 :UInt64;       # sending filter states and held-back output
  cleanupUs @7 :UInt64;          # updating local tables and sending reports
  attempts @8 :UInt32;           # adopters tried
  incompleteStreams @9 :List(UInt32);  # streams whose filters are not state recoverable
}
