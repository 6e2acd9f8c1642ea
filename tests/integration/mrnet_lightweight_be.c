/* An MRNet-style back-end written in C against the lightweight API only, for
 * mrnet_lightweight_test.cpp (which holds the protocol's other half: keep the tags
 * and formats below in step with it). It is started with one argument of its own,
 * "myarg", then MRNet's five; it answers what the front-end sends, checks what the
 * API gives it on the way, and on exit writes "$MRNET_LW_TEST_DIR/exit.RANK":
 * "failures=N FIRST-FAILURE". Exit status 0 if every check held, 3 if one failed,
 * 1 if it could not join the tree. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "mrnet_lightweight/MRNet.h"

enum {
  TAG_WAVES = 100,       /* "%d %d" value, n: n waves of "%d" value*i + 1000*rank on that stream */
  TAG_EXIT = 101,        /* reply "%d %s" failures, first failure; then wait for shutdown */
  TAG_WHOAMI = 102,      /* reply "%ud %ud %s %d" stream id, rank, argv[1], argc */
  TAG_ECHO = 103,        /* ECHO_FORMAT: unpacked and sent back with the same format */
  TAG_EMPTY = 104,       /* "": reply "" through new_Packet_t_2 and Stream_send_packet */
  TAG_PROBE = 105,       /* reply "%d" what Network_recv_nonblock returns now */
  TAG_POLL = 106,        /* poll with Network_recv_nonblock; reply "%d %d %ud" its tag, value, stream id */
  TAG_POLLED = 107,      /* "%d": what TAG_POLL waits for */
  TAG_STREAM_RECV = 108, /* "%ud" user stream id: Stream_recv on it; reply "%d %d" its tag and value */
  TAG_ON_USER = 109,     /* "%d": what TAG_STREAM_RECV waits for on the user stream */
  TAG_ON_OWN = 110,      /* "%d": reply "%d" the value on the stream it came on */
  TAG_REUSE = 111,       /* "%d" n: reply "%d" 0 (ready), receive n TAG_BULK into one Packet_t, reply "%ld" heap growth */
  TAG_BULK = 112,        /* "%ac": ballast for TAG_REUSE */
  TAG_TOPOLOGY = 113,    /* reply "%ud %ud %ud %ud %d %s %d" from Network_get_NetworkTopology: nodes, root's
                            rank, own parent's rank, root's subtree height, own node a back-end, own host,
                            the topology string names own rank */
  TAG_SPIN = 114         /* reply as to TAG_EXIT, then sit in while (!Stream_is_Closed(s)) sleep(1), as
                            MRNet's examples do, and end as after TAG_EXIT */
};

#define ECHO_FORMAT \
  "%c %uc %hd %uhd %d %ud %ld %uld %f %lf %s %ac %auc %ahd %auhd %ad %aud %ald %auld %af %alf %as %Ad %Alf"

static int failures = 0;
static char first_failure[256] = "";

static void check(int ok, const char* what) {
  if (ok) return;
  if (failures++ == 0) snprintf(first_failure, sizeof first_failure, "%s", what);
  fprintf(stderr, "mrnet_lightweight_be: check failed: %s\n", what);
}

static void pause_ms(long ms) {
  struct timespec t;
  t.tv_sec = ms / 1000;
  t.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&t, NULL);
}

static long heap_in_use(void) {
#ifdef __GLIBC__
  struct mallinfo2 m = mallinfo2();
  return (long)(m.uordblks + m.hblkhd);
#else
  return 0;
#endif
}

static void echo(Stream_t* stream, Packet_t* p) {
  char c;
  unsigned char uc;
  int16_t hd;
  uint16_t uhd;
  int32_t d;
  uint32_t ud;
  int64_t ld;
  uint64_t uld;
  float f;
  double lf;
  char* s;
  char* ac; uint32_t ac_n;
  unsigned char* auc; uint32_t auc_n;
  int16_t* ahd; uint32_t ahd_n;
  uint16_t* auhd; uint32_t auhd_n;
  int32_t* ad; uint32_t ad_n;
  uint32_t* aud; uint32_t aud_n;
  int64_t* ald; uint32_t ald_n;
  uint64_t* auld; uint32_t auld_n;
  float* af; uint32_t af_n;
  double* alf; uint32_t alf_n;
  char** as; uint32_t as_n;
  int32_t* Ad; uint64_t Ad_n;
  double* Alf; uint64_t Alf_n;
  uint32_t i;
  int x = 0;

  check(strcmp(Packet_get_FormatString(p), ECHO_FORMAT) == 0, "the echo packet's format string");
  check(Packet_unpack(p, "%d", &x) == -1, "unpack with another format fails");
  if (Packet_unpack(p, ECHO_FORMAT, &c, &uc, &hd, &uhd, &d, &ud, &ld, &uld, &f, &lf, &s, &ac, &ac_n, &auc, &auc_n,
                    &ahd, &ahd_n, &auhd, &auhd_n, &ad, &ad_n, &aud, &aud_n, &ald, &ald_n, &auld, &auld_n, &af, &af_n,
                    &alf, &alf_n, &as, &as_n, &Ad, &Ad_n, &Alf, &Alf_n) != 0) {
    check(0, "unpack of every directive");
    return;
  }
  check(ald == NULL && ald_n == 0, "an empty array unpacks as NULL, 0");
  check(Stream_send(stream, TAG_ECHO, ECHO_FORMAT, c, uc, hd, uhd, d, ud, ld, uld, f, lf, s, ac, ac_n, auc, auc_n,
                    ahd, ahd_n, auhd, auhd_n, ad, ad_n, aud, aud_n, ald, ald_n, auld, auld_n, af, af_n, alf, alf_n,
                    as, as_n, Ad, Ad_n, Alf, Alf_n) == 0,
        "Stream_send of every directive");
  check(Stream_flush(stream) == 0, "Stream_flush after the echo");
  /* What unpack gave are the caller's malloc'd copies. */
  free(s); free(ac); free(auc); free(ahd); free(auhd); free(ad); free(aud); free(ald); free(auld); free(af);
  free(alf); free(Ad); free(Alf);
  for (i = 0; i < as_n; ++i) free(as[i]);
  free(as);
}

static void write_exit_file(Rank rank) {
  const char* dir = getenv("MRNET_LW_TEST_DIR");
  char path[4096];
  FILE* out;
  if (!dir) return;
  snprintf(path, sizeof path, "%s/exit.%u", dir, (unsigned)rank);
  out = fopen(path, "w");
  if (!out) return;
  fprintf(out, "failures=%d %s\n", failures, first_failure);
  fclose(out);
}

int main(int argc, char** argv) {
  Packet_t* p = (Packet_t*)malloc(sizeof(Packet_t));
  Packet_t* other = (Packet_t*)malloc(sizeof(Packet_t));
  Network_t* net;
  Stream_t* stream = NULL;
  Stream_t* s2 = NULL;
  Rank rank;
  int tag = 0, t2 = 0, a = 0, b = 0, i, r;
  int major = 0, minor = 0, rev = 0;

  net = Network_CreateNetworkBE(argc, argv);
  if (!net) {
    fprintf(stderr, "mrnet_lightweight_be: Network_CreateNetworkBE failed\n");
    free(p);
    free(other);
    return 1;
  }
  rank = Network_get_LocalRank(net);
  check(argc == 7 && strcmp(argv[1], "myarg") == 0, "argc is the tool's 2 and MRNet's 5");
  check(strcmp(Network_get_LocalHostName(net), argv[argc - 2]) == 0, "the local host name is argv[argc-2]");
  check(rank == (Rank)strtoul(argv[argc - 1], NULL, 10), "the local rank is argv[argc-1]");
  check(Network_get_Stream(net, rank) != NULL, "the per-back-end stream is there from the start");
  check(Network_get_Stream(net, 12345) == NULL, "no stream of an id never seen");
  check(!Network_is_ShutDown(net), "not shut down at the start");
  get_Version(&major, &minor, &rev);
  check(major == 5 && minor == 0 && rev == 1, "get_Version is 5.0.1");

  do {
    if (Network_recv(net, &tag, p, &stream) != 1) {
      check(0, "Network_recv before the exit tag");
      break;
    }
    check(Packet_get_Tag(p) == tag, "Packet_get_Tag is the received tag");
    check(Packet_get_StreamId(p) == Stream_get_Id(stream), "Packet_get_StreamId is the stream's id");
    check(Network_get_Stream(net, Stream_get_Id(stream)) == stream, "Network_get_Stream finds a stream seen");

    switch (tag) {
      case TAG_WAVES:
        check(Packet_unpack(p, "%d %d", &a, &b) == 0, "unpack %d %d");
        for (i = 0; i < b; ++i) {
          check(Stream_send(stream, TAG_WAVES, "%d", a * i + 1000 * (int)rank) == 0, "Stream_send of a wave");
          check(Stream_flush(stream) == 0, "Stream_flush of a wave");
        }
        break;
      case TAG_WHOAMI: {
        /* Made with another tag and stream, then set: the tag set is the one sent. */
        /* Its string is malloc'd: with Packet_set_DestroyData, delete_Packet_t frees it,
         * as MRNet's does. */
        Packet_t* reply = new_Packet_t_2(0, 0, "%ud %ud %s %d", Stream_get_Id(stream), (unsigned)rank,
                                         strdup(argv[1]), argc);
        check(reply != NULL, "new_Packet_t_2");
        if (!reply) break;
        Packet_set_Tag(reply, TAG_WHOAMI);
        Packet_set_StreamId(reply, Stream_get_Id(stream));
        check(Packet_get_Tag(reply) == TAG_WHOAMI && Packet_get_StreamId(reply) == Stream_get_Id(stream),
              "Packet_set_Tag and Packet_set_StreamId");
        Packet_set_DestroyData(reply, 1);
        check(Stream_send_packet(stream, reply) == 0, "Stream_send_packet");
        delete_Packet_t(reply);
        break;
      }
      case TAG_ECHO:
        echo(stream, p);
        break;
      case TAG_EMPTY: {
        Packet_t* reply = new_Packet_t_2(Stream_get_Id(stream), TAG_EMPTY, "");
        check(Packet_unpack(p, "") == 0, "unpack of the empty format");
        check(reply != NULL && Stream_send_packet(stream, reply) == 0, "an empty packet sent");
        delete_Packet_t(reply);
        break;
      }
      case TAG_PROBE:
        r = Network_recv_nonblock(net, &t2, other, &s2);
        check(Stream_send(stream, TAG_PROBE, "%d", r) == 0, "reply to the probe");
        break;
      case TAG_POLL:
        for (i = 0; i < 1000; ++i) { /* at most 10 s */
          r = Network_recv_nonblock(net, &t2, other, &s2);
          if (r != 0) break;
          pause_ms(10);
        }
        check(r == 1, "Network_recv_nonblock gets the packet once it is there");
        a = -1;
        if (r == 1) check(Packet_unpack(other, "%d", &a) == 0, "unpack of the polled packet");
        check(Stream_send(stream, TAG_POLL, "%d %d %ud", r == 1 ? t2 : -1, a, r == 1 ? Stream_get_Id(s2) : 0u) == 0,
              "reply to the poll");
        break;
      case TAG_STREAM_RECV: {
        unsigned int id = 0;
        check(Packet_unpack(p, "%ud", &id) == 0, "unpack of the user stream's id");
        s2 = Network_get_Stream(net, id);
        check(s2 != NULL, "Network_get_Stream of the user stream");
        if (!s2) break;
        r = Stream_recv(s2, &t2, other, 1);
        check(r == 1, "Stream_recv");
        a = -1;
        if (r == 1) check(Packet_unpack(other, "%d", &a) == 0, "unpack of what Stream_recv got");
        check(Stream_send(stream, TAG_STREAM_RECV, "%d %d", r == 1 ? t2 : -1, a) == 0, "reply to the stream recv");
        break;
      }
      case TAG_ON_OWN:
        check(Packet_unpack(p, "%d", &a) == 0, "unpack of the own-stream packet");
        check(Stream_send(stream, TAG_ON_OWN, "%d", a) == 0, "reply on the own stream");
        break;
      case TAG_REUSE: {
        long before;
        int n = 0;
        check(Packet_unpack(p, "%d", &n) == 0, "unpack of the reuse count");
        before = heap_in_use();
        check(Stream_send(stream, TAG_REUSE, "%d", 0) == 0, "ready for the reuse");
        for (i = 0; i < n; ++i) {
          r = Network_recv(net, &t2, other, &s2);
          check(r == 1 && t2 == TAG_BULK, "a ballast packet");
          if (r != 1) break;
        }
        check(Stream_send(stream, TAG_REUSE, "%ld", (int64_t)(heap_in_use() - before)) == 0, "reply to the reuse");
        break;
      }
      case TAG_TOPOLOGY: {
        NetworkTopology_t* top = Network_get_NetworkTopology(net);
        Node_t* root = NetworkTopology_get_Root(top);
        Node_t* self = NetworkTopology_find_Node(top, rank);
        char* text = NetworkTopology_get_TopologyStringPtr(top);
        char me[32], last[32];
        check(top != NULL && root != NULL && self != NULL && text != NULL, "the topology, its root and own node");
        check(NetworkTopology_find_Node(top, 424242) == NULL, "no node of an unknown rank");
        check(NetworkTopology_Node_get_Port(self) == UnknownPort, "ports are unknown");
        snprintf(me, sizeof me, ":%u\n", (unsigned int)rank);     /* a child, then another */
        snprintf(last, sizeof last, ":%u ;", (unsigned int)rank); /* the last child of its parent */
        check(Stream_send(stream, TAG_TOPOLOGY, "%ud %ud %ud %ud %d %s %d", NetworkTopology_get_NumNodes(top),
                          NetworkTopology_Node_get_Rank(root), NetworkTopology_Node_get_Parent(self),
                          NetworkTopology_Node_find_SubTreeHeight(root), NetworkTopology_Node_is_BackEnd(self),
                          self ? NetworkTopology_Node_get_HostName(self) : "",
                          text && (strstr(text, me) || strstr(text, last)) ? 1 : 0) == 0,
              "reply to the topology");
        free(text);
        break;
      }
      case TAG_SPIN:
        check(Stream_send(stream, TAG_SPIN, "%d %s", failures, first_failure) == 0, "reply to the spin");
        check(Stream_flush(stream) == 0, "Stream_flush of the spin reply");
        while (!Stream_is_Closed(stream)) sleep(1);
        tag = TAG_EXIT;
        break;
      case TAG_EXIT:
        check(Stream_send(stream, TAG_EXIT, "%d %s", failures, first_failure) == 0, "reply to the exit");
        check(Stream_flush(stream) == 0, "Stream_flush of the exit reply");
        break;
      default:
        check(0, "a known tag");
        break;
    }
  } while (tag != TAG_EXIT);

  free(p); /* as MRNet's examples do: what it received is freed by delete_Network_t */
  Network_waitfor_ShutDown(net);
  check(Network_is_ShutDown(net) != 0, "shut down after Network_waitfor_ShutDown");
  check(Stream_is_Closed(stream) != 0, "streams closed after the shutdown");
  check(Network_recv(net, &tag, other, &stream) == -1, "Network_recv after the shutdown");
  delete_Packet_t(other);
  delete_Network_t(net);
  write_exit_file(rank);
  return failures == 0 ? 0 : 3;
}
