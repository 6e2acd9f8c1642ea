# The launch service (services/launch.h): progress of the tree's start-up, from the
# processes that connect up to the front-end. Carried in Message's `service`
# envelope with id 1 and a kind below.
@0x90a83a24f49082bc;

$import "/capnp/c++.capnp".namespace("canopy::wire::launch");

const serviceId :UInt16 = 1;

enum Kind {
  launched @0;                   # body: Launched
  ready @1;                      # body: Ready
  launchFailed @2;               # body: LaunchFailed
  listening @3;                  # body: Listening
}

struct Listening {
  # A commnode started in bulk (docs/launch.md) -> parent, forwarded to the
  # front-end: it listens on `port` now, so its children can be started.
  rank @0 :UInt32;
  port @1 :UInt16;
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
