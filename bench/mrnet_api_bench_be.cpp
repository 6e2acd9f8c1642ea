// canopy-mrnet-bench-be: the back-end of canopy-mrnet-bench (bench/mrnet_api_bench.cpp),
// written against MRNet 5.0.1's API only, so that the same source builds with MRNet
// and with Canopy's MRNet layer (bench/mrnet_api.sh runs both).
//
// It takes no argument of its own: the launcher appends MRNet's five (parent host,
// port and rank, own host and rank). It answers what the front-end sends on the sum
// stream (bench/mrnet_api_protocol.h) until told to exit, then waits for the tree to
// be shut down.
#include <cstdio>

#include "mrnet/MRNet.h"
#include "mrnet_api_protocol.h"

using namespace MRN;

namespace {

// Sends one "%d" and flushes; false on failure.
bool answer(Stream* stream, int tag, int value) {
  return stream->send(tag, "%d", value) == 0 && stream->flush() == 0;
}

// Sends waves 0..waves-1 as fast as the API takes them, with one flush at the end:
// MRNet queues each packet for its sending thread, Canopy sends at once.
bool stream_waves(Stream* stream, int waves) {
  for (int w = 0; w < waves; ++w) {
    if (stream->send(kTagWave, "%d", w) != 0) return false;
  }
  return stream->flush() == 0;
}

}  // namespace

int main(int argc, char** argv) {
  Network* net = Network::CreateNetworkBE(argc, argv);
  if (!net || net->has_Error()) {
    if (net) net->print_error("canopy-mrnet-bench-be: CreateNetworkBE");
    return 1;
  }
  int status = 0;
  for (bool running = true; running;) {
    int tag = 0;
    PacketPtr packet;
    Stream* stream = NULL;
    if (net->recv(&tag, packet, &stream) != 1) {
      net->print_error("canopy-mrnet-bench-be: recv");
      status = 1;
      break;
    }
    int value = 0;
    if (packet->unpack("%d", &value) != 0) {
      std::fprintf(stderr, "canopy-mrnet-bench-be: a packet with tag %d is not \"%%d\"\n", tag);
      status = 1;
      break;
    }
    bool ok = true;
    if (tag == kTagEcho) {
      ok = answer(stream, kTagEcho, value);
    } else if (tag == kTagStream) {
      ok = stream_waves(stream, value);
    } else if (tag == kTagExit) {
      ok = answer(stream, kTagExit, 1);
      running = false;
    } else {
      std::fprintf(stderr, "canopy-mrnet-bench-be: unexpected tag %d\n", tag);
      ok = false;
    }
    if (!ok) {
      net->print_error("canopy-mrnet-bench-be: send");
      status = 1;
      break;
    }
  }
  // The front-end deletes its network once every back-end has answered the exit.
  if (status == 0) net->waitfor_ShutDown();
  delete net;
  return status;
}
