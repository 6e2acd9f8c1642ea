/* An MRNet tool's lightweight back-end, in C, as tools write them against MRNet
   5.0.1's lightweight API, for the package test: it answers int_add_frontend (the
   tags of tests/mrnet/mrnet_test_protocol.h) and links canopy-mrnet-lightweight
   alone. Its own argument (a directory) is unused; MRNet's five follow it. */
#include <stdio.h>
#include <stdlib.h>

#include "mrnet_lightweight/MRNet.h"

enum { TAG_SUM = FirstApplicationTag, TAG_ECHO, TAG_WHO, TAG_EXIT };

int main(int argc, char** argv) {
  Network_t* net;
  Packet_t* packet;
  Stream_t* stream = NULL;
  Rank rank;
  int tag = 0, value = 0, status = 0;
  if (argc != 7) {
    fprintf(stderr, "int_add_backend_lightweight: expected 1 argument and MRNet's 5, got %d\n", argc - 1);
    return 3;
  }
  net = Network_CreateNetworkBE(argc, argv);
  if (net == NULL) return 2;
  rank = Network_get_LocalRank(net);
  packet = (Packet_t*)malloc(sizeof(Packet_t));
  while (tag != TAG_EXIT) {
    if (Network_recv(net, &tag, packet, &stream) != 1) {
      status = 1;
      break;
    }
    if (tag == TAG_SUM) {
      if (Packet_unpack(packet, "%d", &value) != 0 || Stream_send(stream, TAG_SUM, "%d", value + (int)rank) != 0) {
        status = 1;
        break;
      }
    } else if (tag == TAG_EXIT) {
      if (Stream_send(stream, TAG_EXIT, "%d", 0) != 0) status = 1;
    } else {
      fprintf(stderr, "int_add_backend_lightweight: unknown tag %d\n", tag);
      status = 1;
      break;
    }
    if (Stream_flush(stream) != 0) status = 1;
  }
  Network_waitfor_ShutDown(net);
  delete_Network_t(net);
  free(packet);
  return status;
}
