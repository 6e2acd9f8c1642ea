// The adapter that runs an unchanged MRNet filter function inside Canopy's nodes
// (docs/mrnet.md, decision 3): Canopy filters `mrnet_function` and
// `mrnet_function_recoverable` (mrnet/conventions.h), one instance per stream and node.
//
// What a tool's shared object provides, as for MRNet's Network::load_FilterFunc:
//   extern "C" void NAME(std::vector<PacketPtr>& in, std::vector<PacketPtr>& out,
//                        std::vector<PacketPtr>& out_reverse, void** state,
//                        PacketPtr& params, const TopologyLocalInfo& info);
//   extern "C" const char* NAME_format_string;   // required; "" (or NULL): any format
//   extern "C" PacketPtr NAME_get_state(void** state, int stream_id);  // optional
// mrnet_function_recoverable needs NAME_get_state and uses it as Canopy's
// extract_state, so that the stream's aggregate survives failures.
//
// MRNet builds such objects `-shared` without libraries: their MRN:: symbols (Packet's
// constructor and unpack, NullPacket, TopologyLocalInfo) are left undefined and come
// from the process that loads them. This plug-in holds that code and, before opening a
// tool's object, makes its own symbols global (it was opened RTLD_LOCAL by Canopy's
// loader), so that they resolve to it.
//
// As in MRNet 5.0.1, NAME_format_string must exist (and parse), but packets are not
// compared with it: the function gets every packet of the wave and its unpack() says
// whether the format is the one it expects. Tools rely on that.
//
// Difference from MRNet 5.0.1, on purpose:
//   - packets_out_reverse cannot be sent: Canopy's filter ABI has no way back down
//     the stream. A function that fills it fails the wave with an error, rather than
//     have those packets silently dropped.
#include <dlfcn.h>

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "canopy/filter.h"
#include "mrnet/NetworkTopology.h"
#include "mrnet/conventions.h"
#include "mrnet/filters/wave.h"
#include "mrnet/packet_codec.h"

namespace canopy::mrnet_filters {
namespace {

using FilterFunction = void (*)(std::vector<MRN::PacketPtr>& packets_in, std::vector<MRN::PacketPtr>& packets_out,
                                std::vector<MRN::PacketPtr>& packets_out_reverse, void** filter_state,
                                MRN::PacketPtr& params, const MRN::TopologyLocalInfo& info);
using StateFunction = MRN::PacketPtr (*)(void** filter_state, int stream_id);

// Puts this plug-in's symbols (the MRN:: packet code) in the process's global scope,
// once. The handle is never closed: tools' filters resolve symbols to the plug-in,
// so it must stay loaded as long as they are.
Result<void> export_packet_code() {
  static const Result<void> outcome = []() -> Result<void> {
    Dl_info self{};
    if (dladdr(reinterpret_cast<const void*>(&export_packet_code), &self) == 0 || self.dli_fname == nullptr) {
      return Error{std::string("cannot find the file of ") + MRN::layer::kFilterPlugin + " (dladdr failed)"};
    }
    dlerror();
    if (dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL) == nullptr) {
      const char* why = dlerror();
      return Error{std::string("cannot make the MRNet packet code of ") + self.dli_fname +
                   " global: " + (why ? why : "unknown error")};
    }
    return {};
  }();
  return outcome;
}

// Opens a tool's shared object once per path, for the life of the process (as MRNet
// does): packets a filter made point into its code (their deleters), and its state
// outlives any one call. One table per process because dlopen's handles are.
Result<void*> open_shared_object(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, void*> opened;
  std::lock_guard lock(mutex);
  if (auto it = opened.find(path); it != opened.end()) return it->second;
  dlerror();
  // RTLD_NOW: a symbol the object needs and nobody defines is an error here, not a
  // crash in the middle of a wave.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();  // names the file, and the symbol if one is missing
    return Error{std::string("cannot load the MRNet filter: ") + (why ? why : path + ": unknown error"),
                 ErrorKind::invalid_input};
  }
  opened.emplace(path, handle);
  return handle;
}

void* find_symbol(void* handle, const std::string& symbol) {
  dlerror();
  return dlsym(handle, symbol.c_str());
}

// The adapter's parameters: [0] the shared object's path, [1] the function's name,
// [2...] the MRNet packet of set_FilterParameters (mrnet/packet_codec.h), if any.
// New parameters for a running instance may leave both names empty: "the function
// this instance runs" (a stream whose nodes run different functions, each its own).
struct Parameters {
  std::string path;
  std::string function;
  MRN::PacketPtr params;  // MRN::Packet::NullPacket when none
};

Result<Parameters> read_parameters(const char* filter, const Packet& packet, unsigned int stream_id,
                                   bool names_may_be_empty = false) {
  const auto* path = packet.size() >= 2 ? std::get_if<std::string>(&packet[0]) : nullptr;
  const auto* function = packet.size() >= 2 ? std::get_if<std::string>(&packet[1]) : nullptr;
  const bool kept = names_may_be_empty && path && function && path->empty() && function->empty();
  if (!path || !function || ((path->empty() || function->empty()) && !kept)) {
    return Error{std::string(filter) +
                     " takes [0] the path of the filter's shared object and [1] the function's name "
                     "(non-empty strings), then the MRNet packet of set_FilterParameters; got \"" +
                     packet.format() + "\"",
                 ErrorKind::invalid_input};
  }
  Parameters out{*path, *function, MRN::Packet::NullPacket};
  if (packet.size() > 2) {
    Packet params(packet.tag(), std::vector<Value>(packet.values().begin() + 2, packet.values().end()));
    auto decoded = MRN::codec::from_canopy(params, stream_id);
    if (!decoded) {
      return Error{std::string(filter) + " " + *function + ": the filter parameters after the path and name: " +
                       decoded.error(),
                   ErrorKind::invalid_input};
    }
    out.params = std::move(*decoded);
  }
  return out;
}

class FunctionFilter {
 public:
  FunctionFilter(const FilterContext& context, const Packet& params)
      : FunctionFilter(context, params, MRN::layer::kFunctionFilter) {}
  FunctionFilter(const FunctionFilter&) = delete;
  FunctionFilter& operator=(const FunctionFilter&) = delete;
  // The function's state is the tool's (MRNet never frees it either): left as it is.
  ~FunctionFilter() = default;

  Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out) {
    auto packets = decode_wave(label_, wave, stream_);
    if (!packets) return Error{packets.error(), packets.error_kind()};
    std::vector<MRN::PacketPtr> produced;
    std::vector<MRN::PacketPtr> reverse;
    const MRN::TopologyLocalInfo info(rank_, place_);
    function_(*packets, produced, reverse, &state_, params_, info);
    if (!reverse.empty()) {
      return Error{label_ + ": the function put " + std::to_string(reverse.size()) +
                   " packet(s) in packets_out_reverse, which Canopy cannot send back down a stream "
                   "(docs/mrnet.md); none of this wave's output was sent"};
    }
    std::vector<Packet> encoded;
    encoded.reserve(produced.size());
    for (std::size_t i = 0; i < produced.size(); ++i) {
      if (!produced[i]) return Error{label_ + ": packets_out[" + std::to_string(i) + "] is a null PacketPtr"};
      if (produced[i]->has_Error()) {
        return Error{label_ + ": packets_out[" + std::to_string(i) + "] (\"" + produced[i]->get_FormatString() +
                     "\") could not be packed: " + produced[i]->impl().error};
      }
      encoded.push_back(MRN::codec::to_canopy(*produced[i]));
    }
    out.insert(out.end(), std::make_move_iterator(encoded.begin()), std::make_move_iterator(encoded.end()));
    return {};
  }

  // The tree changed: what TopologyLocalInfo tells the function from the next wave on
  // (MRNet's reads the live topology at each call).
  void set_context(const FilterContext& context) { place_ = place_of(context); }

  // New parameters, laid out as at creation; the path and name must stay the same.
  Result<void> set_params(const Packet& params) {
    auto read = read_parameters(kind_, params, own_stream_id(), true);
    if (!read) return Error{read.error(), read.error_kind()};
    if (!read->path.empty() && (read->path != path_ || read->function != function_name_)) {
      return Error{label_ + ": new parameters name " + read->function + " in " + read->path +
                       "; a filter instance keeps its function (create a stream for another one)",
                   ErrorKind::invalid_input};
    }
    params_ = std::move(read->params);
    return {};
  }

 protected:
  FunctionFilter(const FilterContext& context, const Packet& params, const char* kind)
      : kind_(kind), rank_(context.rank), stream_(context.stream), place_(place_of(context)) {
    auto read = read_parameters(kind_, params, own_stream_id());
    if (!read) throw std::invalid_argument(read.error());
    path_ = std::move(read->path);
    function_name_ = std::move(read->function);
    params_ = std::move(read->params);
    label_ = std::string(kind_) + " " + function_name_ + " (" + path_ + ")";

    if (auto exported = export_packet_code(); !exported) throw std::runtime_error(exported.error());
    auto handle = open_shared_object(path_);
    if (!handle) throw std::invalid_argument(handle.error());
    function_ = reinterpret_cast<FilterFunction>(find_symbol(*handle, function_name_));
    if (!function_) {
      throw std::invalid_argument(path_ + " has no function " + function_name_ + " (an MRNet filter is extern \"C\")");
    }
    const auto* format = static_cast<const char* const*>(find_symbol(*handle, function_name_ + "_format_string"));
    if (!format) {
      throw std::invalid_argument(path_ + " has no symbol " + function_name_ +
                                  "_format_string, which MRNet requires of a filter: extern \"C\" const char* " +
                                  function_name_ + "_format_string = \"...\"; (\"\" takes any format)");
    }
    format_ = *format ? *format : "";
    auto types = MRN::codec::parse_format(format_);
    if (!types) throw std::invalid_argument(label_ + ": " + function_name_ + "_format_string: " + types.error());
    format_types_ = std::move(*types);
    get_state_ = reinterpret_cast<StateFunction>(find_symbol(*handle, function_name_ + "_get_state"));
  }

  unsigned int own_stream_id() const { return MRN::layer::mrnet_stream_id(stream_, rank_); }

  static MRN::TopologyLocalInfo::Place place_of(const FilterContext& context) {
    return {.children = context.children,
            .siblings = context.siblings,
            .descendants = context.descendants,
            .leaf_descendants = context.backends,
            .root_distance = context.depth,
            .max_leaf_distance = context.height};
  }

  const char* kind_;  // the Canopy filter's name
  Rank rank_;
  StreamId stream_;
  MRN::TopologyLocalInfo::Place place_;  // as the node last told it
  std::string path_;
  std::string function_name_;
  std::string label_;  // "mrnet_function NAME (path)", for error messages
  FilterFunction function_ = nullptr;
  StateFunction get_state_ = nullptr;
  std::string format_;
  std::vector<MRN::DataType> format_types_;  // empty: any format
  // Mutable: NAME_get_state takes it by pointer, and Canopy's extract_state is const.
  mutable void* state_ = nullptr;
  MRN::PacketPtr params_;
};

// The same, state recoverable through NAME_get_state.
class RecoverableFunctionFilter : public FunctionFilter {
 public:
  RecoverableFunctionFilter(const FilterContext& context, const Packet& params)
      : FunctionFilter(context, params, MRN::layer::kRecoverableFunctionFilter) {
    if (!get_state_) {
      throw std::invalid_argument(path_ + " has no function " + function_name_ + "_get_state, which " +
                                  MRN::layer::kRecoverableFunctionFilter + " needs; use " +
                                  MRN::layer::kFunctionFilter);
    }
  }

  // NAME_get_state's packet, as a packet of the stream: executed at another node, the
  // function composes it into that node's state.
  Packet extract_state() const {
    MRN::PacketPtr state = get_state_(&state_, static_cast<int>(own_stream_id()));
    if (!state) throw std::runtime_error(label_ + ": " + function_name_ + "_get_state returned no packet");
    if (state->has_Error()) {
      throw std::runtime_error(label_ + ": the packet of " + function_name_ + "_get_state could not be packed: " +
                               state->impl().error);
    }
    return MRN::codec::to_canopy(*state);
  }
};

}  // namespace
}  // namespace canopy::mrnet_filters

CANOPY_FILTER(mrnet_function, canopy::mrnet_filters::FunctionFilter)
CANOPY_FILTER(mrnet_function_recoverable, canopy::mrnet_filters::RecoverableFunctionFilter)

static_assert(std::string_view(MRN::layer::kFunctionFilter) == "mrnet_function");
static_assert(std::string_view(MRN::layer::kRecoverableFunctionFilter) == "mrnet_function_recoverable");
