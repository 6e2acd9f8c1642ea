/* canopy-mrnet-bench-lw: the back-end of canopy-mrnet-bench (bench/mrnet_api_bench.cpp)
 * written in C against MRNet 5.0.1's lightweight back-end API only, the kind of
 * back-end MRNet recommends where a back-end lives in every process of a job. The
 * same source builds with MRNet's libmrnet_lightweight and with Canopy's
 * (Canopy::mrnet_lightweight); bench/mrnet_api.sh runs both. It does what
 * bench/mrnet_api_bench_be.cpp does, tag for tag (bench/mrnet_api_protocol.h). */
#include <stdio.h>
#include <stdlib.h>

#include "mrnet_api_protocol.h"

/* Sends one "%d" and flushes; 0 on success. */
static int answer(Stream_t* stream, int tag, int value) {
  if (Stream_send(stream, tag, "%d", value) != 0) return -1;
  return Stream_flush(stream);
}

/* Sends waves 0..waves-1 as fast as the API takes them, with one flush at the end. */
static int stream_waves(Stream_t* stream, int waves) {
  for (int w = 0; w < waves; ++w) {
    if (Stream_send(stream, kTagWave, "%d", w) != 0) return -1;
  }
  return Stream_flush(stream);
}

int main(int argc, char** argv) {
  Network_t* net = Network_CreateNetworkBE(argc, argv);
  if (net == NULL) {
    fprintf(stderr, "canopy-mrnet-bench-lw: Network_CreateNetworkBE failed\n");
    return 1;
  }
  Packet_t* packet = (Packet_t*)malloc(sizeof(Packet_t));
  if (packet == NULL) return 1;
  int status = 0;
  for (int running = 1; running;) {
    int tag = 0;
    Stream_t* stream = NULL;
    if (Network_recv(net, &tag, packet, &stream) != 1) {
      fprintf(stderr, "canopy-mrnet-bench-lw: Network_recv failed\n");
      status = 1;
      break;
    }
    int value = 0;
    if (Packet_unpack(packet, "%d", &value) != 0) {
      fprintf(stderr, "canopy-mrnet-bench-lw: a packet with tag %d is not \"%%d\"\n", tag);
      status = 1;
      break;
    }
    int failed = 0;
    if (tag == kTagEcho) {
      failed = answer(stream, kTagEcho, value);
    } else if (tag == kTagStream) {
      failed = stream_waves(stream, value);
    } else if (tag == kTagExit) {
      failed = answer(stream, kTagExit, 1);
      running = 0;
    } else {
      fprintf(stderr, "canopy-mrnet-bench-lw: unexpected tag %d\n", tag);
      failed = 1;
    }
    if (failed) {
      fprintf(stderr, "canopy-mrnet-bench-lw: send failed\n");
      status = 1;
      break;
    }
  }
  /* The front-end deletes its network once every back-end has answered the exit. */
  if (status == 0) Network_waitfor_ShutDown(net);
  delete_Network_t(net);
  free(packet);
  return status;
}
