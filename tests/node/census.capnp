# The census service of tests/node/census_service.h: a service of a tool's own, with
# options, messages and a public event, added without touching the core. Carried in
# Message's `service` envelope with id 101 (a tool's own service: 100 and up).
@0xee0b63d721790e43;

$import "/capnp/c++.capnp".namespace("canopy::testing::census");

const serviceId :UInt16 = 101;

struct Options {
  # In the launch plan (Topology.serviceOptions), serialised flat.
  label @0 :Text;               # names the census in its event
  countCommnodes @1 :Bool;      # commnodes count themselves (back-ends and the root
                                # always do)
}

enum Kind {
  ask @0;                       # body: Ask; down, from the root to every process
  count @1;                     # body: Count; up, one per child once its subtree answered
}

struct Ask {
  round @0 :UInt32;
}

struct Count {
  round @0 :UInt32;
  processes @1 :UInt32;         # counted in the sender's subtree, the sender included
}
