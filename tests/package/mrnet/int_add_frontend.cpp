// An MRNet tool's front-end, as tools write them against MRNet 5.0.1, for the package
// test: built against the installed Canopy (find_package(Canopy), or make and
// pkg-config canopy-mrnet) and run on a topology in MRNet's format.
//
//   int_add_frontend TOPOLOGY BACKEND FILTER_SO NOTE_DIR
//
// Sums "%d" over every back-end (TFILTER_SUM), runs a tool's own filter function
// from FILTER_SO (load_FilterFunc), and shuts the tree down. The back-ends
// (tests/mrnet/mrnet_be.cpp) note how they ended in NOTE_DIR. Exits 0 if every result
// is right.
#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

#include "mrnet/MRNet.h"
#include "../../mrnet/mrnet_test_protocol.h"

using namespace MRN;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s TOPOLOGY BACKEND FILTER_SO NOTE_DIR\n", argv[0]);
    return 2;
  }
  const char* backend_argv[] = {argv[4], NULL};
  Network* net = Network::CreateNetworkFE(argv[1], argv[2], backend_argv);
  if (net->has_Error()) {
    net->print_error("CreateNetworkFE");
    delete net;
    return 1;
  }
  Communicator* all = net->get_BroadcastCommunicator();
  int expected = 0;
  for (CommunicationNode* node : all->get_EndPoints()) expected += 10 + static_cast<int>(node->get_Rank());

  Stream* sum = net->new_Stream(all, TFILTER_SUM, SFILTER_WAITFORALL);
  int tag = 0, total = 0;
  PacketPtr p;
  if (!sum || sum->send(TAG_SUM, "%d", 10) != 0 || sum->flush() != 0 || sum->recv(&tag, p) != 1 ||
      p->unpack("%d", &total) != 0 || total != expected) {
    net->print_error("integer addition");
    std::fprintf(stderr, "sum %d, expected %d\n", total, expected);
    delete net;
    return 1;
  }

  const int filter = net->load_FilterFunc(argv[3], "SeenUnion");
  Stream* seen = filter < 0 ? NULL : net->new_Stream(all, filter, SFILTER_WAITFORALL);
  int* values = NULL;
  unsigned int count = 0;
  if (!seen || seen->send(TAG_SUM, "%d", 0) != 0 || seen->recv(&tag, p) != 1 ||
      p->unpack("%ad", &values, &count) != 0 || count != all->size()) {
    net->print_error("the tool's filter");
    delete net;
    return 1;
  }
  std::free(values);

  if (sum->send(TAG_EXIT, "") != 0 || sum->recv(&tag, p) != 1) {
    net->print_error("exit");
    delete net;
    return 1;
  }
  delete net;
  std::printf("int_add_frontend: %u back-ends, sum %d, union of %u: ok\n", all->size(), total, count);
  return 0;
}
