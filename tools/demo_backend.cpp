// canopy-demo-backend: the back-end of `canopy run`'s demo workload
// (tools/demo_protocol.h, docs/demo.md). Exits when the network shuts down.
//   canopy-demo-backend                       started by a Canopy parent
//   canopy-demo-backend --attach FILE [RANK]  attach mode (docs/attach.md); the rank
//       defaults to the MPI rank from the environment (Open MPI, PMIx, PMI, Slurm)
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <random>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "canopy/backend.h"
#include "demo_protocol.h"
#include "union_record.h"

namespace {

// The rank of this process in its MPI job, from the launcher's environment.
std::optional<long> mpi_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(name); v && *v) {
      char* end = nullptr;
      long rank = std::strtol(v, &end, 10);
      if (!*end && rank >= 0) return rank;
    }
  }
  return std::nullopt;
}

// Where a union back-end writes what it sends (union_record.h): an integer is
// recorded, and on disk, before it is sent, so that if this process is killed its
// file still holds everything it sent. A write that fails (a full disk) is said once,
// with the file and the reason, and ends the recording, and with it the integers
// this back-end sends: an integer that is not recorded is not sent (its packets go
// on, empty, to keep the stream's waves in step).
class Record {
 public:
  Record(canopy::Rank rank, const std::string& dir) : rank_(rank) {
    if (dir.empty()) return;
    path_ = dir + "/be-" + std::to_string(rank) + ".txt";
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create");
  }
  ~Record() {
    if (fd_ >= 0) ::close(fd_);
  }
  Record(const Record&) = delete;
  Record& operator=(const Record&) = delete;

  // Whether `x` may be sent: recorded, or no recording asked for.
  bool write(std::int32_t x) {
    if (path_.empty()) return true;
    if (failed_) return false;
    const std::string line = canopy::demo::record_line(x, std::chrono::system_clock::now());
    for (std::size_t done = 0; done < line.size();) {
      const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        // A line cut short has no newline: read_record skips it.
        fail("cannot write");
        return false;
      }
      done += static_cast<std::size_t>(n);
    }
    return true;
  }
  bool failed() const { return failed_; }

 private:
  void fail(const char* what) {
    std::fprintf(stderr,
                 "canopy-demo-backend %u: %s %s: %s; recording stops here, and with it this back-end's integers "
                 "(each is recorded before it is sent)\n",
                 rank_, what, path_.c_str(), std::strerror(errno));
    failed_ = true;
  }

  canopy::Rank rank_;
  std::string path_;
  int fd_ = -1;
  bool failed_ = false;
};

// The union workload: random integers at a rate, each recorded if asked, then the
// end marker (the record-failed one if the record could not be written). False if
// the network stopped. The sum beside it goes on whatever the record does.
bool run_union(canopy::Backend& be, canopy::StreamId stream, const canopy::Packet& start,
               std::optional<canopy::StreamId> sum_stream) {
  std::int32_t rate = 0, duration_ms = 0;
  std::string dir;
  if (!start.unpack("%d %d %s", rate, duration_ms, dir) || rate <= 0) {
    std::fprintf(stderr, "canopy-demo-backend %u: bad union start packet \"%s\"\n", be.rank(), start.format().c_str());
    return true;
  }
  Record record(be.rank(), dir);
  std::mt19937 random(be.rank() * 7919u + static_cast<unsigned>(std::random_device{}()));
  std::uniform_int_distribution<std::int32_t> value(0, canopy::demo::kUnionRange - 1);
  const auto period = std::chrono::microseconds(1000000 / rate);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(duration_ms);
  auto next = std::chrono::steady_clock::now();
  for (std::int32_t tick = 0; next < end; ++tick) {
    // A packet every tick, with no integer once the record has failed: the union
    // stream waits for all, so its wave n closes once every back-end has sent its
    // n-th packet. A back-end that sent fewer would hold up the others' last waves,
    // and their end markers, for ever.
    std::vector<std::int32_t> xs;
    if (const std::int32_t x = value(random); record.write(x)) xs.push_back(x);
    if (!be.send(stream, canopy::Packet{0, {std::move(xs)}})) return false;
    if (sum_stream && !be.send(*sum_stream, canopy::Packet{tick, {canopy::demo::demo_value(tick, be.rank())}})) {
      return false;
    }
    next += period;
    std::this_thread::sleep_until(next);
  }
  const std::int32_t marker = record.failed() ? canopy::demo::union_record_failed_marker(be.rank())
                                              : canopy::demo::union_end_marker(be.rank());
  return static_cast<bool>(be.send(stream, canopy::Packet{0, {std::vector<std::int32_t>{marker}}}));
}

// Waits `interval` between two waves, keeping the packets that come meanwhile for
// later; false at once if the network stops. Not a plain sleep: an orphan's new
// parent does not kill it at shutdown (it did not start it), so a sleeping back-end
// would outlive the run by up to an interval.
bool pause(canopy::Backend& be, std::chrono::milliseconds interval, std::deque<canopy::Received>& later) {
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + interval;
  for (auto now = Clock::now(); now < until; now = Clock::now()) {
    auto in = be.receive(std::chrono::ceil<std::chrono::milliseconds>(until - now));
    if (!in) return false;
    if (*in) later.push_back(std::move(**in));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // Echoes are answered on the loop thread, without waking this one: the round-trip
  // benchmark measures the tree, not two thread switches per back-end.
  auto echo = [](canopy::Backend& be, const canopy::Received& in) {
    if (in.packet.tag() != canopy::demo::kEchoTag) return false;
    (void)be.send(in.stream, in.packet);
    return true;
  };
  canopy::Result<std::unique_ptr<canopy::Backend>> backend = canopy::Error{"no arguments parsed"};
  if (argc == 1) {
    backend = canopy::Backend::connect(echo);
  } else if ((argc == 3 || argc == 4) && std::string(argv[1]) == "--attach") {
    char* end = nullptr;
    std::optional<long> rank = argc == 4 ? std::optional<long>(std::strtol(argv[3], &end, 10)) : mpi_rank();
    if (!rank || (end && *end) || *rank < 0) {
      std::fprintf(stderr, "canopy-demo-backend: give the back-end rank after the attach file (none found in "
                           "OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or SLURM_PROCID)\n");
      return 2;
    }
    backend = canopy::Backend::attach(argv[2], static_cast<canopy::Rank>(*rank), echo);
  } else {
    std::fprintf(stderr, "usage: canopy-demo-backend [--attach ATTACH_FILE [RANK]]\n");
    return 2;
  }
  if (!backend) {
    std::fprintf(stderr, "canopy-demo-backend: %s\n", backend.error().c_str());
    return 1;
  }
  auto& be = **backend;
  std::deque<canopy::Received> later;  // came during the waves of an earlier start packet
  std::optional<canopy::StreamId> union_sum;  // the union's sum stream, if it has one
  while (true) {
    canopy::Received in;
    if (!later.empty()) {
      in = std::move(later.front());
      later.pop_front();
    } else {
      auto next = be.receive(std::chrono::hours(24));
      if (!next) return 0;  // the network stopped
      if (!*next) continue;
      in = std::move(**next);
    }
    const auto& stream = in.stream;
    const auto& packet = in.packet;
    if (packet.tag() == canopy::demo::kUnionSumTag) {
      union_sum = stream;
      continue;
    }
    if (packet.tag() == canopy::demo::kUnionStartTag) {
      if (!run_union(be, stream, packet, union_sum)) return 0;
      continue;
    }
    std::int32_t waves = 0, interval_ms = 0, shape = 0;
    if (packet.tag() != canopy::demo::kStartTag || !packet.unpack("%d %d %d", waves, interval_ms, shape)) {
      std::fprintf(stderr, "canopy-demo-backend %u: ignoring a packet \"%s\" with tag %d\n", be.rank(),
                   packet.format().c_str(), packet.tag());
      continue;
    }
    for (std::int32_t w = 0; w < waves; ++w) {
      std::int32_t v = canopy::demo::demo_value(w, be.rank());
      canopy::Packet out = shape ? canopy::Packet{w, {std::vector<std::int32_t>{v}}} : canopy::Packet{w, {v}};
      if (!be.send(stream, std::move(out))) return 0;
      if (interval_ms > 0 && !pause(be, std::chrono::milliseconds(interval_ms), later)) return 0;
    }
  }
}
