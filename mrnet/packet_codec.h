// The MRNet layer's packets as Canopy packets (docs/mrnet.md, decision 1): one value
// per directive, widened without loss where Canopy has no narrower type (%c %hd:
// int32; %uc %uhd: uint32; %ac %auc: bytes; %ahd: int32 array; %auhd: uint32 array),
// in one of two forms:
//   compact      the values alone, when their Canopy types give the format back
//                (canonical_type: "%d %lf %ad"..., single blanks, no %s first);
//   with format  the MRNet format string first, then the values: any other format
//                ("%hd", "%d%d", "%s %d", "%A..."), and filter parameters.
// A packet whose first value is a string has its format first; any other is compact.
#pragma once

#include <optional>
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
  // The strings and arrays given at construction (the packet holds copies), freed
  // with the packet after set_DestroyData(true), as MRNet frees them.
  std::vector<void*> given;
  bool destroy_data = false;
  // At the front-end, the wave it closes (Packet::get_Wave and is_CompleteWave).
  std::optional<std::uint64_t> wave;
  std::uint32_t wave_backends = 0;
  bool complete = true;
};

namespace codec {

// The directives of `format` (split on blanks and '%'), or an error naming the first
// unknown one.
canopy::Result<std::vector<DataType>> parse_format(const std::string& format);

// The directive type that a value of Canopy type `value_index` (in canopy::Value)
// stands for in the compact form ("%d" for int32...).
DataType canonical_type(std::size_t value_index);

enum class Form { compact, with_format };

// The Canopy packet that carries `packet` (tag and values; the stream is the
// caller's): compact where its format allows, or always with its format.
canopy::Packet to_canopy(const Packet& packet, Form form = Form::compact);

// What to_canopy(Packet(format, values, stream, tag)) gives, without the MRNet
// packet in between (Stream::send's path: one allocation less, no copy), or the
// packing error.
canopy::Result<canopy::Packet> pack_canopy(int tag, const char* format, va_list values);

// The MRNet packet a Canopy packet carries, or why it carries none. The second form
// takes the values (a received packet: no copy of its arrays).
canopy::Result<PacketPtr> from_canopy(const canopy::Packet& packet, unsigned int stream_id);
canopy::Result<PacketPtr> from_canopy(canopy::Packet&& packet, unsigned int stream_id);

}  // namespace codec
}  // namespace MRN
