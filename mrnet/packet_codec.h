// The MRNet layer's packets as Canopy packets (docs/mrnet.md, decision 1): the MRNet
// format string first, then one value per directive, widened without loss where
// Canopy has no narrower type (%c %hd: int32; %uc %uhd: uint32; %ac %auc: bytes;
// %ahd: int32 array; %auhd: uint32 array).
#pragma once

#include <string>
#include <vector>

#include "canopy/packet.h"
#include "mrnet/Packet.h"

namespace MRN {

struct Packet::Impl {
  std::string format;
  std::vector<DataType> types;
  std::vector<canopy::Value> values;
  int tag = 0;
  unsigned int stream_id = 0;
  Rank source = UnknownRank;
  Rank inlet = UnknownRank;
  std::string error;  // "" unless packing failed
};

namespace codec {

// The directives of `format` (split on blanks and '%'), or an error naming the first
// unknown one.
canopy::Result<std::vector<DataType>> parse_format(const std::string& format);

// The Canopy packet that carries `packet` (tag and values; the stream is the caller's).
canopy::Packet to_canopy(const Packet& packet);

// What to_canopy(Packet(format, values, stream, tag)) gives, without the MRNet
// packet in between (Stream::send's path: one allocation less, no copy), or the
// packing error.
canopy::Result<canopy::Packet> pack_canopy(int tag, const char* format, va_list values);

// The MRNet packet a Canopy packet carries, or why it carries none.
canopy::Result<PacketPtr> from_canopy(const canopy::Packet& packet, unsigned int stream_id);

}  // namespace codec
}  // namespace MRN
