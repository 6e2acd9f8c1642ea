# The stream service (services/streams.h): streams, waves, filters, data up and
# down, point-to-point packets. Carried in Message's `service` envelope with id 3
# and a kind below.
@0xa2825951ab97cf77;

$import "/capnp/c++.capnp".namespace("canopy::wire::streams");
using Core = import "canopy.capnp";

const serviceId :UInt16 = 3;

enum Kind {
  data @0;                       # body: canopy.capnp's DataPacket; up a stream, or
                                 # point-to-point (down, or between back-ends)
  create @1;                     # body: StreamCreate
  ack @2;                        # body: StreamAck
  error @3;                      # body: StreamError
  join @4;                       # body: StreamCreate; orphan -> adopter: add me to this
                                 # stream (and create it here, and above, if it is not)
  resume @5;                     # body: Resume; orphan -> root, forwarded up by each node
  replay @6;                     # body: Replay; root -> an orphan, routed down to it
  broadcast @7;                  # body: Broadcast; down a stream, to all its back-ends
  late @8;                       # body: Late; up to the root: packets dropped because
                                 # their wave had closed
  joined @9;                     # no body; orphan -> adopter, after its joins: it is on
                                 # no other stream (the adopter's waves stop waiting for it)
}

struct Late {
  # Packets a node dropped because their wave had already closed there (a time-out,
  # a loss, or a packet that came after its wave left). Batched for 50 ms per node,
  # like errors; the root adds them up per node (NodeStatus::late_packets).
  streamId @0 :UInt32;
  rank @1 :UInt32;               # the node that dropped them
  count @2 :UInt64;              # how many since its last report
}

struct Broadcast {
  # A packet down a stream to every back-end of it, numbered on the stream by the
  # root. A node takes a stream's broadcasts in this order, once each, and an orphan
  # asks the root again for those after the last it took (Resume). Upstream data
  # does not carry the number: it stays a bare DataPacket.
  seq @0 :UInt64;                # generation << 48 | count, from 1 (services/down_log.h)
  packet @1 :Core.DataPacket;
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
  backends @1 :List(UInt32);     # the communicator: back-end ranks as ascending,
                                 # disjoint ranges, first and last of each (since
                                 # protocol version 13; every rank before)
  upstreamFilter @2 :Text;       # name of the filter applied on the way up
  syncMode @3 :SyncMode;
  downstreamFilter @4 :Text;     # name of the filter applied on the way down ("" = none)
  syncTimeoutMs @5 :UInt32;      # for syncMode timeOut
  upstreamParams @6 :List(Core.Value);    # parameters given to the upstream filter's create
  downstreamParams @7 :List(Core.Value);  # and to the downstream filter's
  upstreamPlugin @8 :Text;       # set by the root when the upstream filter is a plugin
                                 # and state recoverable: the file back-ends load it
                                 # from (they load no plugin otherwise)
  downSeq @9 :UInt64;            # the stream's last broadcast (Broadcast.seq) the
                                 # sender had taken: for `create`, where the new member
                                 # starts; for `join`, the orphan's last
  joiners @10 :Bool;             # the communicator is every back-end, and takes in
                                 # those that join the tree later (open attach) as
                                 # their join reaches each node
  nextWave @11 :UInt64;          # wave numbering (DataPacket.wave): for `create` to a
                                 # back-end that joins or rejoins a running stream, the
                                 # wave it starts at (its parent's lowest open one); for
                                 # `join`, the first wave the orphan will send its adopter
  upstreamFilterAt @13 :List(NodeFilter);  # StreamOptions::upstream_filter_at
  foldState @12 :Bool;           # StreamOptions::fold_state: an orphan's filter state
                                 # joins the adopter's next wave
}

struct NodeFilter {
  # One node's own upstream filter (MRNet's per-node filter assignment).
  rank @0 :UInt32;
  filter @1 :Text;
  plugin @2 :Text;               # a back-end's: the plugin it loads the filter from ("" = built in)
  params @3 :List(Core.Value);   # given to the filter's create
}

struct Resume {
  # An adopted orphan's last broadcast on a stream: the root sends it, as Replay,
  # every broadcast after that one it still keeps (docs/fault-tolerance.md,
  # "Broadcasts across a failure").
  streamId @0 :UInt32;
  orphan @1 :UInt32;             # the orphan's rank (a commnode or a back-end)
  via @2 :UInt32;                # a back-end of the stream at or below the orphan: the
                                 # replay is routed towards it
  after @3 :UInt64;              # the last Broadcast.seq the orphan took
}

struct Replay {
  # Root -> `target`, routed towards back-end `via`: one broadcast again, or the news
  # that those up to `lostUpTo` are no longer kept.
  streamId @0 :UInt32;
  target @1 :UInt32;
  via @2 :UInt32;
  broadcast @3 :Broadcast;       # null with `lostUpTo`
  lostUpTo @4 :UInt64;           # 0, or: the broadcasts after the orphan's last up to
                                 # this one were dropped from the root's bounded log
  reported @5 :Bool;             # with `lostUpTo`: the loss was reported by the node
                                 # above (an orphan passes the notice on to its members
                                 # so that they do not wait for what will not come)
}

struct StreamAck {
  # Up the tree once the whole subtree has created the stream, or with an error.
  streamId @0 :UInt32;
  error @1 :Text;                # unused (before `failures`: every failure as text)
  failures @2 :List(Core.Failure);  # empty on success, else what went wrong and where
}

struct StreamError {
  # Up the tree to the front-end: a filter could not aggregate a wave (for
  # example, sum over strings). The wave is not forwarded; the error says why.
  # Errors alike from several nodes within a short time travel as one (batched for
  # 50 ms at each node: services/streams.h).
  streamId @0 :UInt32;
  rank @1 :UInt32;               # unused (before `failures`: the node)
  message @2 :Text;              # unused (before `failures`: the error)
  failures @3 :List(Core.Failure);  # the errors, and the nodes that reported each
}
