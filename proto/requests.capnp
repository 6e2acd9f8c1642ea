# The request service (services/requests.h): requests from the front-end that every
# node of a subtree carries out and acknowledges. Carried in Message's `service`
# envelope with id 4 and a kind below.
@0xb4b20e96e40445e9;

$import "/capnp/c++.capnp".namespace("canopy::wire::requests");
using Core = import "canopy.capnp";

const serviceId :UInt16 = 4;

enum Kind {
  loadFilter @0;                 # body: LoadFilter
  setParams @1;                  # body: SetParams
  ack @2;                        # body: RequestAck
  setHealing @3;                 # body: SetHealing
  traffic @4;                    # body: TrafficRequest
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
  params @3 :List(Core.Value);
}

struct SetHealing {
  # Down to every process: healing on or off from now on (the front-end's
  # Network::set_healing; core/service_context.h, set_healing). Answered by a
  # RequestAck.
  requestId @0 :UInt64;
  on @1 :Bool;
}

struct TrafficRequest {
  # Down to every process: what it has sent and received (transport/traffic.h).
  # Answered by a RequestAck carrying its subtree's sums.
  requestId @0 :UInt64;
}

struct Traffic {
  # A subtree's traffic: sums over its processes, and the most of any one.
  processes @0 :UInt32;
  bytesSent @1 :UInt64;
  messagesSent @2 :UInt64;
  bytesReceived @3 :UInt64;
  messagesReceived @4 :UInt64;
  mostBytesSent @5 :UInt64;
  mostBytesReceived @6 :UInt64;
}

struct RequestAck {
  # Up the tree once the whole subtree has carried out request `requestId`.
  requestId @0 :UInt64;
  error @1 :Text;                # unused (before `failures`: every failure as text)
  failures @2 :List(Core.Failure);  # empty on success
  traffic @3 :Traffic;           # a traffic request's answer
}
