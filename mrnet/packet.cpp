#include "mrnet/packet_codec.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <type_traits>
#include <unordered_map>
#include <variant>

namespace MRN {

namespace {

using canopy::Bytes;
using canopy::Value;

const std::map<std::string, DataType>& directives() {
  static const std::map<std::string, DataType> table = {
      {"c", CHAR_T},          {"uc", UCHAR_T},          {"hd", INT16_T},           {"uhd", UINT16_T},
      {"d", INT32_T},         {"ud", UINT32_T},         {"ld", INT64_T},           {"uld", UINT64_T},
      {"f", FLOAT_T},         {"lf", DOUBLE_T},         {"s", STRING_T},           {"ac", CHAR_ARRAY_T},
      {"auc", UCHAR_ARRAY_T}, {"ahd", INT16_ARRAY_T},   {"auhd", UINT16_ARRAY_T},  {"ad", INT32_ARRAY_T},
      {"aud", UINT32_ARRAY_T}, {"ald", INT64_ARRAY_T},  {"auld", UINT64_ARRAY_T},  {"af", FLOAT_ARRAY_T},
      {"alf", DOUBLE_ARRAY_T}, {"as", STRING_ARRAY_T},  {"Ac", CHAR_LRG_ARRAY_T},  {"Auc", UCHAR_LRG_ARRAY_T},
      {"Ahd", INT16_LRG_ARRAY_T}, {"Auhd", UINT16_LRG_ARRAY_T}, {"Ad", INT32_LRG_ARRAY_T},
      {"Aud", UINT32_LRG_ARRAY_T}, {"Ald", INT64_LRG_ARRAY_T}, {"Auld", UINT64_LRG_ARRAY_T},
      {"Af", FLOAT_LRG_ARRAY_T}, {"Alf", DOUBLE_LRG_ARRAY_T}, {"As", STRING_LRG_ARRAY_T}};
  return table;
}

bool large(DataType t) { return t >= CHAR_LRG_ARRAY_T; }

// The small-count type of a large array type, or the type itself.
DataType base(DataType t) {
  switch (t) {
    case CHAR_LRG_ARRAY_T: return CHAR_ARRAY_T;
    case UCHAR_LRG_ARRAY_T: return UCHAR_ARRAY_T;
    case STRING_LRG_ARRAY_T: return STRING_ARRAY_T;
    case INT16_LRG_ARRAY_T: return INT16_ARRAY_T;
    case UINT16_LRG_ARRAY_T: return UINT16_ARRAY_T;
    case INT32_LRG_ARRAY_T: return INT32_ARRAY_T;
    case UINT32_LRG_ARRAY_T: return UINT32_ARRAY_T;
    case INT64_LRG_ARRAY_T: return INT64_ARRAY_T;
    case UINT64_LRG_ARRAY_T: return UINT64_ARRAY_T;
    case FLOAT_LRG_ARRAY_T: return FLOAT_ARRAY_T;
    case DOUBLE_LRG_ARRAY_T: return DOUBLE_ARRAY_T;
    default: return t;
  }
}

// The Canopy value type (index in canopy::Value) that carries a directive of type t.
std::size_t carrier(DataType t) {
  switch (base(t)) {
    case CHAR_T: case INT16_T: case INT32_T: return 0;   // int32
    case INT64_T: return 1;
    case UCHAR_T: case UINT16_T: case UINT32_T: return 2;  // uint32
    case UINT64_T: return 3;
    case FLOAT_T: return 4;
    case DOUBLE_T: return 5;
    case STRING_T: return 6;
    case CHAR_ARRAY_T: case UCHAR_ARRAY_T: return 7;  // bytes
    case INT16_ARRAY_T: case INT32_ARRAY_T: return 8;
    case INT64_ARRAY_T: return 9;
    case UINT16_ARRAY_T: case UINT32_ARRAY_T: return 10;
    case UINT64_ARRAY_T: return 11;
    case FLOAT_ARRAY_T: return 12;
    case DOUBLE_ARRAY_T: return 13;
    case STRING_ARRAY_T: return 14;
    default: return static_cast<std::size_t>(-1);
  }
}

// Where the values come from: varargs or an argument vector.
class Source {
 public:
  explicit Source(va_list* args) : args_(args) {}
  explicit Source(const void** slots) : slots_(slots) {}

  template <typename T>  // a scalar as it arrives after the default promotions
  T scalar() {
    if (args_) return static_cast<T>(va_arg(*args_, T));
    return *static_cast<const T*>(*slots_++);
  }
  template <typename Narrow, typename Promoted>  // char, short and float in varargs
  Narrow promoted() {
    if (args_) return static_cast<Narrow>(va_arg(*args_, Promoted));
    return *static_cast<const Narrow*>(*slots_++);
  }
  const void* pointer() {
    if (args_) return va_arg(*args_, const void*);
    return *slots_++;
  }
  std::uint64_t count(bool large_count) {
    if (args_) return large_count ? va_arg(*args_, std::uint64_t) : va_arg(*args_, std::uint32_t);
    const void* p = *slots_++;
    return large_count ? *static_cast<const std::uint64_t*>(p) : *static_cast<const std::uint32_t*>(p);
  }

 private:
  va_list* args_ = nullptr;
  const void** slots_ = nullptr;
};

template <typename Out, typename In>
std::vector<Out> copy_array(const void* data, std::uint64_t n) {
  const auto* in = static_cast<const In*>(data);
  return std::vector<Out>(in, in + n);
}

// Packs one value of type t; false (and `error`) if it cannot be.
// The strings and arrays given (a string array's strings too) are noted in `given`,
// if not null, for set_DestroyData.
bool pack_one(DataType t, Source& from, std::vector<Value>& out, std::vector<void*>* given, std::string& error) {
  const bool lrg = large(t);
  switch (base(t)) {
    case CHAR_T: out.emplace_back(static_cast<std::int32_t>(from.promoted<char, int>())); return true;
    case UCHAR_T: out.emplace_back(static_cast<std::uint32_t>(from.promoted<unsigned char, unsigned>())); return true;
    case INT16_T: out.emplace_back(static_cast<std::int32_t>(from.promoted<std::int16_t, int>())); return true;
    case UINT16_T: out.emplace_back(static_cast<std::uint32_t>(from.promoted<std::uint16_t, unsigned>())); return true;
    case INT32_T: out.emplace_back(from.scalar<std::int32_t>()); return true;
    case UINT32_T: out.emplace_back(from.scalar<std::uint32_t>()); return true;
    case INT64_T: out.emplace_back(from.scalar<std::int64_t>()); return true;
    case UINT64_T: out.emplace_back(from.scalar<std::uint64_t>()); return true;
    case FLOAT_T: out.emplace_back(from.promoted<float, double>()); return true;
    case DOUBLE_T: out.emplace_back(from.scalar<double>()); return true;
    case STRING_T: {
      const auto* s = static_cast<const char*>(from.pointer());
      if (!s) {
        error = "a %s value is NULL";
        return false;
      }
      out.emplace_back(std::string(s));
      if (given) given->push_back(const_cast<char*>(s));
      return true;
    }
    default: break;
  }
  const void* data = from.pointer();
  const std::uint64_t n = from.count(lrg);
  if (given && data) given->push_back(const_cast<void*>(data));
  if (n > 0 && !data) {
    error = "an array of " + std::to_string(n) + " values is NULL";
    return false;
  }
  switch (base(t)) {
    case CHAR_ARRAY_T:
    case UCHAR_ARRAY_T: out.emplace_back(Bytes{copy_array<std::uint8_t, std::uint8_t>(data, n)}); return true;
    case INT16_ARRAY_T: out.emplace_back(copy_array<std::int32_t, std::int16_t>(data, n)); return true;
    case UINT16_ARRAY_T: out.emplace_back(copy_array<std::uint32_t, std::uint16_t>(data, n)); return true;
    case INT32_ARRAY_T: out.emplace_back(copy_array<std::int32_t, std::int32_t>(data, n)); return true;
    case UINT32_ARRAY_T: out.emplace_back(copy_array<std::uint32_t, std::uint32_t>(data, n)); return true;
    case INT64_ARRAY_T: out.emplace_back(copy_array<std::int64_t, std::int64_t>(data, n)); return true;
    case UINT64_ARRAY_T: out.emplace_back(copy_array<std::uint64_t, std::uint64_t>(data, n)); return true;
    case FLOAT_ARRAY_T: out.emplace_back(copy_array<float, float>(data, n)); return true;
    case DOUBLE_ARRAY_T: out.emplace_back(copy_array<double, double>(data, n)); return true;
    case STRING_ARRAY_T: {
      const auto* strings = static_cast<const char* const*>(data);
      std::vector<std::string> v;
      v.reserve(n);
      for (std::uint64_t i = 0; i < n; ++i) {
        if (!strings[i]) {
          error = "string " + std::to_string(i) + " of a %as array is NULL";
          return false;
        }
        v.emplace_back(strings[i]);
      }
      if (given)
        for (std::uint64_t i = 0; i < n; ++i) given->push_back(const_cast<char*>(strings[i]));
      out.emplace_back(std::move(v));
      return true;
    }
    default: break;
  }
  error = "unknown type";
  return false;
}

std::unique_ptr<Packet::Impl> pack(unsigned int stream_id, int tag, const char* format, Source from) {
  auto impl = std::make_unique<Packet::Impl>();
  impl->format = format ? format : "";
  impl->tag = tag;
  impl->stream_id = stream_id;
  auto types = codec::parse_format(impl->format);
  if (!types) {
    impl->error = types.error();
    return impl;
  }
  impl->types = std::move(*types);
  for (DataType t : impl->types) {
    if (!pack_one(t, from, impl->values, &impl->given, impl->error)) {
      impl->values.clear();
      return impl;
    }
  }
  return impl;
}

template <typename Out, typename In>
Out* malloc_copy(const std::vector<In>& in) {
  if (in.empty()) return nullptr;
  auto* out = static_cast<Out*>(std::malloc(sizeof(Out) * in.size()));
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = static_cast<Out>(in[i]);
  return out;
}

void set_count(va_list& out, bool lrg, std::uint64_t n) {
  if (lrg) {
    *va_arg(out, std::uint64_t*) = n;
  } else {
    *va_arg(out, std::uint32_t*) = static_cast<std::uint32_t>(n);
  }
}

// An array carried as a vector<Carried>: a malloc'd copy of Out into the next
// pointer-to-pointer argument, its length into the count after it.
template <typename Out, typename Carried>
void unpack_array(const Value& v, va_list& out, bool lrg) {
  const auto& a = std::get<std::vector<Carried>>(v);
  *va_arg(out, Out**) = malloc_copy<Out>(a);
  set_count(out, lrg, a.size());
}

void unpack_one(DataType t, const Value& v, va_list& out) {
  const bool lrg = large(t);
  switch (base(t)) {
    case CHAR_T: *va_arg(out, char*) = static_cast<char>(std::get<std::int32_t>(v)); return;
    case UCHAR_T: *va_arg(out, unsigned char*) = static_cast<unsigned char>(std::get<std::uint32_t>(v)); return;
    case INT16_T: *va_arg(out, std::int16_t*) = static_cast<std::int16_t>(std::get<std::int32_t>(v)); return;
    case UINT16_T: *va_arg(out, std::uint16_t*) = static_cast<std::uint16_t>(std::get<std::uint32_t>(v)); return;
    case INT32_T: *va_arg(out, std::int32_t*) = std::get<std::int32_t>(v); return;
    case UINT32_T: *va_arg(out, std::uint32_t*) = std::get<std::uint32_t>(v); return;
    case INT64_T: *va_arg(out, std::int64_t*) = std::get<std::int64_t>(v); return;
    case UINT64_T: *va_arg(out, std::uint64_t*) = std::get<std::uint64_t>(v); return;
    case FLOAT_T: *va_arg(out, float*) = std::get<float>(v); return;
    case DOUBLE_T: *va_arg(out, double*) = std::get<double>(v); return;
    case STRING_T: *va_arg(out, char**) = strdup(std::get<std::string>(v).c_str()); return;
    case CHAR_ARRAY_T:
    case UCHAR_ARRAY_T: {
      const auto& b = std::get<Bytes>(v).data;
      *va_arg(out, void**) = malloc_copy<std::uint8_t>(b);
      return set_count(out, lrg, b.size());
    }
    case INT16_ARRAY_T: return unpack_array<std::int16_t, std::int32_t>(v, out, lrg);
    case UINT16_ARRAY_T: return unpack_array<std::uint16_t, std::uint32_t>(v, out, lrg);
    case INT32_ARRAY_T: return unpack_array<std::int32_t, std::int32_t>(v, out, lrg);
    case UINT32_ARRAY_T: return unpack_array<std::uint32_t, std::uint32_t>(v, out, lrg);
    case INT64_ARRAY_T: return unpack_array<std::int64_t, std::int64_t>(v, out, lrg);
    case UINT64_ARRAY_T: return unpack_array<std::uint64_t, std::uint64_t>(v, out, lrg);
    case FLOAT_ARRAY_T: return unpack_array<float, float>(v, out, lrg);
    case DOUBLE_ARRAY_T: return unpack_array<double, double>(v, out, lrg);
    case STRING_ARRAY_T: {
      const auto& a = std::get<std::vector<std::string>>(v);
      char** strings = a.empty() ? nullptr : static_cast<char**>(std::malloc(sizeof(char*) * a.size()));
      for (std::size_t i = 0; i < a.size(); ++i) strings[i] = strdup(a[i].c_str());
      *va_arg(out, char***) = strings;
      return set_count(out, lrg, a.size());
    }
    default: return;
  }
}

}  // namespace

DataType Fmt2Type(const char* directive) {
  if (!directive) return UNKNOWN_T;
  auto it = directives().find(directive);
  return it == directives().end() ? UNKNOWN_T : it->second;
}

// The filter plug-in (mrnet/filters) has this file too, for the commnodes, which do
// not load libcanopy_mrnet.so. A front-end loads both, and uses the library's
// NullPacket; the plug-in's is weak, a definition only where it is alone, so that a
// program has one (AddressSanitizer checks it).
#ifdef CANOPY_MRNET_FILTER_PLUGIN
__attribute__((weak))
#endif
PacketPtr Packet::NullPacket;

Packet::Packet(unsigned int stream_id, int tag, const char* format, ...) {
  va_list args;
  va_start(args, format);
  impl_ = pack(stream_id, tag, format, Source(&args));
  va_end(args);
}

Packet::Packet(const char* format, va_list values, unsigned int stream_id, int tag) {
  va_list args;
  va_copy(args, values);
  impl_ = pack(stream_id, tag, format, Source(&args));
  va_end(args);
}

Packet::Packet(unsigned int stream_id, int tag, const void** values, const char* format)
    : impl_(pack(stream_id, tag, format, Source(values))) {}

Packet::Packet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Packet::~Packet() {
  if (impl_ && impl_->destroy_data)
    for (void* p : impl_->given) std::free(p);
}

void Packet::set_DestroyData(bool destroy) { impl_->destroy_data = destroy; }

int Packet::unpack(const char* format, ...) {
  va_list out;
  va_start(out, format);
  const int r = unpack(out, format, false);
  va_end(out);
  return r;
}

int Packet::unpack(va_list out, const char* format, bool) {
  if (!format || impl_->format != format || !impl_->error.empty()) return -1;
  va_list each;
  va_copy(each, out);
  for (std::size_t i = 0; i < impl_->types.size(); ++i) unpack_one(impl_->types[i], impl_->values[i], each);
  va_end(each);
  return 0;
}

int Packet::get_Tag() const { return impl_->tag; }
void Packet::set_Tag(int tag) { impl_->tag = tag; }
unsigned int Packet::get_StreamId() const { return impl_->stream_id; }
void Packet::set_StreamId(unsigned int id) { impl_->stream_id = id; }
const char* Packet::get_FormatString() const { return impl_->format.c_str(); }
Rank Packet::get_SourceRank() const { return impl_->source; }
Rank Packet::get_InletNodeRank() const { return impl_->inlet; }
unsigned int Packet::get_NumElements() const { return static_cast<unsigned>(impl_->types.size()); }
DataType Packet::get_ElementType(unsigned int i) const { return i < impl_->types.size() ? impl_->types[i] : UNKNOWN_T; }
bool Packet::has_Error() const { return !impl_->error.empty(); }

bool Packet::is_CompleteWave() const { return impl_->complete; }

long long Packet::get_Wave() const { return impl_->wave ? static_cast<long long>(*impl_->wave) : -1; }

unsigned int Packet::get_WaveBackends() const { return impl_->wave_backends; }

namespace codec {

namespace {

canopy::Result<std::vector<DataType>> parse_format_uncached(const std::string& format) {
  std::vector<DataType> types;
  std::size_t i = 0;
  while (i < format.size()) {
    const std::size_t start = format.find_first_not_of(" \t\n%", i);
    if (start == std::string::npos) break;
    const std::size_t end = format.find_first_of(" \t\n%", start);
    const std::string token = format.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const DataType t = Fmt2Type(token.c_str());
    if (t == UNKNOWN_T) return canopy::Error{"unknown directive '%" + token + "' in format \"" + format + "\""};
    types.push_back(t);
    i = end == std::string::npos ? format.size() : end;
  }
  return types;
}

}  // namespace

namespace {

// The directive that a Canopy value type stands for in the compact form (index in
// canopy::Value), and its type.
constexpr const char* kCanonical[] = {"d", "ld", "ud", "uld", "f", "lf", "s", "ac",
                                      "ad", "ald", "aud", "auld", "af", "alf", "as"};
constexpr DataType kCanonicalType[] = {INT32_T,       INT64_T,        UINT32_T,       UINT64_T,      FLOAT_T,
                                       DOUBLE_T,      STRING_T,       CHAR_ARRAY_T,   INT32_ARRAY_T, INT64_ARRAY_T,
                                       UINT32_ARRAY_T, UINT64_ARRAY_T, FLOAT_ARRAY_T, DOUBLE_ARRAY_T, STRING_ARRAY_T};
static_assert(std::size(kCanonical) == std::variant_size_v<Value>);
static_assert(std::size(kCanonicalType) == std::variant_size_v<Value>);

// A format parsed: its directives, and whether packets of it travel without it.
struct Parsed {
  std::vector<DataType> types;
  bool compact = false;
};

// Appends the compact form's directive for Canopy value type `index` to `format`.
void append_canonical(std::string& format, std::size_t index) {
  if (!format.empty()) format += ' ';
  format += '%';
  format += kCanonical[index];
}

// Whether `format` is what the compact form gives back for its directives: each
// directive the one its Canopy value type stands for, separated by single blanks,
// and no string first (a compact packet never starts with one: that is what tells
// the two forms apart).
bool compactable(const std::string& format, const std::vector<DataType>& types) {
  if (!types.empty() && types[0] == STRING_T) return false;
  std::string rendered;
  for (DataType t : types) {
    const std::size_t index = carrier(t);
    if (index >= std::size(kCanonicalType) || kCanonicalType[index] != t) return false;
    append_canonical(rendered, index);
  }
  return rendered == format;
}

// Tools use a handful of formats, each for every packet: they are parsed once per
// thread (a bounded cache; errors are not kept). `format` parsed, valid until the
// next call on this thread; null, with `error`, for a bad format.
const Parsed* cached_format(const std::string& format, std::string& error) {
  thread_local std::unordered_map<std::string, Parsed> parsed;
  if (auto it = parsed.find(format); it != parsed.end()) return &it->second;
  auto types = parse_format_uncached(format);
  if (!types) {
    error = types.error();
    return nullptr;
  }
  if (parsed.size() >= 256) parsed.clear();
  Parsed entry{std::move(*types)};
  entry.compact = compactable(format, entry.types);
  return &parsed.emplace(format, std::move(entry)).first->second;
}

}  // namespace

DataType canonical_type(std::size_t value_index) {
  return value_index < std::size(kCanonicalType) ? kCanonicalType[value_index] : UNKNOWN_T;
}

canopy::Result<std::vector<DataType>> parse_format(const std::string& format) {
  std::string error;
  const auto* parsed = cached_format(format, error);
  if (!parsed) return canopy::Error{error};
  return parsed->types;
}

canopy::Result<canopy::Packet> pack_canopy(int tag, const char* format, va_list values) {
  std::string text = format ? format : "";
  std::string error;
  const auto* parsed = cached_format(text, error);
  if (!parsed) return canopy::Error{error};
  std::vector<Value> out;
  out.reserve(parsed->types.size() + 1);
  if (!parsed->compact) out.emplace_back(std::move(text));
  va_list args;
  va_copy(args, values);
  Source from(&args);
  for (DataType t : parsed->types) {
    if (!pack_one(t, from, out, nullptr, error)) {
      va_end(args);
      return canopy::Error{error};
    }
  }
  va_end(args);
  return canopy::Packet(tag, std::move(out));
}

canopy::Packet to_canopy(const Packet& packet, Form form) {
  const auto& impl = packet.impl();
  std::vector<Value> values;
  values.reserve(impl.values.size() + 1);
  std::string error;
  const auto* parsed = form == Form::compact ? cached_format(impl.format, error) : nullptr;
  if (!parsed || !parsed->compact) values.emplace_back(impl.format);
  values.insert(values.end(), impl.values.begin(), impl.values.end());
  canopy::Packet out(impl.tag, std::move(values));
  return out;
}

namespace {

// The MRNet packet in `packet`: its values copied, or moved when `Take` is a
// Packet&& (a packet received, which nobody reads after).
template <typename Take>
canopy::Result<PacketPtr> decode(Take&& packet, unsigned int stream_id) {
  auto impl = std::make_unique<Packet::Impl>();
  impl->tag = packet.tag();
  impl->stream_id = stream_id;
  impl->source = packet.source();
  const auto* format = packet.size() > 0 ? std::get_if<std::string>(&packet[0]) : nullptr;
  if (!format) {
    // The compact form: the values alone, their types giving the format.
    impl->types.reserve(packet.size());
    for (const Value& v : packet.values()) {
      append_canonical(impl->format, v.index());
      impl->types.push_back(kCanonicalType[v.index()]);
    }
    if constexpr (std::is_const_v<std::remove_reference_t<Take>>) {
      impl->values = packet.values();
    } else {
      impl->values = std::move(packet.values());
    }
    return PacketPtr(new Packet(std::move(impl)));
  }
  std::string error;
  const auto* parsed = cached_format(*format, error);
  if (!parsed) return canopy::Error{error};
  const auto& types = parsed->types;
  if (types.size() + 1 != packet.size()) {
    return canopy::Error{"not an MRNet packet: \"" + *format + "\" names " + std::to_string(types.size()) +
                         " values, the packet holds " + std::to_string(packet.size() - 1)};
  }
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (packet[i + 1].index() != carrier(types[i])) {
      return canopy::Error{"not an MRNet packet: value " + std::to_string(i) + " does not match \"" + *format + "\""};
    }
  }
  impl->types = types;
  if constexpr (std::is_const_v<std::remove_reference_t<Take>>) {
    impl->format = *format;
    impl->values.assign(packet.values().begin() + 1, packet.values().end());
  } else {
    auto& values = packet.values();
    impl->format = std::move(std::get<std::string>(values[0]));
    values.erase(values.begin());  // moves the rest down, copies nothing
    impl->values = std::move(values);
  }
  return PacketPtr(new Packet(std::move(impl)));
}

}  // namespace

canopy::Result<PacketPtr> from_canopy(const canopy::Packet& packet, unsigned int stream_id) {
  return decode(packet, stream_id);
}

canopy::Result<PacketPtr> from_canopy(canopy::Packet&& packet, unsigned int stream_id) {
  return decode(std::move(packet), stream_id);
}

}  // namespace codec
}  // namespace MRN
