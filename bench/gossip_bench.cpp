// canopy-gossip-bench: paper 003's Fig. 4, the probability that the gossip failure
// detector itself fails, for the random, RR, BRR and DBRR schedules
// (membership/gossip_schedule.h, membership/gossip_reliability.h, docs/benchmarks.md).
// With each of the n members failing independently with probability f, the detector
// fails when every member fails, or when some live member has all of its sources dead.
//
//   canopy-gossip-bench fig4 --schedule brr --n 4 --f 0.05 [--trials N] [--seed S]
//                            [--method exact|montecarlo|auto] [--threads T]
//       one row of CSV: schedule,n,f,p_fail,method,trials,failures,ci_low,ci_high
//   canopy-gossip-bench fig4-sweep [--out DIR] [--trials N] [--seed S] [--f F]
//                                  [--threads T] [--quick]
//       DIR/fig4.csv: the same columns, every schedule for n = 4 ... 256;
//       DIR/fig4-bound.csv: schedule,n,f,sources,union_bound for the same points
//
// Method `exact` enumerates all 2^n failure sets (n <= 24); `montecarlo` draws
// `trials` of them (default 10^6 for fig4, 10^8 for the sweep, 10^5 with --quick) and
// gives Wilson's 95 % interval; `auto` (the default) is exact for n <= 20. With no
// failure observed, p_fail is 0 and ci_high the interval's upper bound. The union
// bound f^n + n(1−f)f^k (k sources per member) is an upper bound on the probability
// and close to it when it is small: it shows where the draws are too few to see any.
//
// Bad arguments print what was wrong and exit with status 2; a failure to write the
// output exits with status 1. bench/gossip_fig4.sh runs the sweep and draws DIR/fig4.png.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "membership/gossip_reliability.h"
#include "membership/gossip_schedule.h"

namespace {

namespace gossip = canopy::membership;
using gossip::GossipSchedule;
using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kAutoExactMembers = 20;
constexpr const char* kHeader = "schedule,n,f,p_fail,method,trials,failures,ci_low,ci_high";
constexpr const char* kUsage =
    "usage: canopy-gossip-bench fig4 --schedule random|rr|brr|dbrr --n N --f F\n"
    "                               [--trials N] [--seed S] [--method exact|montecarlo|auto] [--threads T]\n"
    "       canopy-gossip-bench fig4-sweep [--out DIR] [--trials N] [--seed S] [--f F] [--threads T] [--quick]\n";

// A bad argument: main prints it with the usage and exits with status 2.
struct BadArgument {
  std::string message;
};

enum class Method { exact, montecarlo, automatic };

struct Options {
  std::optional<GossipSchedule> schedule;
  std::optional<std::uint32_t> n;
  double f = 0.05;
  bool f_given = false;
  std::optional<std::uint64_t> trials;
  std::uint64_t seed = 1;
  Method method = Method::automatic;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::string out = "/tmp/canopy-gossip-fig4";
  bool quick = false;
};

template <typename T>
std::optional<T> whole_number(std::string_view text) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

template <typename T>
T parse_whole(std::string_view option, std::string_view text, T low, T high) {
  const auto value = whole_number<T>(text);
  if (!value || *value < low || *value > high) {
    throw BadArgument{std::string(option) + " " + std::string(text) + ": expected a whole number from " +
                      std::to_string(low) + " to " + std::to_string(high)};
  }
  return *value;
}

double parse_probability(std::string_view text) {
  const std::string copy(text);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !(value >= 0.0 && value <= 1.0)) {
    throw BadArgument{"--f " + copy + ": expected a probability in [0, 1]"};
  }
  return value;
}

Options parse(int argc, char** argv, bool sweep) {
  Options o;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) throw BadArgument{std::string(a) + " needs a value"};
      return argv[++i];
    };
    if (a == "--trials") {
      o.trials = parse_whole<std::uint64_t>(a, value(), 1, std::uint64_t{1} << 40);
    } else if (a == "--seed") {
      o.seed = parse_whole<std::uint64_t>(a, value(), 0, UINT64_MAX);
    } else if (a == "--threads") {
      o.threads = parse_whole<unsigned>(a, value(), 1, 256);
    } else if (a == "--f") {
      o.f = parse_probability(value());
      o.f_given = true;
    } else if (!sweep && a == "--schedule") {
      const auto name = value();
      o.schedule = gossip::gossip_schedule_from(name);
      if (!o.schedule || *o.schedule == GossipSchedule::off) {
        throw BadArgument{"--schedule " + std::string(name) + ": expected random, rr, brr or dbrr"};
      }
    } else if (!sweep && a == "--n") {
      const auto text = value();
      const auto n = whole_number<std::uint64_t>(text);
      const std::string limits = "from 2 to " + std::to_string(gossip::kMaxMonteCarloMembers);
      if (!n) throw BadArgument{"--n " + std::string(text) + ": expected a number of members " + limits};
      if (*n < 2) throw BadArgument{"--n " + std::string(text) + ": a detector needs at least 2 members"};
      if (*n > gossip::kMaxMonteCarloMembers) {
        throw BadArgument{"--n " + std::string(text) + ": expected a number of members " + limits};
      }
      o.n = static_cast<std::uint32_t>(*n);
    } else if (!sweep && a == "--method") {
      const auto m = value();
      if (m == "exact") {
        o.method = Method::exact;
      } else if (m == "montecarlo") {
        o.method = Method::montecarlo;
      } else if (m == "auto") {
        o.method = Method::automatic;
      } else {
        throw BadArgument{"--method " + std::string(m) + ": expected exact, montecarlo or auto"};
      }
    } else if (sweep && a == "--out") {
      o.out = value();
    } else if (sweep && a == "--quick") {
      o.quick = true;
    } else {
      throw BadArgument{"unknown argument " + std::string(a)};
    }
  }
  if (!sweep) {
    if (!o.schedule) throw BadArgument{"--schedule is required"};
    if (!o.n) throw BadArgument{"--n is required"};
    if (!o.f_given) throw BadArgument{"--f is required (the paper's Fig. 4 uses 0.05)"};
    if (o.method == Method::exact && *o.n > gossip::kMaxExactMembers) {
      throw BadArgument{"--method exact enumerates all 2^n failure sets: n = " + std::to_string(*o.n) +
                        " is above " + std::to_string(gossip::kMaxExactMembers) + "; use --method montecarlo"};
    }
  }
  return o;
}

gossip::DetectorFailure compute(GossipSchedule schedule, std::uint32_t n, double f, Method method,
                                const gossip::MonteCarloOptions& mc) {
  const bool exact = method == Method::exact || (method == Method::automatic && n <= kAutoExactMembers);
  auto result = exact ? gossip::detector_failure_exact(schedule, n, f)
                      : gossip::detector_failure_montecarlo(schedule, n, f, mc);
  if (!result) throw BadArgument{result.error()};
  return *result;
}

std::string row(GossipSchedule schedule, std::uint32_t n, double f, const gossip::DetectorFailure& r) {
  char line[256];
  std::snprintf(line, sizeof line, "%s,%u,%g,%.10g,%s,%llu,%llu,%.10g,%.10g", std::string(gossip::to_string(schedule)).c_str(),
                n, f, r.p_fail, std::string(to_string(r.method)).c_str(), static_cast<unsigned long long>(r.trials),
                static_cast<unsigned long long>(r.failures), r.ci_low, r.ci_high);
  return line;
}

int run_fig4(const Options& o) {
  const auto r = compute(*o.schedule, *o.n, o.f, o.method,
                         {.trials = o.trials.value_or(1'000'000), .seed = o.seed, .threads = o.threads});
  std::printf("%s\n%s\n", kHeader, row(*o.schedule, *o.n, o.f, r).c_str());
  return 0;
}

int run_sweep(const Options& o) {
  const std::vector<std::uint32_t> members = {4, 8, 12, 16, 20, 32, 64, 128, 256};
  const std::uint64_t trials = o.trials.value_or(o.quick ? 100'000 : 100'000'000);
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  const auto csv_path = std::filesystem::path(o.out) / "fig4.csv";
  const auto bound_path = std::filesystem::path(o.out) / "fig4-bound.csv";
  FILE* csv = std::fopen(csv_path.c_str(), "w");
  FILE* bound = std::fopen(bound_path.c_str(), "w");
  if (!csv || !bound) {
    std::fprintf(stderr, "canopy-gossip-bench: cannot write %s and %s\n", csv_path.c_str(), bound_path.c_str());
    if (csv) std::fclose(csv);
    if (bound) std::fclose(bound);
    return 1;
  }
  std::fprintf(csv, "%s\n", kHeader);
  std::fprintf(bound, "schedule,n,f,sources,union_bound\n");
  std::printf("%s\n", kHeader);
  const auto start = Clock::now();
  for (auto schedule : {GossipSchedule::random, GossipSchedule::rr, GossipSchedule::brr, GossipSchedule::dbrr}) {
    for (std::uint32_t n : members) {
      const auto t0 = Clock::now();
      const auto r = compute(schedule, n, o.f, Method::automatic,
                             {.trials = trials, .seed = o.seed + n, .threads = o.threads});
      const auto line = row(schedule, n, o.f, r);
      std::fprintf(csv, "%s\n", line.c_str());
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
      const auto sources = gossip::gossip_sources(schedule, 0, n).size();
      std::fprintf(bound, "%s,%u,%g,%zu,%.10g\n", std::string(gossip::to_string(schedule)).c_str(), n, o.f, sources,
                   *gossip::detector_failure_union_bound(schedule, n, o.f));
      std::fprintf(stderr, "%s n=%u: %.2f s\n", std::string(gossip::to_string(schedule)).c_str(), n,
                   std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }
  const bool written = std::fclose(csv) == 0 && std::fclose(bound) == 0;
  if (!written) {
    std::fprintf(stderr, "canopy-gossip-bench: writing %s failed\n", o.out.c_str());
    return 1;
  }
  std::fprintf(stderr, "sweep: %.1f s, %llu draws per Monte Carlo point, %u threads; wrote %s and %s\n",
               std::chrono::duration<double>(Clock::now() - start).count(), static_cast<unsigned long long>(trials),
               o.threads, csv_path.c_str(), bound_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view command = argc > 1 ? argv[1] : "";
  if (command == "--help" || command == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  try {
    if (command == "fig4") return run_fig4(parse(argc, argv, false));
    if (command == "fig4-sweep") return run_sweep(parse(argc, argv, true));
    throw BadArgument{command.empty() ? "no command" : "unknown command " + std::string(command)};
  } catch (const BadArgument& e) {
    std::fprintf(stderr, "canopy-gossip-bench: %s\n%s", e.message.c_str(), kUsage);
    return 2;
  }
}
