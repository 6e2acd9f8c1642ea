# The event detection service (services/detection.h): heartbeats on idle links, and
# losses of running processes reported up to the front-end. Carried in a
# ServiceMessage with service id 2.
@0x9302cb2740c61720;

$import "/capnp/c++.capnp".namespace("canopy::wire::detection");

const serviceId :UInt16 = 2;

struct DetectionMessage {
  union {
    heartbeat @0 :Void;          # sent on a link idle for a heartbeat interval
    nodeLost @1 :NodeLost;
  }
}

struct NodeLost {
  # Child -> parent, forwarded to the front-end: a connected process went away.
  rank @0 :UInt32;
  reason @1 :Text;
}
