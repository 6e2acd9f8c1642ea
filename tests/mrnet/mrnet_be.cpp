// An MRNet-style back-end, as tools write them against MRNet 5.0.1's API; built
// against Canopy's MRNet layer. argv[1] is a directory where it notes how it ended.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mrnet/MRNet.h"
#include "mrnet_test_protocol.h"

using namespace MRN;

namespace {

void note(const char* dir, Rank rank, const std::string& text) {
  std::string path = std::string(dir) + "/be-" + std::to_string(rank);
  if (FILE* f = std::fopen(path.c_str(), "w")) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
}

// Unpacks every directive and sends the values back on `stream`.
int echo(Stream* stream, PacketPtr& p) {
  char c; unsigned char uc; short hd; unsigned short uhd; int d; unsigned int ud; long ld; unsigned long uld;
  float f; double lf; char* s;
  char* ac; unsigned char* auc; short* ahd; unsigned short* auhd; int* ad; unsigned int* aud; long* ald;
  unsigned long* auld; float* af; double* alf; char** as;
  unsigned int nac, nauc, nahd, nauhd, nad, naud, nald, nauld, naf, nalf, nas;
  if (p->unpack(EVERY_DIRECTIVE, &c, &uc, &hd, &uhd, &d, &ud, &ld, &uld, &f, &lf, &s, &ac, &nac, &auc, &nauc, &ahd,
                &nahd, &auhd, &nauhd, &ad, &nad, &aud, &naud, &ald, &nald, &auld, &nauld, &af, &naf, &alf, &nalf, &as,
                &nas) != 0) {
    return -1;
  }
  int r = stream->send(TAG_ECHO, EVERY_DIRECTIVE, c, uc, hd, uhd, d, ud, ld, uld, f, lf, s, ac, nac, auc, nauc, ahd,
                       nahd, auhd, nauhd, ad, nad, aud, naud, ald, nald, auld, nauld, af, naf, alf, nalf, as, nas);
  std::free(s);
  std::free(ac); std::free(auc); std::free(ahd); std::free(auhd); std::free(ad); std::free(aud);
  std::free(ald); std::free(auld); std::free(af); std::free(alf);
  for (unsigned int i = 0; i < nas; ++i) std::free(as[i]);
  std::free(as);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  // MRNet appends five arguments to the tool's own: this back-end has one.
  if (argc != 7) {
    std::fprintf(stderr, "mrnet_be: expected 1 argument and MRNet's 5, got %d\n", argc - 1);
    return 3;
  }
  const char* dir = argv[1];
  Network* net = Network::CreateNetworkBE(argc, argv);
  if (net->has_Error()) {
    net->print_error("mrnet_be: CreateNetworkBE");
    return 2;
  }
  const Rank rank = net->get_LocalRank();
  if (std::strtoul(argv[argc - 1], nullptr, 10) != rank) {
    note(dir, rank, "rank argument differs from get_LocalRank");
    return 4;
  }
  std::string outcome = "ok";
  int tag = 0;
  PacketPtr p;
  Stream* stream = nullptr;
  while (tag != TAG_EXIT) {
    if (net->recv(&tag, p, &stream) != 1) {
      outcome = "recv failed";
      break;
    }
    int r = 0;
    if (tag == TAG_SUM) {
      int value = 0;
      r = p->unpack("%d", &value) == 0 ? stream->send(TAG_SUM, "%d", value + static_cast<int>(rank)) : -1;
    } else if (tag == TAG_WAVES) {
      int value = 0, waves = 0;
      r = p->unpack("%d %d", &value, &waves);
      for (int i = 0; r == 0 && i < waves; ++i) r = stream->send(TAG_WAVES, "%d", value * i);
    } else if (tag == TAG_ECHO) {
      r = echo(stream, p);
    } else if (tag == TAG_WHO) {
      r = stream->send(TAG_WHO, "%ud %ud %s", rank, stream->get_Id(), argv[1]);
    } else if (tag == TAG_TOPOLOGY) {
      unsigned int asked = 0;
      NetworkTopology* topology = net->get_NetworkTopology();
      NetworkTopology::Node* self = topology ? topology->find_Node(rank) : nullptr;
      r = p->unpack("%ud", &asked) != 0 || !topology
              ? -1
              : stream->send(TAG_TOPOLOGY, "%ud %ud %ud %ud %ud", rank, topology->get_NumNodes(),
                             topology->num_BackEndNodes(), self ? self->get_Parent() : UnknownRank,
                             topology->node_Failed(asked) ? 1u : 0u);
    } else if (tag == TAG_EXIT) {
      r = stream->send(TAG_EXIT, "%d", 0);
    } else if (tag == TAG_SPIN) {
      if (stream->send(TAG_SPIN, "%d", 0) != 0 || stream->flush() != 0) {
        outcome = "send failed on tag " + std::to_string(tag);
        break;
      }
      while (!stream->is_Closed()) sleep(1);
      break;
    } else {
      outcome = "unknown tag " + std::to_string(tag);
      break;
    }
    if (r != 0 || stream->flush() != 0) {
      outcome = "send failed on tag " + std::to_string(tag);
      break;
    }
  }
  net->waitfor_ShutDown();
  // The note's second line: why the network stopped, as the back-end was told.
  const std::string why = net->error_detail();
  delete net;
  note(dir, rank, outcome + "\n" + why);
  return outcome == "ok" ? 0 : 1;
}
