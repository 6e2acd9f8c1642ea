/* MRNet's streams in the lightweight C API, on Canopy (docs/mrnet.md). A back-end
 * sees the streams packets came on (Network_recv) and its own per-back-end stream,
 * whose id is its rank; it sends up the stream a packet came on. The stream's
 * upstream filter runs in Canopy's commnodes and front-end, not in the back-end. */
#ifndef CANOPY_MRNET_LIGHTWEIGHT_STREAM_H
#define CANOPY_MRNET_LIGHTWEIGHT_STREAM_H

#include "mrnet_lightweight/Packet.h"
#include "mrnet_lightweight/Types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define INVALID_STREAM_ID ((unsigned int)-1)

/* Owned by its Network_t: valid until delete_Network_t(). */
typedef struct Stream_t Stream_t;

unsigned int Stream_get_Id(Stream_t* stream);

/* Sends a packet of `fmt`'s values up the stream: 0, or -1 if they cannot be
 * packed or the network has stopped. */
int Stream_send(Stream_t* stream, int tag, const char* fmt, ...);
/* Sends `packet`'s values with its tag (Packet_set_Tag) up the stream, whatever
 * stream id the packet names: 0, or -1. The packet stays the caller's. */
int Stream_send_packet(Stream_t* stream, Packet_t* packet);
/* Packets are on their way once sent: 0, or -1 once the network has shut down. */
int Stream_flush(Stream_t* stream);

/* The next packet on this stream, into `packet` (see Packet.h for who owns what);
 * packets of other streams that arrive meanwhile wait for Network_recv. 1: got one;
 * 0: none and `blocking` is false; -1: the network has shut down. */
int Stream_recv(Stream_t* stream, int* tag, Packet_t* packet, bool_t blocking);

/* 1 once the network has shut down (as a receive found); Canopy's streams close
 * only with the network. */
char Stream_is_Closed(Stream_t* stream);

#ifdef __cplusplus
}
#endif

#endif
