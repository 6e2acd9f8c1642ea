// MRN::Error: MRNet 5.0.1's error state of a Network or NetworkTopology
// (docs/mrnet.md), on Canopy. Besides MRNet's code, the layer keeps Canopy's own
// explanation (which node, why), printed by perror() and Network::print_error().
#pragma once

#include <string>

#include "mrnet/Types.h"

namespace MRN {

typedef enum { ERR_INFO = 0, ERR_WARN, ERR_ERR, ERR_CRIT, ERR_LEVEL_LAST } ErrorLevel;
typedef enum { ERR_IGNORE = 0, ERR_ALERT, ERR_RETRY, ERR_ABORT, ERR_RESPONSE_LAST } ErrorResponse;
typedef enum {
  ERR_NONE = 0,
  ERR_TOPOLOGY_FORMAT,
  ERR_TOPOLOGY_CYCLE,
  ERR_TOPOLOGY_NOTCONNECTED,
  ERR_NETWORK_FAILURE,
  ERR_FORMATSTR,
  ERR_PACKING,
  ERR_INTERNAL,
  ERR_SYSTEM,
  ERR_CODE_LAST
} ErrorCode;

typedef struct {
  ErrorCode code;
  ErrorLevel level;
  ErrorResponse response;
  const char* msg;
} ErrorDef;

// One entry per code, and a last one for a bad code.
extern ErrorDef errors[];

class Error {
 public:
  Error() = default;
  virtual ~Error() = default;
  bool has_Error() const { return MRN_errno != ERR_NONE; }
  ErrorCode get_Error() const { return MRN_errno; }
  const char* get_ErrorStr(ErrorCode code) const {
    return errors[code < ERR_CODE_LAST ? code : ERR_CODE_LAST].msg;
  }
  // Prints "<str>: <MRNet's message>: <Canopy's explanation>" to stderr.
  void perror(const char* str) const;
  // The layer's own: Canopy's explanation of the last error ("" if none).
  const std::string& error_detail() const { return detail_; }
  // Sets the error (the layer's own; MRNet's takes a printf format).
  void error(ErrorCode code, Rank rank, const char* format, ...) const;

 protected:
  mutable ErrorCode MRN_errno = ERR_NONE;
  mutable std::string detail_;
};

}  // namespace MRN
