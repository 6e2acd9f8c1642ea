/* MRNet's back-end network in the lightweight C API, on Canopy (docs/mrnet.md,
 * decisions 5, 6, 8 and 10).
 *
 *   Packet_t* p = (Packet_t*)malloc(sizeof(Packet_t));
 *   Network_t* net = Network_CreateNetworkBE(argc, argv);
 *   while (Network_recv(net, &tag, p, &stream) == 1) {
 *     Packet_unpack(p, "%d", &x);
 *     Stream_send(stream, tag, "%d", x + 1);
 *     Stream_flush(stream);
 *   }
 *   Network_waitfor_ShutDown(net);
 *   delete_Network_t(net);
 *
 * Every function may be called from any thread. */
#ifndef CANOPY_MRNET_LIGHTWEIGHT_NETWORK_H
#define CANOPY_MRNET_LIGHTWEIGHT_NETWORK_H

#include "mrnet_lightweight/NetworkTopology.h"
#include "mrnet_lightweight/Packet.h"
#include "mrnet_lightweight/Stream.h"
#include "mrnet_lightweight/Types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct Network_t Network_t;

/* Joins the tree as the back-end that MRNet's five trailing arguments name (parent
 * host, parent port, parent rank, own host, own rank, after the tool's own): through
 * the parent Canopy started it under, or, in attach mode, through the attach file
 * the environment variable CANOPY_ATTACH names (the rank from the last argument).
 * NULL, with the reason on stderr, if the arguments are missing or malformed or
 * the tree cannot be joined. */
Network_t* Network_CreateNetworkBE(int argc, char* argv[]);

/* Leaves the tree and frees the network, its streams and the values of the
 * packets it received into (Packet.h). */
void delete_Network_t(Network_t* net);

/* The host name of the back-end's arguments (owned by the network). */
char* Network_get_LocalHostName(Network_t* net);
/* A back-end listens on no port: UnknownPort. */
Port Network_get_LocalPort(Network_t* net);
Rank Network_get_LocalRank(Network_t* net);
/* NULL: the lightweight back-end does not keep the tree's topology. */
NetworkTopology_t* Network_get_NetworkTopology(Network_t* net);

/* 1 once a receive has found that the network shut down. */
char Network_is_ShutDown(Network_t* net);
/* Receives and discards packets until the network shuts down. */
void Network_waitfor_ShutDown(Network_t* net);

/* The next packet on any stream, into `packet` (Packet.h says who owns what), its
 * tag and stream. 1: got one; -1: the network has shut down (or an argument is
 * NULL). Network_recv blocks; Network_recv_nonblock returns 0 if nothing is there. */
int Network_recv(Network_t* net, int* tag, Packet_t* packet, Stream_t** stream);
int Network_recv_nonblock(Network_t* net, int* tag, Packet_t* packet, Stream_t** stream);

/* The stream of id `id`, if a packet has come on it, or the back-end's own
 * per-back-end stream (id = its rank); NULL otherwise. */
Stream_t* Network_get_Stream(Network_t* net, unsigned int id);

/* The layer's own messages (errors on stderr) are printed at level 1 and above,
 * the default; 0 silences them. Levels are clamped to 0..5. */
void Network_set_OutputLevel(int level);
/* Accepted and without effect: Canopy's logs go where CANOPY_LOG_DIR says. */
void Network_set_DebugLogDir(char* dir);

#ifdef __cplusplus
}
#endif

#endif
