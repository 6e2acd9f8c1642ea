#include "membership/gossip_reliability.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <thread>

namespace canopy::membership {

namespace {

Error invalid(std::string message) { return Error{std::move(message), ErrorKind::invalid_input}; }

// The argument checks every entry point shares; an empty string when they pass.
std::string check(GossipSchedule schedule, std::uint32_t n, double f, std::uint32_t max_n) {
  if (schedule == GossipSchedule::off) return "schedule 'off' has no sources: choose random, rr, brr or dbrr";
  if (n < 2) return "n = " + std::to_string(n) + ": a detector needs at least 2 members";
  if (n > max_n) return "n = " + std::to_string(n) + " is above " + std::to_string(max_n) + " for this method";
  if (!(f >= 0.0 && f <= 1.0)) return "f = " + std::to_string(f) + " is not a probability in [0, 1]";
  return {};
}

// Sums count[k]·f^k·(1−f)^(n−k) over the sizes k of the failing sets: each size's sets
// are counted exactly, so the only rounding is in the n+1 terms.
double weigh(const std::vector<std::uint64_t>& count_by_size, double f) {
  const auto n = static_cast<int>(count_by_size.size()) - 1;
  double p = 0;
  for (int k = 0; k <= n; ++k) {
    if (count_by_size[k] != 0) p += static_cast<double>(count_by_size[k]) * std::pow(f, k) * std::pow(1.0 - f, n - k);
  }
  return p;
}

// One worker's share of the Monte Carlo draws. Sources are the same offsets around the
// ring for every member (gossip_target's offset in a round does not depend on s), so
// member d hears from (d + o) mod n for each o in `offsets`, the sources of member 0.
class Drawer {
 public:
  Drawer(std::uint32_t n, double f, std::vector<std::uint32_t> offsets)
      : n_(n), offsets_(std::move(offsets)), dead_(2 * n, 0), at_least_(survival(n, f)) {
    dead_list_.reserve(n);
  }

  std::uint64_t run(std::uint64_t trials, std::mt19937_64& rng) {
    std::uint64_t failures = 0;
    for (std::uint64_t t = 0; t < trials; ++t) failures += draw_fails(rng) ? 1 : 0;
    return failures;
  }

 private:
  // P(K >= k) for k = 0..n, K ~ Binomial(n, f), each summed from the top so that the
  // small upper tail, where the failures are, keeps its precision.
  static std::vector<double> survival(std::uint32_t n, double f) {
    std::vector<double> pmf(n + 1, 0.0), at_least(n + 2, 0.0);
    if (f <= 0.0) {
      pmf[0] = 1;
    } else if (f >= 1.0) {
      pmf[n] = 1;
    } else {
      for (std::uint32_t k = 0; k <= n; ++k) {
        pmf[k] = std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) + k * std::log(f) +
                          (n - k) * std::log1p(-f));
      }
    }
    for (std::uint32_t k = n + 1; k-- > 0;) at_least[k] = at_least[k + 1] + pmf[k];
    at_least[0] = 1;
    at_least.pop_back();
    return at_least;
  }

  // The number of deaths: the largest k with u < P(K >= k), u uniform in [0, 1).
  // (std::binomial_distribution costs several times more per draw.)
  std::uint32_t draw_size(std::mt19937_64& rng) const {
    const double u = std::generate_canonical<double, 53>(rng);
    auto past = std::partition_point(at_least_.begin(), at_least_.end(), [u](double p) { return u < p; });
    return static_cast<std::uint32_t>(past - at_least_.begin() - 1);
  }

  bool draw_fails(std::mt19937_64& rng) {
    const std::uint32_t k = draw_size(rng);
    // A live member needs all of its sources dead, which takes at least as many deaths
    // as it has sources; every member has offsets_.size() of them.
    if (k < offsets_.size()) return false;
    // Everyone dead; or everyone hears from all the others (random, RR) and k >= n−1
    // are dead, so the survivor, if any, has lost all of its sources.
    if (k == n_ || offsets_.size() == n_ - 1) return true;
    pick(k, rng);
    // An isolated member d has, in particular, its source d + offsets_[0] dead: the
    // candidates are x − offsets_[0] for the dead x.
    const std::uint32_t first = offsets_.front();
    bool fails = false;
    for (std::uint32_t x : dead_list_) {
      const std::uint32_t d = x >= first ? x - first : x + n_ - first;
      if (!dead_[d] && all_sources_dead(d)) {
        fails = true;
        break;
      }
    }
    for (std::uint32_t x : dead_list_) dead_[x] = dead_[x + n_] = 0;
    return fails;
  }

  // A uniform k-subset of the members into dead_ and dead_list_ (Floyd's sampling).
  // dead_ holds the ring twice, so that dead_[d + o] needs no modulo.
  void pick(std::uint32_t k, std::mt19937_64& rng) {
    dead_list_.clear();
    for (std::uint32_t j = n_ - k; j < n_; ++j) {
      std::uint32_t t = std::uniform_int_distribution<std::uint32_t>(0, j)(rng);
      if (dead_[t]) t = j;
      dead_[t] = dead_[t + n_] = 1;
      dead_list_.push_back(t);
    }
  }

  bool all_sources_dead(std::uint32_t d) const {
    for (std::uint32_t o : offsets_) {
      if (!dead_[d + o]) return false;
    }
    return true;
  }

  std::uint32_t n_;
  std::vector<std::uint32_t> offsets_;
  std::vector<std::uint8_t> dead_;
  std::vector<std::uint32_t> dead_list_;
  std::vector<double> at_least_;
};

constexpr std::uint64_t kChunkTrials = 1 << 16;

}  // namespace

std::string_view to_string(ReliabilityMethod method) {
  switch (method) {
    case ReliabilityMethod::exact: return "exact";
    case ReliabilityMethod::montecarlo: return "montecarlo";
  }
  return "?";
}

Result<bool> detector_fails(GossipSchedule schedule, const std::vector<bool>& dead) {
  const auto n = static_cast<std::uint32_t>(dead.size());
  if (auto problem = check(schedule, n, 0.0, kMaxMonteCarloMembers); !problem.empty()) return invalid(problem);
  if (std::all_of(dead.begin(), dead.end(), [](bool d) { return d; })) return true;
  for (std::uint32_t d = 0; d < n; ++d) {
    if (dead[d]) continue;
    const auto sources = gossip_sources(schedule, d, n);
    if (std::all_of(sources.begin(), sources.end(), [&](std::uint32_t s) { return dead[s]; })) return true;
  }
  return false;
}

Result<DetectorFailure> detector_failure_exact(GossipSchedule schedule, std::uint32_t n, double f) {
  if (auto problem = check(schedule, n, f, kMaxExactMembers); !problem.empty()) return invalid(problem);
  // Failure sets as bit masks: bit m set when member m is dead.
  std::vector<std::uint32_t> sources(n, 0);
  std::size_t fewest = n;
  for (std::uint32_t d = 0; d < n; ++d) {
    const auto list = gossip_sources(schedule, d, n);
    for (std::uint32_t s : list) sources[d] |= std::uint32_t{1} << s;
    fewest = std::min(fewest, list.size());
  }
  const std::uint32_t everyone = (std::uint32_t{1} << n) - 1;  // n <= 24
  std::vector<std::uint64_t> count_by_size(n + 1, 0);
  std::uint64_t failures = 0;
  for (std::uint64_t set = 0; set <= everyone; ++set) {
    const auto dead = static_cast<std::uint32_t>(set);
    const auto k = static_cast<std::uint32_t>(std::popcount(dead));
    if (k < fewest) continue;  // no live member can have all of its sources dead
    bool fails = dead == everyone;
    for (std::uint32_t d = 0; d < n && !fails; ++d) {
      if (!(dead >> d & 1) && (sources[d] & ~dead) == 0) fails = true;
    }
    if (fails) {
      ++count_by_size[k];
      ++failures;
    }
  }
  const double p = weigh(count_by_size, f);
  return DetectorFailure{.p_fail = p,
                         .method = ReliabilityMethod::exact,
                         .trials = std::uint64_t{1} << n,
                         .failures = failures,
                         .ci_low = p,
                         .ci_high = p};
}

Result<DetectorFailure> detector_failure_montecarlo(GossipSchedule schedule, std::uint32_t n, double f,
                                                    const MonteCarloOptions& options) {
  if (auto problem = check(schedule, n, f, kMaxMonteCarloMembers); !problem.empty()) return invalid(problem);
  if (options.trials == 0) return invalid("trials = 0: draw at least one failure set");
  const auto offsets = gossip_sources(schedule, 0, n);
  const std::uint64_t chunks = (options.trials + kChunkTrials - 1) / kChunkTrials;
  std::atomic<std::uint64_t> next_chunk{0}, failures{0};
  auto work = [&] {
    Drawer drawer(n, f, offsets);
    std::uint64_t mine = 0;
    for (std::uint64_t c = next_chunk++; c < chunks; c = next_chunk++) {
      std::seed_seq seed{static_cast<std::uint32_t>(options.seed), static_cast<std::uint32_t>(options.seed >> 32),
                         static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(c >> 32)};
      std::mt19937_64 rng(seed);
      mine += drawer.run(std::min(kChunkTrials, options.trials - c * kChunkTrials), rng);
    }
    failures += mine;
  };
  const auto threads = static_cast<unsigned>(std::clamp<std::uint64_t>(options.threads, 1, chunks));
  std::vector<std::thread> helpers;
  for (unsigned i = 1; i < threads; ++i) helpers.emplace_back(work);
  work();
  for (auto& t : helpers) t.join();
  const auto ci = wilson_interval(failures, options.trials);
  return DetectorFailure{.p_fail = static_cast<double>(failures) / static_cast<double>(options.trials),
                         .method = ReliabilityMethod::montecarlo,
                         .trials = options.trials,
                         .failures = failures,
                         .ci_low = ci.low,
                         .ci_high = ci.high};
}

Result<double> detector_failure_union_bound(GossipSchedule schedule, std::uint32_t n, double f) {
  if (auto problem = check(schedule, n, f, kMaxMonteCarloMembers); !problem.empty()) return invalid(problem);
  const auto k = static_cast<double>(gossip_sources(schedule, 0, n).size());
  return std::min(1.0, std::pow(f, n) + n * (1.0 - f) * std::pow(f, k));
}

Interval wilson_interval(std::uint64_t failures, std::uint64_t trials, double z) {
  if (trials == 0) return {0, 1};
  const double t = static_cast<double>(trials), p = static_cast<double>(failures) / t, z2 = z * z;
  const double center = (p + z2 / (2 * t)) / (1 + z2 / t);
  const double half = z / (1 + z2 / t) * std::sqrt(p * (1 - p) / t + z2 / (4 * t * t));
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

}  // namespace canopy::membership
