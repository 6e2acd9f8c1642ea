#include "union_record.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>

namespace canopy::demo {

namespace {

// Parses one integer of `text` at `pos`, after spaces; advances `pos` past it.
template <typename T>
bool parse_number(std::string_view text, std::size_t& pos, T& out) {
  while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\r')) ++pos;
  auto [end, ec] = std::from_chars(text.data() + pos, text.data() + text.size(), out);
  if (ec != std::errc{}) return false;
  pos = static_cast<std::size_t>(end - text.data());
  return true;
}

bool only_spaces(std::string_view text, std::size_t pos) {
  return text.find_first_not_of(" \t\r", pos) == std::string_view::npos;
}

}  // namespace

std::string record_line(std::int32_t value, WallClock::time_point time) {
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch()).count();
  return std::to_string(value) + ' ' + std::to_string(micros) + '\n';
}

Result<std::vector<RecordedValue>> read_record(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot read " + path.string() + ": " + std::strerror(errno)};
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (in.bad()) return Error{"cannot read " + path.string()};
  std::vector<RecordedValue> values;
  std::size_t line_start = 0;
  for (std::size_t line_number = 1;; ++line_number) {
    auto newline = text.find('\n', line_start);
    if (newline == std::string::npos) break;  // none left, or one cut short by a kill
    std::string_view line(text.data() + line_start, newline - line_start);
    line_start = newline + 1;
    if (only_spaces(line, 0)) continue;
    RecordedValue v;
    std::size_t pos = 0;
    std::int64_t micros = 0;
    bool ok = parse_number(line, pos, v.value);
    if (ok && !only_spaces(line, pos)) {
      ok = parse_number(line, pos, micros) && only_spaces(line, pos);
      v.time = WallClock::time_point(std::chrono::duration_cast<WallClock::duration>(std::chrono::microseconds(micros)));
    }
    if (!ok) {
      return Error{path.string() + ":" + std::to_string(line_number) + ": expected \"VALUE TIME_US\" or \"VALUE\", not \"" +
                       std::string(line) + "\"",
                   ErrorKind::invalid_input};
    }
    values.push_back(v);
  }
  return values;
}

UnionCheck check_union(const std::set<std::int32_t>& result, const std::map<Rank, std::vector<RecordedValue>>& records,
                       const std::map<Rank, WallClock::time_point>& failed) {
  std::set<std::int32_t> required, recorded, late;
  for (const auto& [rank, values] : records) {
    auto failure = failed.find(rank);
    for (const auto& v : values) {
      recorded.insert(v.value);
      bool is_late = failure != failed.end() && v.time && *v.time >= failure->second - kFailureGrace;
      (is_late ? late : required).insert(v.value);
    }
  }
  UnionCheck check;
  check.expected = required.size();
  for (auto x : required) check.missing += !result.count(x);
  for (auto x : result) check.extra += !recorded.count(x);
  for (auto x : late) {
    if (required.count(x)) continue;  // another back-end's, or an earlier one, must arrive anyway
    ++check.late_values;
    check.late_arrived += result.count(x);
  }
  return check;
}

}  // namespace canopy::demo
