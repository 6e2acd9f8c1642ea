// Test plugin for docs/filters.md's claims (filter_claims_test.cpp):
//   `stamp`   (a downstream filter): appends the rank of the node running it to the
//             int32 array at position 0, so a back-end can tell which nodes
//             transformed the packet on its way down;
//   `explode` throws from execute(), as a buggy filter would;
//   `crash`   sums, but kills its process with SIGSEGV on the node whose rank its
//             parameter ("%ud") names, as a filter with a bad pointer would;
//   `flood`   emits as many packets per wave as its parameter ("%ud") says;
//   `bloat`   emits one packet of as many int32 as its parameter ("%ud") says;
//   `slow`    concatenates its wave's "%ad" arrays after sleeping as many
//             milliseconds as its parameter ("%ud") says, at commnodes only: a
//             filter that takes long, and is not hung.
#include <chrono>
#include <csignal>
#include <stdexcept>
#include <string>
#include <thread>

#include "canopy/filter.h"

namespace {

class Stamp {
 public:
  Stamp(const canopy::FilterContext& context, const canopy::Packet&) : rank_(context.rank) {}

  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>& out) {
    for (const auto& p : wave) {
      const auto* path = p.size() == 1 ? std::get_if<std::vector<std::int32_t>>(&p[0]) : nullptr;
      if (!path) return canopy::Error{"stamp needs packets \"%ad\""};
      auto stamped = *path;
      stamped.push_back(static_cast<std::int32_t>(rank_));
      out.push_back(canopy::Packet(p.tag(), {std::move(stamped)}));
    }
    return {};
  }

 private:
  canopy::Rank rank_;
};

class Explode {
 public:
  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>&) {
    throw std::runtime_error("explode refuses a wave of " + std::to_string(wave.size()) + " packets");
  }
};

class Crash {
 public:
  Crash(const canopy::FilterContext& context, const canopy::Packet& params)
      : crash_(params.size() > 0 && std::holds_alternative<std::uint32_t>(params[0]) &&
               std::get<std::uint32_t>(params[0]) == context.rank) {}

  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>& out) {
    if (crash_) {
      // The default action, not a handler's: a sanitizer build installs its own
      // SIGSEGV handler, which would report and exit(1) instead of the process
      // being killed by the signal, as it is in every other build.
      std::signal(SIGSEGV, SIG_DFL);
      std::raise(SIGSEGV);
    }
    std::int32_t sum = 0;
    for (const auto& p : wave) sum += p.size() == 0 ? 0 : std::get<std::int32_t>(p[0]);
    out.push_back(canopy::Packet(wave.empty() ? 0 : wave.front().tag(), {sum}));
    return {};
  }

 private:
  bool crash_;
};

class Flood {
 public:
  Flood(const canopy::FilterContext&, const canopy::Packet& params)
      : count_(params.size() > 0 && std::holds_alternative<std::uint32_t>(params[0]) ? std::get<std::uint32_t>(params[0])
                                                                                     : 1) {}

  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>& out) {
    const std::int32_t tag = wave.empty() ? 0 : wave.front().tag();
    for (std::uint32_t i = 0; i < count_; ++i) out.push_back(canopy::Packet(tag, {static_cast<std::int32_t>(i)}));
    return {};
  }

 private:
  std::uint32_t count_;
};

class Bloat {
 public:
  Bloat(const canopy::FilterContext&, const canopy::Packet& params)
      : count_(params.size() > 0 && std::holds_alternative<std::uint32_t>(params[0]) ? std::get<std::uint32_t>(params[0])
                                                                                     : 1) {}

  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>& out) {
    out.push_back(canopy::Packet(wave.empty() ? 0 : wave.front().tag(), {std::vector<std::int32_t>(count_, 7)}));
    return {};
  }

 private:
  std::uint32_t count_;
};

class Slow {
 public:
  Slow(const canopy::FilterContext& context, const canopy::Packet& params)
      : sleep_(context.depth > 0 && params.size() > 0 && std::holds_alternative<std::uint32_t>(params[0])
                   ? std::get<std::uint32_t>(params[0])
                   : 0) {}

  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>& out) {
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_));
    std::vector<std::int32_t> all;
    for (const auto& p : wave) {
      const auto* values = p.size() == 1 ? std::get_if<std::vector<std::int32_t>>(&p[0]) : nullptr;
      if (!values) return canopy::Error{"slow needs packets \"%ad\""};
      all.insert(all.end(), values->begin(), values->end());
    }
    out.push_back(canopy::Packet(wave.empty() ? 0 : wave.front().tag(), {std::move(all)}));
    return {};
  }

 private:
  std::uint32_t sleep_;
};

}  // namespace

// Never returns at the front-end (depth 0): a plug-in that hangs where the results
// are delivered; elsewhere a sum.
class Hang {
 public:
  Hang(const canopy::FilterContext& context, const canopy::Packet&) : hang_(context.depth == 0) {}

  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>& out) {
    while (hang_) std::this_thread::sleep_for(std::chrono::seconds(1));
    std::int32_t sum = 0;
    for (const auto& p : wave) sum += p.size() == 0 ? 0 : std::get<std::int32_t>(p[0]);
    out.push_back(canopy::Packet(wave.empty() ? 0 : wave.front().tag(), {sum}));
    return {};
  }

 private:
  bool hang_;
};

CANOPY_FILTER(stamp, Stamp)
CANOPY_FILTER(explode, Explode)
CANOPY_FILTER(crash, Crash)
CANOPY_FILTER(flood, Flood)
CANOPY_FILTER(bloat, Bloat)
CANOPY_FILTER(hang, Hang)
CANOPY_FILTER(slow, Slow)
