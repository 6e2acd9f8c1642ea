// MRN::Packet: MRNet 5.0.1's packet, on Canopy (docs/mrnet.md). Values are packed at
// construction from a format string of MRNet's directives (%c %uc %hd %uhd %d %ud %ld
// %uld %f %lf %s, the arrays %a... with a uint32_t count and %A... with a uint64_t
// count); unpack() with the very same format string gives them back, strings and
// arrays as malloc'd copies the caller frees.
#pragma once

#include <boost/shared_ptr.hpp>

#include <cstdarg>
#include <memory>
#include <string>

#include "mrnet/DataElement.h"
#include "mrnet/Types.h"

namespace MRN {

class Packet;
typedef boost::shared_ptr<Packet> PacketPtr;

class Packet {
 public:
  Packet(unsigned int stream_id, int tag, const char* format, ...);
  Packet(const char* format, va_list values, unsigned int stream_id, int tag);
  // One slot per value: a pointer to each scalar, the char* of a %s, and for an array
  // two slots, its pointer then a pointer to its count.
  Packet(unsigned int stream_id, int tag, const void** values, const char* format);
  ~Packet();
  Packet(const Packet&) = delete;
  Packet& operator=(const Packet&) = delete;

  // 0, or -1 if `format` is not the packet's own, character for character.
  int unpack(const char* format, ...);
  int unpack(va_list out, const char* format, bool);

  int get_Tag() const;
  void set_Tag(int tag);
  unsigned int get_StreamId() const;
  void set_StreamId(unsigned int id);
  const char* get_FormatString() const;
  Rank get_SourceRank() const;
  Rank get_InletNodeRank() const;
  // How many values, and the type of each.
  unsigned int get_NumElements() const;
  DataType get_ElementType(unsigned int i) const;

  // A packing error (an unknown directive, a NULL %s): the packet carries nothing.
  bool has_Error() const;

  // True: the strings (%s) and arrays (%a..., %A..., a %as array's strings too)
  // given at construction are free()d with the packet, as MRNet does; they must then
  // have come from malloc. (The packet keeps copies of its values: what it frees is
  // the caller's.)
  void set_DestroyData(bool destroy);

  // Canopy's extension, not in MRNet (docs/mrnet.md, "Waves after a failure"): at
  // the front-end, whether the packet is of a wave that holds every back-end of its
  // stream. A wave that lost back-ends' packets in a failure is delivered as MRNet
  // delivers one, aggregated over those it holds, and says so here: false, with
  // get_WaveBackends() of them. True for a packet of no wave (sent down, or to a
  // back-end). get_Wave() is the wave's number on its stream (each back-end's n-th
  // packet on it is in wave n-1), or -1 for a packet of no wave.
  bool is_CompleteWave() const;
  long long get_Wave() const;
  unsigned int get_WaveBackends() const;

  // Identity, as in MRNet.
  bool operator==(const Packet& other) const { return this == &other; }
  bool operator!=(const Packet& other) const { return this != &other; }

  static PacketPtr NullPacket;

  struct Impl;
  // The layer's own access (mrnet/packet_codec.h).
  Impl& impl() { return *impl_; }
  const Impl& impl() const { return *impl_; }
  explicit Packet(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace MRN
