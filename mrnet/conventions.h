// How the MRNet layer maps MRNet's streams and filters onto Canopy's (docs/mrnet.md,
// decisions 3 to 5). One place, shared by the C++ front-end and back-end, the
// lightweight C back-end and the filter plug-in, so that they agree.
#pragma once

#include <cstdint>
#include <string>

#include "canopy/packet.h"
#include "mrnet/FilterIds.h"
#include "mrnet/Stream.h"

namespace MRN::layer {

// The Canopy stream that carries MRNet's per-back-end streams (id = the back-end's
// rank): the front-end creates it first, over every back-end, with the `pass` filter
// and dont_wait. Canopy numbers streams from 1 in creation order.
inline constexpr canopy::StreamId kPerBackendStream = 1;

// MRNet numbers its user streams from 2^30 + 10.
inline constexpr unsigned int kUserStreamBase = USER_STRM_BASE_ID;

// The MRNet stream id of a packet on Canopy stream `id`; `backend` is the back-end at
// the other end of a per-back-end stream (the sender at the front-end, the receiver
// itself at a back-end).
inline unsigned int mrnet_stream_id(canopy::StreamId id, canopy::Rank backend) {
  return id == kPerBackendStream ? backend : kUserStreamBase + (id - kPerBackendStream - 1);
}
// The Canopy stream of a user stream's MRNet id (>= kUserStreamBase).
inline canopy::StreamId canopy_stream_id(unsigned int mrnet_id) {
  return mrnet_id - kUserStreamBase + kPerBackendStream + 1;
}
inline bool is_user_stream_id(unsigned int mrnet_id) { return mrnet_id >= kUserStreamBase; }

// The plug-in that runs MRNet filters inside Canopy's nodes: its file name, installed
// next to the layer's library, and the Canopy filter names it exports.
inline constexpr const char* kFilterPlugin = "canopy_mrnet_filters.so";
// Built-in transformation filters: "mrnet_sum", "mrnet_avg", "mrnet_max", "mrnet_min",
// "mrnet_array_concat", "mrnet_int_eq_class". TFILTER_NULL is Canopy's own "pass".
// Returns "" for an id that is not built in.
inline std::string builtin_filter_name(FilterId id) {
  switch (id) {
    case TFILTER_NULL: return "pass";
    case TFILTER_SUM: return "mrnet_sum";
    case TFILTER_AVG: return "mrnet_avg";
    case TFILTER_MAX: return "mrnet_max";
    case TFILTER_MIN: return "mrnet_min";
    case TFILTER_ARRAY_CONCAT: return "mrnet_array_concat";
    case TFILTER_INT_EQ_CLASS: return "mrnet_int_eq_class";
    default: return "";
  }
}
// The adapter for a tool's own filter function (Network::load_FilterFunc): Canopy
// filter "mrnet_function", or "mrnet_function_recoverable" when the tool's shared
// object also exports NAME_get_state. Its parameters (Canopy packet, tag 0):
//   [0] string: the shared object's path, [1] string: the function's name,
//   [2...] the MRNet packet given by Stream::set_FilterParameters, as
//          mrnet/packet_codec.h encodes it with its format (Form::with_format:
//          the format string first, even when empty), or nothing.
inline constexpr const char* kFunctionFilter = "mrnet_function";
inline constexpr const char* kRecoverableFunctionFilter = "mrnet_function_recoverable";

}  // namespace MRN::layer
