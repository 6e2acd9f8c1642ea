#include "demo_check.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>

#include "demo_protocol.h"

namespace canopy::tools {

std::optional<Value> expected_value(const std::string& filter, std::int32_t wave, const std::vector<Rank>& backends) {
  std::vector<std::int32_t> values;
  for (auto r : backends) values.push_back(demo::demo_value(wave, r));
  std::sort(values.begin(), values.end());
  if (values.empty()) return std::nullopt;
  if (filter == "sum") {
    std::int32_t s = 0;
    for (auto v : values) s += v;
    return s;
  }
  if (filter == "min") return values.front();
  if (filter == "max") return values.back();
  if (filter == "avg") {
    double s = 0;
    for (auto v : values) s += v;
    return s / values.size();
  }
  if (filter == "concat" || filter == "union") return values;
  return std::nullopt;
}

bool matches(const Value& got, const Value& want) {
  if (auto* xs = std::get_if<std::vector<std::int32_t>>(&got)) {
    auto sorted = *xs;
    std::sort(sorted.begin(), sorted.end());
    return Value{sorted} == want;
  }
  if (auto* d = std::get_if<double>(&got); d && std::holds_alternative<double>(want)) {
    return std::abs(*d - std::get<double>(want)) < 1e-6 * std::max(1.0, std::abs(*d));
  }
  return got == want;
}

bool of_one_wave(const std::string& filter, std::int32_t wave, std::uint32_t holds, const Value& got,
                 const std::vector<Rank>& backends) {
  if (holds == 0 || holds > backends.size()) return false;
  auto value_of = [&](std::size_t i) { return static_cast<double>(demo::demo_value(wave, backends[i])); };
  // The least and the most that `holds` of them can add up to (backends ascending).
  double least = 0, most = 0;
  for (std::size_t i = 0; i < holds; ++i) least += value_of(i), most += value_of(backends.size() - 1 - i);
  auto number = [](const Value& v) -> std::optional<double> {
    if (auto* i = std::get_if<std::int32_t>(&v)) return *i;
    if (auto* d = std::get_if<double>(&v)) return *d;
    return std::nullopt;
  };
  auto within = [](double x, double lo, double hi) { return x >= lo - 1e-6 && x <= hi + 1e-6; };
  if (filter == "sum") {
    auto x = number(got);
    return x && within(*x, least, most);
  }
  if (filter == "avg") {
    auto x = number(got);
    return x && within(*x * holds, least, most);
  }
  if (filter == "min" || filter == "max") {
    auto x = number(got);
    return x && within(*x, value_of(0), value_of(backends.size() - 1));
  }
  if (filter == "concat" || filter == "union") {
    auto* xs = std::get_if<std::vector<std::int32_t>>(&got);
    if (!xs || xs->size() != holds) return false;
    std::set<std::int32_t> seen;
    for (auto x : *xs) {
      const std::int64_t r = static_cast<std::int64_t>(x) - static_cast<std::int64_t>(wave) * 1000;
      if (r < 0 || !std::binary_search(backends.begin(), backends.end(), static_cast<Rank>(r)) ||
          !seen.insert(x).second) {
        return false;
      }
    }
    return true;
  }
  return true;
}

DemoCheck::DemoCheck(std::string filter, std::vector<Rank> backends, bool checked)
    : filter_(std::move(filter)), backends_(std::move(backends)), checked_(checked) {}

const std::vector<Rank>* DemoCheck::members_of(std::uint64_t id, Network& net) {
  if (auto it = members_.find(id); it != members_.end()) return &it->second;
  auto now = net.view();
  members_[now.id] = now.members;
  if (now.id == id) return &members_[id];
  return nullptr;
}

void DemoCheck::mismatch(const std::string& what) {
  if (mismatches_++ == 0) first_ = what;
}

std::size_t DemoCheck::check(const Received& result, Network& net) {
  if (!result.wave) return 0;
  const std::uint64_t wave = *result.wave;
  const auto& packet = result.packet;
  if (wave >= seen_.size()) seen_.resize(wave + 1);
  seen_[wave] = true;
  if (result.complete) {
    ++complete_;
  } else {
    incomplete_.push_back(wave);
  }
  const auto* members = members_of(result.view, net);
  std::vector<Rank> held;  // the back-ends a complete wave holds
  if (members) {
    std::set_intersection(backends_.begin(), backends_.end(), members->begin(), members->end(),
                          std::back_inserter(held));
  }
  if (!checked_) return held.size();
  const auto w = static_cast<std::int32_t>(wave);
  auto got = [&] { return packet.size() ? canopy::to_string(packet[0]) : std::string("nothing"); };
  if (result.complete && members) {
    auto want = expected_value(filter_, w, held);
    if (!want || packet.size() != 1 || !matches(packet[0], *want) || result.holds != held.size()) {
      mismatch("wave " + std::to_string(wave) + ": got " + got() + " over " + std::to_string(result.holds) +
               " back-ends" +
               (want ? ", expected " + canopy::to_string(*want) + " over " + std::to_string(held.size()) : ""));
    }
  } else if (packet.size() != 1 || !of_one_wave(filter_, w, result.holds, packet[0], backends_)) {
    mismatch("wave " + std::to_string(wave) + ": got " + got() + ", which is not of that wave's values over " +
             std::to_string(result.holds) + " back-ends");
  }
  return held.size();
}

std::vector<std::uint64_t> DemoCheck::missing(std::uint64_t count) const {
  std::vector<std::uint64_t> out;
  for (std::uint64_t w = 0; w < count; ++w) {
    if (w >= seen_.size() || !seen_[w]) out.push_back(w);
  }
  return out;
}

std::string DemoCheck::wave_list(const std::vector<std::uint64_t>& waves) {
  std::string out;
  for (auto w : waves) out += (out.empty() ? "" : ",") + std::to_string(w);
  return out;
}

}  // namespace canopy::tools
