/* MRNet's error codes and levels (lightweight C API). The layer reports its own
 * errors on stderr while the output level (Network_set_OutputLevel) is 1 or more. */
#ifndef CANOPY_MRNET_LIGHTWEIGHT_ERROR_H
#define CANOPY_MRNET_LIGHTWEIGHT_ERROR_H

#include "mrnet_lightweight/Types.h"

typedef enum { ERR_INFO, ERR_WARN, ERR_ERR, ERR_CRIT } ErrorLevel;

typedef enum { ERR_IGNORE = 0, ERR_ALERT, ERR_RETRY, ERR_ABORT } ErrorResponse;

typedef enum {
  ERR_NONE = 0,
  ERR_TOPOLOGY_FORMAT,
  ERR_TOPOLOGY_CYCLE,
  ERR_TOPOLOGY_NOTCONNECTED,
  ERR_NETWORK_FAILURE,
  ERR_FORMATSTR,
  ERR_PACKING,
  ERR_INTERNAL,
  ERR_SYSTEM
} ErrorCode;

#endif
