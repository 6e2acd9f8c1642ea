// Waves of MRNet packets inside Canopy's filter ABI (docs/mrnet.md, decisions 1 and 3):
// the Canopy packets a node gives a filter, decoded into MRN::Packets, and MRNet
// packets encoded back. Shared by the built-in filters and the function adapter of
// canopy_mrnet_filters.so.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "canopy/packet.h"
#include "canopy/result.h"
#include "mrnet/Packet.h"

namespace canopy::mrnet_filters {

// "packet 2 of 3 (from rank 5)": where a packet sits in its wave, for error messages.
std::string position(std::size_t index, std::size_t count, const Packet& packet);

// The MRNet packets `wave` carries, in order, each with the MRNet stream id of Canopy
// stream `stream` (0: stream id 0, for filters that do not look at it) and its
// sender as source rank. An error names `filter` and the packet that is not an MRNet
// packet.
Result<std::vector<MRN::PacketPtr>> decode_wave(std::string_view filter, std::span<const Packet> wave,
                                                StreamId stream);

// The Canopy packet of an MRNet packet built of `format` and its values, already in
// the types that carry them (mrnet/packet_codec.h). `format` must parse.
Packet encode(int tag, const std::string& format, std::vector<Value> values);

}  // namespace canopy::mrnet_filters
