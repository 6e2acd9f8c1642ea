// Filters written as an MRNet 5.0.1 tool writes them, for the tests of the MRNet filter
// adapter (mrnet_filters_test.cpp). Only MRNet's headers, and built as MRNet builds
// filters: -shared, no libraries (tests/unit/CMakeLists.txt), so that the MRN::
// symbols used here are undefined in it and must come from canopy_mrnet_filters.so.
#include "mrnet/Packet.h"
#include "mrnet/NetworkTopology.h"

#include <list>
#include <vector>

using namespace MRN;

// MRNet gives a filter no way to free its state: the totals live for the process, in
// one list, so that they stay reachable (and leak checkers say nothing).
static std::list<int>& totals() {
  static std::list<int> all;
  return all;
}

extern "C" {

// Integer addition of the wave; *filter_state keeps the total of every wave so far,
// which IntegerSum_get_state gives for recovery.
const char* IntegerSum_format_string = "%d";

void IntegerSum(std::vector<PacketPtr>& packets_in, std::vector<PacketPtr>& packets_out,
                std::vector<PacketPtr>& /* packets_out_reverse */, void** filter_state,
                PacketPtr& /* params */, const TopologyLocalInfo& /* info */) {
  int* total = static_cast<int*>(*filter_state);
  if (total == NULL) {
    totals().push_back(0);
    total = &totals().back();
    *filter_state = total;
  }
  int sum = 0;
  for (unsigned int i = 0; i < packets_in.size(); i++) {
    int value = 0;
    if (packets_in[i]->unpack("%d", &value) == -1) return;
    sum += value;
  }
  *total += sum;
  PacketPtr result(new Packet(packets_in[0]->get_StreamId(), packets_in[0]->get_Tag(), "%d", sum));
  packets_out.push_back(result);
}

PacketPtr IntegerSum_get_state(void** filter_state, int stream_id) {
  int total = *filter_state == NULL ? 0 : *static_cast<int*>(*filter_state);
  return PacketPtr(new Packet(stream_id, FirstApplicationTag, "%d", total));
}

// Takes any format ("") and tells what it was given: the node's rank, its children
// and descendants, the first packet's stream, source and format, how many packets,
// and the integer of its parameters (-1 without any).
const char* Describe_format_string = "";

void Describe(std::vector<PacketPtr>& packets_in, std::vector<PacketPtr>& packets_out,
              std::vector<PacketPtr>& /* packets_out_reverse */, void** /* filter_state */,
              PacketPtr& params, const TopologyLocalInfo& info) {
  int param = -1;
  if (params != Packet::NullPacket && params->unpack("%d", &param) == -1) param = -2;
  PacketPtr first = packets_in[0];
  PacketPtr result(new Packet(first->get_StreamId(), first->get_Tag(), "%ud %ud %ud %ud %ud %ud %d %s",
                              info.get_Rank(), info.get_NumChildren(), info.get_NumDescendants(),
                              first->get_StreamId(), first->get_SourceRank(),
                              static_cast<unsigned int>(packets_in.size()), param, first->get_FormatString()));
  packets_out.push_back(result);
}

// Tells where its node stands: rank, children, siblings, descendants, leaf
// descendants, root distance, max leaf distance.
const char* Place_format_string = "";

void Place(std::vector<PacketPtr>& packets_in, std::vector<PacketPtr>& packets_out,
           std::vector<PacketPtr>& /* packets_out_reverse */, void** /* filter_state */,
           PacketPtr& /* params */, const TopologyLocalInfo& info) {
  packets_out.push_back(PacketPtr(new Packet(packets_in[0]->get_StreamId(), packets_in[0]->get_Tag(),
                                             "%ud %ud %ud %ud %ud %ud %ud", info.get_Rank(), info.get_NumChildren(),
                                             info.get_NumSiblings(), info.get_NumDescendants(),
                                             info.get_NumLeafDescendants(), info.get_RootDistance(),
                                             info.get_MaxLeafDistance())));
}

// Sends its first packet back down, as well as up.
const char* SendBack_format_string = "%d";

void SendBack(std::vector<PacketPtr>& packets_in, std::vector<PacketPtr>& packets_out,
              std::vector<PacketPtr>& packets_out_reverse, void** /* filter_state */,
              PacketPtr& /* params */, const TopologyLocalInfo& /* info */) {
  packets_out.push_back(packets_in[0]);
  packets_out_reverse.push_back(packets_in[0]);
}

// A filter without its required NoFormat_format_string.
void NoFormat(std::vector<PacketPtr>& packets_in, std::vector<PacketPtr>& packets_out,
              std::vector<PacketPtr>& /* packets_out_reverse */, void** /* filter_state */,
              PacketPtr& /* params */, const TopologyLocalInfo& /* info */) {
  packets_out = packets_in;
}

}  // extern "C"
