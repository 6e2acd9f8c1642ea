/* MRNet's packets in the lightweight C API, on Canopy (docs/mrnet.md). A packet
 * holds values packed from a format string of MRNet's directives (%c %uc %hd %uhd
 * %d %ud %ld %uld %f %lf %s, arrays %a... with a uint32_t count and %A... with a
 * uint64_t count); Packet_unpack() with the very same format string gives them
 * back, strings and arrays as malloc'd copies the caller frees (arrays of length 0
 * as NULL).
 *
 * Who owns a packet's values:
 *   - new_Packet_t_2() returns a packet that owns them; delete_Packet_t() frees both.
 *   - A Packet_t that Network_recv(), Network_recv_nonblock() or Stream_recv() fills
 *     (typically malloc(sizeof(Packet_t)) by the tool) gets values the layer keeps
 *     for that Packet_t: receiving into it again frees the previous ones, and
 *     delete_Packet_t() or delete_Network_t() frees them. free() of the Packet_t
 *     itself is allowed, as with MRNet; its values are then freed by
 *     delete_Network_t(). Unpack before delete_Network_t().
 * Packet_t may be copied by value; the copy reads the same values and must not
 * outlive them. */
#ifndef CANOPY_MRNET_LIGHTWEIGHT_PACKET_H
#define CANOPY_MRNET_LIGHTWEIGHT_PACKET_H

#include <stdarg.h>

#include "mrnet_lightweight/DataElement.h"
#include "mrnet_lightweight/Types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct Packet_t {
  uint32_t stream_id; /* the MRNet stream it came on or is for */
  int32_t tag;
  Rank src_rank;      /* the back-end or node that sent it; UnknownRank if made here */
  char* fmt_str;      /* its format string, owned by the packet's values */
  void* data;         /* the layer's: the packed values; read them with Packet_unpack() */
} Packet_t;

/* A packet of `fmt`'s values (the arguments after it, as Stream_send takes them),
 * or NULL if they cannot be packed (an unknown directive, a NULL %s or array with
 * a non-zero count; said on stderr). */
Packet_t* new_Packet_t_2(unsigned int stream_id, int tag, const char* fmt, ...);

int Packet_get_Tag(Packet_t* packet);
void Packet_set_Tag(Packet_t* packet, int tag);
unsigned int Packet_get_StreamId(Packet_t* packet);
void Packet_set_StreamId(Packet_t* packet, unsigned int stream_id);
char* Packet_get_FormatString(Packet_t* packet);

/* Unpacks the values into the pointers after `fmt`: 0, or -1 if `fmt` is not the
 * packet's own format string, character for character, or the packet holds none. */
int Packet_unpack(Packet_t* packet, const char* fmt, ...);
int Packet_unpack_valist(Packet_t* packet, va_list args, const char* fmt);

/* Frees the packet and the values it holds (see above); NULL is ignored. */
void delete_Packet_t(Packet_t* packet);

/* Nonzero: the strings (%s) and arrays (a %as array's strings too) new_Packet_t_2
 * was given are free()d by delete_Packet_t, as MRNet does (they must have come from
 * malloc). The packet holds copies of its values: what it frees is the caller's. */
void Packet_set_DestroyData(Packet_t* packet, int destroy);

#ifdef __cplusplus
}
#endif

#endif
