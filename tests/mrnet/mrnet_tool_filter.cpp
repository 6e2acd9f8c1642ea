// A filter function written as an MRNet 5.0.1 tool writes one, for the API tests: only
// MRNet's headers, built as MRNet builds filters (-shared, no libraries: the MRN::
// symbols it uses come from the process that loads it).
#include <list>
#include <set>
#include <vector>

#include "mrnet/NetworkTopology.h"
#include "mrnet/Packet.h"

using namespace MRN;

namespace {

// Adds a packet's integers ("%d" from a back-end, "%ad" from a filter below) to `seen`.
bool add(PacketPtr& packet, std::set<int>& seen) {
  if (std::string(packet->get_FormatString()) == "%d") {
    int value = 0;
    if (packet->unpack("%d", &value) != 0) return false;
    seen.insert(value);
    return true;
  }
  int* values = NULL;
  unsigned int count = 0;
  if (packet->unpack("%ad", &values, &count) != 0) return false;
  seen.insert(values, values + count);
  free(values);
  return true;
}

// MRNet gives a filter no way to free its state: the states live for the process,
// in one list, so that they stay reachable (and leak checkers say nothing).
std::list<std::set<int> >& states() {
  static std::list<std::set<int> > all;
  return all;
}

PacketPtr as_packet(const std::set<int>& seen, unsigned int stream, int tag) {
  std::vector<int> values(seen.begin(), seen.end());
  return PacketPtr(new Packet(stream, tag, "%ad", values.data(), static_cast<unsigned int>(values.size())));
}

}  // namespace

extern "C" {

// Every integer seen so far on the stream, as one sorted "%ad": idempotent and
// state-recoverable (SeenUnion_get_state), so that a failure loses nothing.
const char* SeenUnion_format_string = "";

void SeenUnion(std::vector<PacketPtr>& packets_in, std::vector<PacketPtr>& packets_out,
               std::vector<PacketPtr>& /* packets_out_reverse */, void** filter_state, PacketPtr& /* params */,
               const TopologyLocalInfo& /* info */) {
  std::set<int>* seen = static_cast<std::set<int>*>(*filter_state);
  if (!seen) {
    states().push_back(std::set<int>());
    *filter_state = seen = &states().back();
  }
  for (unsigned int i = 0; i < packets_in.size(); i++) {
    if (!add(packets_in[i], *seen)) return;
  }
  packets_out.push_back(as_packet(*seen, packets_in[0]->get_StreamId(), packets_in[0]->get_Tag()));
}

PacketPtr SeenUnion_get_state(void** filter_state, int stream_id) {
  std::set<int> none;
  const std::set<int>* seen = *filter_state ? static_cast<std::set<int>*>(*filter_state) : &none;
  return as_packet(*seen, static_cast<unsigned int>(stream_id), FirstApplicationTag);
}

// Where every node of the stream stands, as TopologyLocalInfo tells it: each adds its
// rank, children, siblings, descendants, leaf descendants, root distance and max leaf
// distance to the "%aud" of the nodes below it (the back-ends' packets add nothing).
const char* Places_format_string = "";

void Places(std::vector<PacketPtr>& packets_in, std::vector<PacketPtr>& packets_out,
            std::vector<PacketPtr>& /* packets_out_reverse */, void** /* filter_state */,
            PacketPtr& /* params */, const TopologyLocalInfo& info) {
  std::vector<unsigned int> all;
  for (unsigned int i = 0; i < packets_in.size(); i++) {
    if (std::string(packets_in[i]->get_FormatString()) != "%aud") continue;
    unsigned int* values = NULL;
    unsigned int count = 0;
    if (packets_in[i]->unpack("%aud", &values, &count) != 0) return;
    all.insert(all.end(), values, values + count);
    free(values);
  }
  const unsigned int mine[] = {info.get_Rank(),          info.get_NumChildren(),
                               info.get_NumSiblings(),   info.get_NumDescendants(),
                               info.get_NumLeafDescendants(), info.get_RootDistance(),
                               info.get_MaxLeafDistance()};
  all.insert(all.end(), mine, mine + 7);
  packets_out.push_back(PacketPtr(new Packet(packets_in[0]->get_StreamId(), packets_in[0]->get_Tag(), "%aud",
                                             all.data(), static_cast<unsigned int>(all.size()))));
}

// Three functions for one stream, each node its own (per-node assignment, as MRNet's
// HeterogeneousFilters example): a back-end multiplies its "%d" by the stream's
// parameter ("%d", 1 before any), a commnode adds 1000 to the sum of its wave, and the
// front-end adds 1 to the sum of its. The result says which ran where.
const char* ScaleAtBackend_format_string = "%d";

void ScaleAtBackend(std::vector<PacketPtr>& packets_in, std::vector<PacketPtr>& packets_out,
                    std::vector<PacketPtr>& /* packets_out_reverse */, void** /* filter_state */, PacketPtr& params,
                    const TopologyLocalInfo& /* info */) {
  int factor = 1;
  if (params != Packet::NullPacket && params->unpack("%d", &factor) != 0) return;
  for (unsigned int i = 0; i < packets_in.size(); i++) {
    int value = 0;
    if (packets_in[i]->unpack("%d", &value) != 0) return;
    packets_out.push_back(PacketPtr(new Packet(packets_in[i]->get_StreamId(), packets_in[i]->get_Tag(), "%d",
                                               value * factor)));
  }
}

static void sum_plus(std::vector<PacketPtr>& packets_in, std::vector<PacketPtr>& packets_out, int plus) {
  int sum = plus;
  for (unsigned int i = 0; i < packets_in.size(); i++) {
    int value = 0;
    if (packets_in[i]->unpack("%d", &value) != 0) return;
    sum += value;
  }
  packets_out.push_back(PacketPtr(new Packet(packets_in[0]->get_StreamId(), packets_in[0]->get_Tag(), "%d", sum)));
}

const char* SumAtCommnode_format_string = "%d";

void SumAtCommnode(std::vector<PacketPtr>& packets_in, std::vector<PacketPtr>& packets_out,
                   std::vector<PacketPtr>& /* packets_out_reverse */, void** /* filter_state */,
                   PacketPtr& /* params */, const TopologyLocalInfo& /* info */) {
  sum_plus(packets_in, packets_out, 1000);
}

const char* SumAtFrontEnd_format_string = "%d";

void SumAtFrontEnd(std::vector<PacketPtr>& packets_in, std::vector<PacketPtr>& packets_out,
                   std::vector<PacketPtr>& /* packets_out_reverse */, void** /* filter_state */,
                   PacketPtr& /* params */, const TopologyLocalInfo& /* info */) {
  sum_plus(packets_in, packets_out, 1);
}

}  // extern "C"
