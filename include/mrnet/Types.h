// MRNet 5.0.1's basic types, as its tools use them (docs/mrnet.md): part of Canopy's
// MRNet API layer, written for Canopy.
#pragma once

// What MRNet's mrnet/Types.h brings a program, directly or through xplat/Types.h
// and MRNet's other headers: programs written against MRNet use <inttypes.h>'s
// PRIu64, gettimeofday, std::cout, std::list and the like without including them.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <list>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "xplat/Types.h"

namespace MRN {

typedef uint32_t Rank;
typedef XPlat_Port Port;

const Rank UnknownRank = static_cast<Rank>(-1);
const Port UnknownPort = 0;

// Tags below FirstApplicationTag are MRNet's own; a tool's tags start there.
#define FirstSystemTag 0
#define FirstApplicationTag 100

#ifndef MRNET_VERSION_MAJOR
#define MRNET_VERSION_MAJOR 5
#define MRNET_VERSION_MINOR 0
#define MRNET_VERSION_REV 1
#endif

// The MRNet version this layer implements: 5.0.1.
void get_Version(int& major, int& minor, int& revision);
// MRNet's debug output level (0 to 5). Canopy logs to files when CANOPY_LOG_DIR is
// set (docs/mrnet.md); the level is kept and otherwise ignored.
void set_OutputLevel(int level = 1);
// The bounds of the level, and the level set (MRNet's; 1 by default).
extern const int MIN_OUTPUT_LEVEL;  // 0
extern const int MAX_OUTPUT_LEVEL;  // 5
extern int CUR_OUTPUT_LEVEL;
// Where MRNet writes its debug logs; NULL here (Canopy: CANOPY_LOG_DIR).
extern char* MRN_DEBUG_LOG_DIRECTORY;
// MRNet's debug printf: the format and arguments go to `fp` (stderr if NULL) after
// "file:line func(): "; returns what fprintf returns. mrn_printf_init sets where
// output goes when `fp` is NULL.
void mrn_printf_init(FILE* fp);
int mrn_printf(const char* file, int line, const char* func, FILE* fp, const char* format, ...)
    __attribute__((format(printf, 5, 6)));

typedef enum { UNKNOWN_NODE = 0, FE_NODE, BE_NODE, CP_NODE } node_type_t;

// Performance data, as MRNet numbers it. Canopy collects none through this API:
// Network::collect_PerformanceData and the like return false (docs/mrnet.md).
typedef union {
  int64_t i;
  uint64_t u;
  double d;
} perfdata_t;
typedef std::map<Rank, std::vector<perfdata_t> > rank_perfdata_map;

typedef enum PerfData_MetricType { PERFDATA_TYPE_UINT = 0, PERFDATA_TYPE_INT, PERFDATA_TYPE_FLOAT } perfdata_mettype_t;

typedef struct PerfData_MetricInfo {
  const char* name;
  const char* units;
  const char* description;
  perfdata_mettype_t type;
} perfdata_metinfo_t;

typedef enum PerfData_Metric {
  PERFDATA_MET_NUM_BYTES = 0,
  PERFDATA_MET_NUM_PKTS,
  PERFDATA_MET_ELAPSED_SEC,
  PERFDATA_MET_CPU_SYS_PCT,
  PERFDATA_MET_CPU_USR_PCT,
  PERFDATA_MET_MEM_VIRT_KB,
  PERFDATA_MET_MEM_PHYS_KB,
  PERFDATA_MAX_MET
} perfdata_metric_t;

typedef enum PerfData_Context {
  PERFDATA_CTX_NONE = 0,
  PERFDATA_CTX_SEND,
  PERFDATA_CTX_RECV,
  PERFDATA_CTX_FILT_IN,
  PERFDATA_CTX_FILT_OUT,
  PERFDATA_CTX_SYNCFILT_IN,
  PERFDATA_CTX_SYNCFILT_OUT,
  PERFDATA_CTX_PKT_RECV,
  PERFDATA_CTX_PKT_SEND,
  PERFDATA_CTX_PKT_NET_SENDCHILD,
  PERFDATA_CTX_PKT_NET_SENDPAR,
  PERFDATA_CTX_PKT_INT_DATAPAR,
  PERFDATA_CTX_PKT_INT_DATACHILD,
  PERFDATA_CTX_PKT_FILTER,
  PERFDATA_CTX_PKT_RECV_TO_FILTER,
  PERFDATA_CTX_PKT_FILTER_TO_SEND,
  PERFDATA_MAX_CTX
} perfdata_context_t;

typedef enum PerfData_PacketTimers {
  PERFDATA_PKT_TIMERS_RECV = 0,
  PERFDATA_PKT_TIMERS_SEND,
  PERFDATA_PKT_TIMERS_NET_SENDCHILD,
  PERFDATA_PKT_TIMERS_NET_SENDPAR,
  PERFDATA_PKT_TIMERS_INT_DATAPAR,
  PERFDATA_PKT_TIMERS_INT_DATACHILD,
  PERFDATA_PKT_TIMERS_FILTER,
  PERFDATA_PKT_TIMERS_RECV_TO_FILTER,
  PERFDATA_PKT_TIMERS_FILTER_TO_SEND,
  PERFDATA_PKT_TIMERS_FILTER_SYNC,
  PERFDATA_PKT_TIMERS_FILTER_UPDOWN,
  PERFDATA_PKT_TIMERS_MAX
} perfdata_pkt_timers_t;

// The settings CreateNetworkFE's attributes name (as strings: "MRNET_STARTUP_TIMEOUT").
typedef enum NetworkSettings {
  MRNET_DEBUG_LEVEL = 0,
  MRNET_DEBUG_LOG_DIRECTORY,
  MRNET_COMMNODE_PATH,
  MRNET_FAILURE_RECOVERY,
  MRNET_STARTUP_TIMEOUT,
  MRNET_PORT_BASE,
  MRNET_EVENT_WAIT_TIMEOUT_MSEC,
  MRNET_TOPOLOGY_UPDATE_TIMEOUT_MSEC,
  XPLAT_RSH,
  XPLAT_RSH_ARGS,
  XPLAT_REMCMD,
  CRAY_ALPS_APID,
  CRAY_ALPS_APRUN_PID,
  CRAY_ALPS_STAGE_FILES
} net_settings_key_t;

}  // namespace MRN
