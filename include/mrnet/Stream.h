// MRN::Stream: MRNet 5.0.1's stream (docs/mrnet.md), on a Canopy stream. Made by
// Network::new_Stream at the front-end; at a back-end, known once a packet arrives
// on it (Network::recv, Network::get_Stream). Deleting it at the front-end forgets
// it: Canopy streams are never closed (docs/filters.md).
#pragma once

#include <cstdarg>
#include <deque>
#include <set>

#include "mrnet/FilterIds.h"
#include "mrnet/Packet.h"
#include "mrnet/Types.h"

namespace MRN {

// MRNet's stream numbers: its own control streams, and the first of a tool's
// streams (new_Stream numbers from there; a back-end's own stream has its rank).
const unsigned int CTL_STRM_ID = 1u << 30;
const unsigned int INTERNAL_STRM_BASE_ID = CTL_STRM_ID + 1;
const unsigned int TOPOL_STRM_ID = INTERNAL_STRM_BASE_ID;
const unsigned int PORT_STRM_ID = INTERNAL_STRM_BASE_ID + 1;
const unsigned int USER_STRM_BASE_ID = CTL_STRM_ID + 10;

class Network;

typedef enum { FILTER_DOWNSTREAM_TRANS, FILTER_UPSTREAM_TRANS, FILTER_UPSTREAM_SYNC } FilterType;

#define INVALID_STREAM_ID ((unsigned int)-1)

class Stream {
 public:
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Front-end: down to every back-end of the stream; back-end: up. 0, or -1 on a
  // packing error or a stopped network.
  int send(int tag, const char* format, ...);
  int send(const char* format, va_list values, int tag);
  int send(int tag, const void** values, const char* format);
  int send(PacketPtr& packet);
  // Canopy sends at once: 0 unless the network stopped.
  int flush() const;
  // 1 and the packet; 0 if non-blocking and nothing is there; -1 once the network
  // has stopped or failed (Network::print_error says why).
  int recv(int* tag, PacketPtr& packet, bool blocking = true);

  const std::set<Rank>& get_EndPoints() const { return endpoints_; }
  unsigned int get_Id() const { return id_; }
  unsigned int size() const { return static_cast<unsigned int>(endpoints_.size()); }
  bool has_Data();
  // Readable while has_Data() (one byte per packet queued; clear_... empties it).
  int get_DataNotificationFd();
  void clear_DataNotificationFd();
  void close_DataNotificationFd();

  // New parameters for the upstream or downstream filter at every node of the
  // stream, or the time-out in milliseconds ("%ud") of SFILTER_TIMEOUT.
  int set_FilterParameters(FilterType type, const char* format, ...) const;
  int set_FilterParameters(const char* format, va_list values, FilterType type) const;

  // MRNet's performance data is not collected (docs/mrnet.md): these return false,
  // `results` stays empty, and print_PerformanceData says so on stderr, once.
  bool enable_PerformanceData(perfdata_metric_t metric, perfdata_context_t context) { return false; }
  bool disable_PerformanceData(perfdata_metric_t metric, perfdata_context_t context) { return false; }
  bool collect_PerformanceData(rank_perfdata_map& results, perfdata_metric_t metric, perfdata_context_t context,
                               int aggr_filter_id = TFILTER_ARRAY_CONCAT) {
    return false;
  }
  void print_PerformanceData(perfdata_metric_t metric, perfdata_context_t context);

  // Canopy streams stay open while the network runs.
  bool is_Closed() const;

 private:
  friend class Network;
  Stream(Network* network, unsigned int id, unsigned int canopy_id, std::set<Rank> endpoints);
  int send_packet(const Packet& packet);
  // Where this stream's packets go: its one back-end (the front-end's per-back-end
  // stream), else UnknownRank (all of the stream, or up).
  Rank destination() const;

  Network* network_;
  unsigned int id_;
  unsigned int canopy_id_;
  std::set<Rank> endpoints_;
  std::deque<PacketPtr> queue_;  // guarded by the network's receive lock
  int data_fd_[2] = {-1, -1};
};

}  // namespace MRN
