# The event detection service (services/detection.h): heartbeats on idle links, and
# losses of running processes reported up to the front-end. Carried in Message's
# `service` envelope with id 2 and a kind below.
@0x9302cb2740c61720;

$import "/capnp/c++.capnp".namespace("canopy::wire::detection");

const serviceId :UInt16 = 2;

enum Kind {
  heartbeat @0;                  # no body; sent on a link idle for a heartbeat interval
  nodeLost @1;                   # body: NodeLost
}

struct NodeLost {
  # Child -> parent, forwarded to the front-end: a connected process went away.
  rank @0 :UInt32;
  reason @1 :Text;
}
