/* MRNet 5.0.1's lightweight (C) back-end API on Canopy: basic types, version and
 * the performance-data types its headers declare (docs/mrnet.md). Written for
 * Canopy from MRNet's public interface; compiles as C99 and as C++. */
#ifndef CANOPY_MRNET_LIGHTWEIGHT_TYPES_H
#define CANOPY_MRNET_LIGHTWEIGHT_TYPES_H

/* MRNet's headers bring these in (with xplat's), and its tools count on them. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xplat_lightweight/Types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t Rank;
typedef XPlat_Port Port;

/* The packing types' C names, macros in MRNet. */
#ifndef enum_t
#define enum_t int32_t
#endif
#ifndef char_t
#define char_t char
#endif
#ifndef uchar_t
#define uchar_t unsigned char
#endif

/* A rank and a port that name nothing. */
#define UnknownRank ((Rank)-1)
#define UnknownPort ((Port)0)

/* Tags below FirstApplicationTag are MRNet's own; a tool's start there. Canopy
 * carries the lower ones too. */
#define FirstSystemTag 0
#define FirstApplicationTag 100

#define MRNET_VERSION_MAJOR 5
#define MRNET_VERSION_MINOR 0
#define MRNET_VERSION_REV 1

/* The MRNet version this API follows: 5, 0, 1. */
void get_Version(int* major, int* minor, int* revision);

/* MRNet's debug printf: "file:line func(): " then the format and its arguments, to
 * `fp` (stderr if NULL), in one write; returns what fprintf returns. */
int mrn_printf(const char* file, int line, const char* func, FILE* fp, const char* format, ...)
    __attribute__((format(printf, 5, 6)));

/* The settings a front-end's attributes name. */
typedef enum NetworkSettings {
  MRNET_DEBUG_LEVEL = 0,
  MRNET_DEBUG_LOG_DIRECTORY = 1,
  MRNET_COMMNODE_PATH = 2,
  MRNET_FAILURE_RECOVERY = 3,
  XPLAT_RSH = 4,
  XPLAT_RSH_ARGS = 5,
  XPLAT_REMCMD = 6
} net_settings_key_t;

/* Performance data, as MRNet numbers it. Canopy collects none through this API
 * (its own counters are in the status file and the dashboard). */
typedef union {
  int64_t i;
  uint64_t u;
  double d;
} perfdata_t;

typedef enum PerfData_MetricType {
  PERFDATA_TYPE_UINT = 0,
  PERFDATA_TYPE_INT = 1,
  PERFDATA_TYPE_FLOAT = 2
} perfdata_mettype_t;

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
  PERFDATA_PKT_TIMERS_MAX
} perfdata_pkt_timers_t;

typedef enum NodeType {
  NODE_TYPE_FRONTEND = 0,
  NODE_TYPE_BACKEND = 1,
  NODE_TYPE_INTERNALNODE = 2
} node_type_t;

#ifdef __cplusplus
}
#endif

#endif
