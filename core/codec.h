// Conversions between Canopy's C++ types and their wire form (proto/canopy.capnp).
//
// Decoders read untrusted input: Cap'n Proto throws kj::Exception on a malformed
// message, which the link turns into "bad frame" and closes that link only.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "canopy.capnp.h"
#include "canopy/packet.h"
#include "canopy/topology.h"
#include "core/plan.h"
#include "core/rank_set.h"

namespace canopy::core {

struct NodeIdentity;

// The part of a hello that says who sends it (the handshake adds the nonce, and the
// services what they vouch for): version, network, role, rank, `incarnation`, pid.
void init_hello(wire::Hello::Builder hello, const NodeIdentity& self, std::uint32_t incarnation);

void encode_packet(const Packet& packet, wire::DataPacket::Builder out);
Packet decode_packet(wire::DataPacket::Reader in);

// The bytes of the packet's values (at least what it takes on the wire), and the
// error for a packet whose values alone pass the frame limit: refused at the sender,
// with the size and the limit, rather than sent and refused by the receiver, which
// would close the link (docs/protocol.md, "Resource bounds").
std::size_t packet_payload_bytes(const Packet& packet);
std::optional<std::string> oversized(const Packet& packet);

// Filter parameters travel as a bare list of values (tag 0).
void encode_values(const std::vector<Value>& values, capnp::List<wire::Value>::Builder out);
Packet decode_values(capnp::List<wire::Value>::Reader in);

void encode_topology(const Topology& topology, wire::Topology::Builder out);
// Validates as Topology::make does; a peer sending an invalid tree is an error.
Result<Topology> decode_topology(wire::Topology::Reader in);
// An orphan's subtree (Topology::make_subtree), encoded by encode_topology().
Result<Topology> decode_subtree(wire::Topology::Reader in);

// The launch plan travels with the topology. Decoding clamps the fault-tolerance
// thresholds to sane minima (heartbeat 10 ms, suspect 20 ms, lost 30 ms). To a
// process that launches nothing (`launches` false: a back-end), what only a launcher
// reads does not go: the launcher's command, the commnode's path, the back-end's
// command line and the re-attach file (about 100 bytes on the wire, and 134 held).
void encode_plan(const LaunchPlan& plan, wire::Topology::Builder out, bool launches = true);
// The most members view 0 may have: a parent sending more is refused (it would
// cost every back-end 4 bytes each). The same bound holds for any view and any
// stream's communicator a parent sends (a program may list every member).
inline constexpr std::uint64_t kMaxViewZero = std::uint64_t{1} << 24;
// The most nodes a topology from a parent may have: 2,097,152, twice a tree of 10^6
// back-ends. It goes as runs (protocol 16), where a few words could otherwise stand
// for billions of nodes; a reader of this many holds about 200 MB while it decodes.
inline constexpr std::size_t kMaxTopologyNodes = std::size_t{1} << 21;
Result<LaunchPlan> decode_plan(wire::Topology::Reader in);
// Sets the topology message's view 0 (LaunchPlan::view_zero), as encode_plan does.
void encode_view_zero(const std::vector<std::pair<Rank, Rank>>& ranges, wire::Topology::Builder out);
// View 0's members as ranges (LaunchPlan::view_zero), and back.
std::vector<std::pair<Rank, Rank>> rank_ranges(const std::vector<Rank>& ascending);
// Ranks as (first rank, count) runs of consecutive ranks (Endpoints.rankRuns), and
// `expected` ranks back from such runs: false if they
// are not pairs, a count is 0, a run passes the largest rank, or they make another
// number of ranks.
std::vector<std::uint32_t> rank_runs(const std::vector<Rank>& ranks);
bool expand_rank_runs(capnp::List<std::uint32_t>::Reader runs, std::size_t expected, std::vector<Rank>& out);
// What an `endpoints` message says, (rank, port) in its order; false if its ranks
// are not runs of as many ranks as it has ports.
bool read_endpoints(wire::Endpoints::Reader in, std::vector<std::pair<Rank, std::uint16_t>>& out);
// A struct of a message received, copied into flat words of its own, to be kept after
// the frame it came in is gone (read back with capnp::FlatArrayMessageReader).
template <typename Reader>
kj::Array<capnp::word> flat_copy(Reader reader) {
  capnp::MallocMessageBuilder copy(reader.totalSize().wordCount + 1);
  copy.setRoot(reader);
  return capnp::messageToFlatArray(copy);
}
std::vector<Rank> expand_ranges(const std::vector<std::pair<Rank, Rank>>& ranges);
// Ranks on the wire as ranges (a membership view, a stream's communicator, view 0):
// the first and last rank of each, in one list of 2 × ranges (`out` is that long).
void write_ranges(const std::vector<std::pair<Rank, Rank>>& ranges, capnp::List<std::uint32_t>::Builder out);
// Ascending, disjoint ranges from such a list; false if it is not that.
bool read_ranges(capnp::List<std::uint32_t>::Reader in, RankSet& out);

wire::Role to_wire(Role role);
Role from_wire(wire::Role role);

}  // namespace canopy::core
