#include "canopy/packet.h"

#include <array>
#include <cmath>
#include <cstdio>

namespace canopy {
namespace {

// Format codes, in the order of Value's alternatives.
constexpr std::array<std::string_view, std::variant_size_v<Value>> kCodes = {
    "%d", "%ld", "%ud", "%uld", "%f", "%lf", "%s", "%b",
    "%ad", "%ald", "%aud", "%auld", "%af", "%alf", "%as"};

template <typename T>
void append_json_number(std::string& out, T x) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(x)) {
      out += "null";
      return;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(x));
    out += buf;
  } else {
    out += std::to_string(x);
  }
}

void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string render(const Value& value, bool json) {
  std::string out;
  std::visit(
      [&](const auto& v) {
        using T = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_arithmetic_v<T>) {
          append_json_number(out, v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          append_quoted(out, v);
        } else if constexpr (std::is_same_v<T, Bytes>) {
          out += '[';
          for (std::size_t i = 0; i < v.data.size(); ++i) {
            if (i) out += json ? "," : ", ";
            out += std::to_string(v.data[i]);
          }
          out += ']';
        } else {
          out += '[';
          for (std::size_t i = 0; i < v.size(); ++i) {
            if (i) out += json ? "," : ", ";
            if constexpr (std::is_same_v<typename T::value_type, std::string>) {
              append_quoted(out, v[i]);
            } else {
              append_json_number(out, v[i]);
            }
          }
          out += ']';
        }
      },
      value);
  return out;
}

}  // namespace

std::string_view format_code(const Value& value) { return kCodes[value.index()]; }

Result<std::vector<std::size_t>> parse_format(std::string_view format) {
  std::vector<std::size_t> types;
  std::size_t pos = 0;
  while (pos < format.size()) {
    if (format[pos] == ' ' || format[pos] == '\t' || format[pos] == ',') {
      ++pos;
      continue;
    }
    std::size_t end = format.find_first_of(" \t,", pos);
    if (end == std::string_view::npos) end = format.size();
    std::string_view code = format.substr(pos, end - pos);
    std::size_t index = kCodes.size();
    for (std::size_t i = 0; i < kCodes.size(); ++i) {
      if (kCodes[i] == code) index = i;
    }
    if (index == kCodes.size()) {
      return Error{"unknown code \"" + std::string(code) + "\" at offset " + std::to_string(pos) +
                   " of format \"" + std::string(format) +
                   "\" (known: %d %ud %ld %uld %f %lf %s %b and arrays %ad %aud %ald %auld %af %alf %as)"};
    }
    types.push_back(index);
    pos = end;
  }
  return types;
}

std::string Packet::format() const {
  std::string out;
  for (const auto& v : values_) {
    if (!out.empty()) out += ' ';
    out += format_code(v);
  }
  return out;
}

std::string to_string(const Value& value) { return render(value, false); }
std::string to_json(const Value& value) { return render(value, true); }

}  // namespace canopy
