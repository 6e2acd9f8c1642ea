// Packet_t of MRNet's lightweight C API over MRN::Packet and its Canopy encoding
// (docs/mrnet.md, decisions 1 and 2): packing and unpacking are MRN::Packet's.
#include <cstdarg>
#include <cstdlib>
#include <string>

#include "mrnet/lightweight/export.h"
#include "mrnet/lightweight/packet_table.h"
#include "mrnet/lightweight/report.h"
#include "mrnet/packet_codec.h"
#include "mrnet_lightweight/Packet.h"

using MRN::lightweight::PacketTable;
using MRN::lightweight::values_of;

extern "C" {

CANOPY_MRNET_LW_EXPORT Packet_t* new_Packet_t_2(unsigned int stream_id, int tag, const char* fmt, ...) {
  if (!fmt) return nullptr;
  va_list values;
  va_start(values, fmt);
  MRN::PacketPtr packet(new MRN::Packet(fmt, values, stream_id, tag));
  va_end(values);
  if (packet->has_Error()) {
    MRN::lightweight::report(std::string("new_Packet_t_2: ") + packet->impl().error);
    return nullptr;
  }
  auto* out = static_cast<Packet_t*>(std::malloc(sizeof(Packet_t)));
  if (!out) return nullptr;
  PacketTable::instance().fill(out, std::move(packet), nullptr);
  return out;
}

CANOPY_MRNET_LW_EXPORT int Packet_get_Tag(Packet_t* packet) { return packet ? packet->tag : 0; }

CANOPY_MRNET_LW_EXPORT void Packet_set_Tag(Packet_t* packet, int tag) {
  if (packet) packet->tag = tag;
}

CANOPY_MRNET_LW_EXPORT unsigned int Packet_get_StreamId(Packet_t* packet) { return packet ? packet->stream_id : 0; }

CANOPY_MRNET_LW_EXPORT void Packet_set_StreamId(Packet_t* packet, unsigned int stream_id) {
  if (packet) packet->stream_id = stream_id;
}

CANOPY_MRNET_LW_EXPORT char* Packet_get_FormatString(Packet_t* packet) { return packet ? packet->fmt_str : nullptr; }

CANOPY_MRNET_LW_EXPORT int Packet_unpack_valist(Packet_t* packet, va_list args, const char* fmt) {
  const MRN::PacketPtr* values = values_of(packet);
  if (!values) return -1;
  return (*values)->unpack(args, fmt, false);
}

CANOPY_MRNET_LW_EXPORT int Packet_unpack(Packet_t* packet, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  const int unpacked = Packet_unpack_valist(packet, args, fmt);
  va_end(args);
  return unpacked;
}

CANOPY_MRNET_LW_EXPORT void delete_Packet_t(Packet_t* packet) {
  if (!packet) return;
  PacketTable::instance().release(packet);
  std::free(packet);
}

// As the C++ layer's: the strings and arrays new_Packet_t_2 was given are freed with
// the packet (delete_Packet_t). A received packet was given none.
CANOPY_MRNET_LW_EXPORT void Packet_set_DestroyData(Packet_t* packet, int destroy) {
  if (const MRN::PacketPtr* values = MRN::lightweight::values_of(packet)) (*values)->set_DestroyData(destroy != 0);
}

}  // extern "C"
