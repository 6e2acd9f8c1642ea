// canopy-stripe-peer: one end of a link between two processes, for the tests and
// benchmarks that need real network paths — two network namespaces joined by two
// veth pairs (tests/netns, bench/netns_link_bench.sh; docs/striping.md,
// "Network-namespace tests").
//
//   canopy-stripe-peer serve --listen A1,A2 --port P [--count N] [--report FILE]
//   canopy-stripe-peer send --local L1,L2 --remote R1,R2 --port P --count N --size BYTES
//                           [--rate MSGS_PER_S] [--checksum KIND] [--corrupt FRACTION] [--paths-report]
//
// Message i is a data packet carrying i (a uint64 value) and BYTES of padding computed
// from i and BYTES. The receiver checks strictly that every message arrives exactly
// once, in order and intact, and prints one line of key=value figures; the sender
// prints the link's statistics, one key=value a line. `--plain` on both sides: a
// plain TcpLink over the first address instead (the one-NIC baseline).
//
// Flow control: Link::send() queues without bound, on either kind of link. So the
// receiver reports how many messages it has received (a data packet, back on the same
// link) after every 64 KiB of messages, and the sender keeps at most --window bytes
// of messages beyond the last report. This bounds the sender's memory, and what the
// receiver has yet to see, end to end and the same way for TcpLink and StripedLink,
// as canopy-link-bench does.
#include <capnp/message.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "canopy.capnp.h"
#include "transport/seq_tracking.h"
#include "transport/striped_link.h"
#include "transport/tcp_link.h"

using namespace canopy;
using namespace canopy::transport;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kReportEveryBytes = 64u << 10;
// What a message weighs in the flow control beyond its padding: the sequence number
// and Cap'n Proto's pointers and headers, roughly. Both ends use the same figure.
constexpr std::size_t kMessageOverhead = 64;

struct Usage {
  std::string message;
};

struct Options {
  std::string mode;
  std::vector<std::string> listen, local, remote;
  std::uint16_t port = 0;
  std::optional<std::uint64_t> count;
  std::size_t size = 0;
  bool size_given = false;
  double rate = 0;  // messages per second; 0: as fast as flow control allows
  std::size_t window = 8u << 20;
  std::string report;
  bool plain = false;
  bool paths_report = false;
  StripedOptions striped;
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= list.size()) {
    auto comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    if (comma > at) out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

template <typename T>
T number(const std::string& option, const std::string& text) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw Usage{option + " expects a number, not '" + text + "'"};
  }
  return value;
}

std::chrono::milliseconds milliseconds(const std::string& option, const std::string& text) {
  auto ms = number<long>(option, text);
  if (ms <= 0) throw Usage{option + " must be positive"};
  return std::chrono::milliseconds(ms);
}

Options parse(int argc, char** argv) {
  if (argc < 2) throw Usage{"no mode given"};
  Options o;
  o.mode = argv[1];
  if (o.mode != "serve" && o.mode != "send") throw Usage{"unknown mode '" + o.mode + "'"};
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Usage{a + " needs a value"};
      return argv[++i];
    };
    if (a == "--plain") {
      o.plain = true;
    } else if (a == "--paths-report" && o.mode == "send") {
      o.paths_report = true;
    } else if (a == "--listen" && o.mode == "serve") {
      o.listen = split(value());
    } else if (a == "--report" && o.mode == "serve") {
      o.report = value();
    } else if (a == "--local" && o.mode == "send") {
      o.local = split(value());
    } else if (a == "--remote" && o.mode == "send") {
      o.remote = split(value());
    } else if (a == "--port") {
      auto port = number<unsigned>(a, value());
      if (port == 0 || port > 65535) throw Usage{"--port must be 1..65535"};
      o.port = static_cast<std::uint16_t>(port);
    } else if (a == "--count") {
      o.count = number<std::uint64_t>(a, value());
    } else if (a == "--size" && o.mode == "send") {
      o.size = number<std::size_t>(a, value());
      o.size_given = true;
      if (o.size > (64u << 20) - 4096) throw Usage{"--size must be below 64 MiB, the frame limit"};
    } else if (a == "--rate" && o.mode == "send") {
      o.rate = number<double>(a, value());
      if (!(o.rate > 0)) throw Usage{"--rate must be positive"};
    } else if (a == "--window" && o.mode == "send") {
      o.window = number<std::size_t>(a, value());
      if (o.window < 4 * kReportEveryBytes) throw Usage{"--window must be at least 256 KiB"};
    } else if (a == "--checksum" && o.mode == "send") {
      auto v = value();
      if (v == "crc32c") o.striped.checksum = ChecksumKind::crc32c;
      else if (v == "additive") o.striped.checksum = ChecksumKind::additive;
      else if (v == "none") o.striped.checksum = ChecksumKind::none;
      else throw Usage{"--checksum must be crc32c, additive or none"};
    } else if (a == "--corrupt") {
      o.striped.corrupt_fraction = number<double>(a, value());
      if (!(o.striped.corrupt_fraction >= 0 && o.striped.corrupt_fraction < 1)) {
        throw Usage{"--corrupt must be in [0, 1)"};
      }
    } else if (a == "--retransmit") {
      o.striped.retransmit.initial = milliseconds(a, value());
    } else if (a == "--keepalive") {
      o.striped.keepalive = milliseconds(a, value());
    } else if (a == "--path-silence") {
      o.striped.path_silence = milliseconds(a, value());
    } else if (a == "--link-timeout") {
      o.striped.link_timeout = milliseconds(a, value());
    } else {
      throw Usage{"unknown argument '" + a + "' for " + o.mode};
    }
  }
  if (o.port == 0) throw Usage{"--port is required"};
  if (o.mode == "serve" && o.listen.empty()) throw Usage{"serve needs --listen ADDRESS[,ADDRESS...]"};
  if (o.mode == "send") {
    if (o.remote.empty()) throw Usage{"send needs --remote ADDRESS[,ADDRESS...]"};
    if (!o.count) throw Usage{"send needs --count N"};
    if (!o.size_given) throw Usage{"send needs --size BYTES"};
  }
  for (const auto* list : {&o.listen, &o.local, &o.remote}) {
    for (const auto& a : *list) {
      boost::system::error_code ec;
      asio::ip::make_address(a, ec);
      if (ec) throw Usage{"'" + a + "' is not a numeric IP address"};
    }
  }
  if (o.striped.retransmit.initial > o.striped.retransmit.max) o.striped.retransmit.max = o.striped.retransmit.initial;
  // The link's warnings (a path down or suspect, a refused hello) on stderr, which the
  // tests keep in serve.err and send.err.
  o.striped.log =
      std::make_shared<spdlog::logger>("canopy-stripe-peer", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  o.striped.log->set_level(spdlog::level::warn);
  return o;
}

// The padding of message `seq`, `out.size()` bytes: a sequence of 64-bit words that
// depends on seq, on the length and on the position, so that bytes of another
// message, bytes moved within this one, or a message cut short all fail the check.
void fill_padding(std::uint64_t seq, std::span<capnp::byte> out) {
  std::uint64_t x = (seq + 1) * 0x9e3779b97f4a7c15ull ^ (out.size() + 1) * 0xbf58476d1ce4e5b9ull;
  for (std::size_t at = 0; at < out.size(); at += 8) {
    x += 0x94d049bb133111ebull;
    std::uint64_t word = x ^ (x >> 31);
    std::memcpy(out.data() + at, &word, std::min<std::size_t>(8, out.size() - at));
  }
}

void build_message(capnp::MallocMessageBuilder& b, std::uint64_t seq, std::size_t size) {
  auto values = b.initRoot<wire::DataPacket>().initValues(2);
  values[0].setUint64(seq);
  auto padding = values[1].initBytes(static_cast<unsigned>(size));
  fill_padding(seq, {padding.begin(), padding.size()});
}

// Receiver -> sender: how many messages arrived so far.
void send_progress(Link& link, std::uint64_t received) {
  capnp::MallocMessageBuilder b;
  b.initRoot<wire::DataPacket>().initValues(1)[0].setUint64(received);
  link.send(b);
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------------------
// serve

class Receiver {
 public:
  Receiver(asio::io_context& io, Options o) : io_(io), o_(std::move(o)), linger_(io) {}

  void listen() {
    std::vector<std::string> addresses = o_.listen;
    if (o_.plain) {
      addresses.resize(1);  // the one-NIC baseline
    } else {
      acceptor_ = std::make_unique<StripedAcceptor>(io_, o_.striped,
                                                    [this](std::shared_ptr<StripedLink> l) { on_link(l, l); });
    }
    for (const auto& a : addresses) {
      auto l = std::make_unique<tcp::acceptor>(io_);
      tcp::endpoint at(asio::ip::make_address(a), o_.port);
      l->open(at.protocol());
      l->set_option(tcp::acceptor::reuse_address(true));
      l->bind(at);
      l->listen();
      accept_next(*l);
      listeners_.push_back(std::move(l));
    }
    std::fprintf(stderr, "canopy-stripe-peer: listening on %s port %u (%s)\n", join(addresses).c_str(), o_.port,
                 o_.plain ? "plain" : "striped");
  }

  int exit_code() const { return exit_code_; }

 private:
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
    return s;
  }

  // Accepting goes on after the link is up: a striped path that failed comes back as
  // a new connection.
  void accept_next(tcp::acceptor& l) {
    l.async_accept([this, &l](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec) return;
      if (acceptor_) {
        acceptor_->take(std::move(socket));
      } else if (!link_) {
        auto plain = TcpLink::create(std::move(socket));
        on_link(plain, nullptr);
      }
      accept_next(l);
    });
  }

  void on_link(std::shared_ptr<Link> link, std::shared_ptr<StripedLink> striped) {
    if (link_) {
      std::fprintf(stderr, "canopy-stripe-peer: refusing a second link from %s\n", link->peer().c_str());
      link->abort("one link per run");
      return;
    }
    link_ = link;
    striped_ = striped;
    started_ = Clock::now();
    link->start([this](capnp::MessageReader& m) { on_message(m.getRoot<wire::DataPacket>()); },
                [this](std::string_view reason) { finish(std::string(reason)); });
  }

  void on_message(wire::DataPacket::Reader m) {
    const auto now = Clock::now();
    if (received_ > 0) max_gap_ = std::max(max_gap_, now - last_);
    last_ = now;
    ++received_;
    std::uint64_t seq = 0;
    std::size_t size = 0;
    if (!check(m, seq, size)) {
      ++corrupt_;
    } else {
      bytes_ += size;
      const bool first_intact = seen_.empty();
      if (seen_.insert(seq, seq + 1) == 0) {
        ++duplicated_;
      } else {
        ++distinct_;
        if (!first_intact && seq < highest_) ++reordered_;  // a later one came first
      }
      if (first_intact || seq > highest_) highest_ = seq;
    }
    unreported_ += size + kMessageOverhead;
    if (unreported_ >= kReportEveryBytes) {
      unreported_ = 0;
      send_progress(*link_, received_);
    }
    if (o_.count && distinct_ == *o_.count && !linger_armed_) {
      // Everything is here; the sender closes once it knows (its close() flushes).
      // Should it not, the result stands anyway.
      linger_armed_ = true;
      linger_.expires_after(10s);
      linger_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec) finish("the sender did not close the link within 10 s of the last message");
      });
    }
  }

  // Whether `m` is an intact message; its sequence number and padding length.
  bool check(wire::DataPacket::Reader m, std::uint64_t& seq, std::size_t& size) {
    auto values = m.getValues();
    if (values.size() != 2 || !values[0].isUint64() || !values[1].isBytes()) return false;
    seq = values[0].getUint64();
    auto padding = values[1].getBytes();
    size = padding.size();
    expected_.resize(size);
    fill_padding(seq, expected_);
    return std::memcmp(padding.begin(), expected_.data(), size) == 0;
  }

  void finish(std::string reason) {
    if (finished_) return;
    finished_ = true;
    linger_.cancel();
    std::fprintf(stderr, "canopy-stripe-peer: link closed: %s\n", reason.c_str());
    const std::uint64_t expected = o_.count ? *o_.count : (distinct_ ? highest_ + 1 : 0);
    std::uint64_t lost = 0;
    std::vector<SeqRange> missing;
    seen_.missing(0, expected, missing);
    for (const auto& r : missing) lost += r.size();
    // From the link's start, not from the first delivery: a striped link delivers the
    // first message only once all its fragments are in, with parts of the next ones
    // already across, which the time from the first delivery would leave out.
    double seconds = received_ > 0 ? std::chrono::duration<double>(last_ - started_).count() : 0;
    double mbps = seconds > 0 ? static_cast<double>(bytes_) / seconds / 1e6 : 0;
    char line[512];
    int n = std::snprintf(line, sizeof line,
                          "received=%llu lost=%llu duplicated=%llu reordered=%llu corrupt=%llu bytes=%llu "
                          "seconds=%.3f MBps=%.1f max_gap_ms=%.1f",
                          static_cast<unsigned long long>(received_), static_cast<unsigned long long>(lost),
                          static_cast<unsigned long long>(duplicated_), static_cast<unsigned long long>(reordered_),
                          static_cast<unsigned long long>(corrupt_), static_cast<unsigned long long>(bytes_),
                          seconds, mbps, std::chrono::duration<double, std::milli>(max_gap_).count());
    std::string summary(line, static_cast<std::size_t>(n));
    if (striped_) {
      // What the link caught and dropped on the way: proof that injected faults
      // happened, and that the checks above saw none of them.
      auto s = striped_->stats();
      std::uint64_t injected = 0;  // into this end's own progress reports (--corrupt)
      for (const auto& p : s.paths) injected += p.corruptions_injected;
      summary += " link_checksum_failures=" + std::to_string(s.checksum_failures) +
                 " link_duplicates=" + std::to_string(s.duplicates) + " paths=" + std::to_string(s.paths.size()) +
                 " link_corruptions_injected=" + std::to_string(injected);
    }
    std::printf("%s\n", summary.c_str());
    std::fflush(stdout);
    if (!o_.report.empty()) std::ofstream(o_.report) << summary << "\n";
    bool complete = !o_.count || distinct_ == *o_.count;
    exit_code_ = (lost == 0 && duplicated_ == 0 && reordered_ == 0 && corrupt_ == 0 && complete) ? 0 : 1;
    listeners_.clear();
    acceptor_.reset();
    if (link_) link_->detach();
    io_.stop();
  }

  asio::io_context& io_;
  Options o_;
  std::vector<std::unique_ptr<tcp::acceptor>> listeners_;
  std::unique_ptr<StripedAcceptor> acceptor_;
  std::shared_ptr<Link> link_;
  std::shared_ptr<StripedLink> striped_;
  SeqTrackingList seen_;  // sequence numbers received intact
  std::vector<capnp::byte> expected_;
  std::uint64_t received_ = 0, distinct_ = 0, duplicated_ = 0, reordered_ = 0, corrupt_ = 0, highest_ = 0;
  std::uint64_t bytes_ = 0, unreported_ = 0;  // bytes: of padding, intact
  Clock::time_point started_, last_;
  Clock::duration max_gap_{};
  asio::steady_timer linger_;
  bool linger_armed_ = false;
  bool finished_ = false;
  int exit_code_ = 1;
};

// ---------------------------------------------------------------------------
// send

class Sender {
 public:
  Sender(asio::io_context& io, Options o) : io_(io), o_(std::move(o)), pace_(io) {
    limit_ = std::max<std::uint64_t>(4, o_.window / (o_.size + kMessageOverhead));
  }

  // false (with a message on stderr) if no link could be set up.
  bool connect() {
    if (o_.plain) {
      boost::system::error_code ec;
      auto socket = connect_tcp(io_, o_.remote[0], o_.port, ec);
      if (ec) {
        std::fprintf(stderr, "canopy-stripe-peer: cannot connect to %s:%u: %s\n", o_.remote[0].c_str(), o_.port,
                     ec.message().c_str());
        return false;
      }
      link_ = TcpLink::create(std::move(socket));
      return true;
    }
    auto r = StripedLink::connect(io_, paths_between(o_.local, o_.remote, o_.port), o_.striped);
    if (!r) {
      std::fprintf(stderr, "canopy-stripe-peer: %s\n", r.error().c_str());
      return false;
    }
    striped_ = *r;
    link_ = striped_;
    if (striped_->live_paths() < striped_->path_count()) {
      std::fprintf(stderr, "canopy-stripe-peer: only %zu of %zu paths connected; the others keep trying\n",
                   striped_->live_paths(), striped_->path_count());
    }
    faults_.resize(striped_->path_count());
    striped_->set_path_observer([this](std::size_t path, PathState state, std::string_view why) {
      on_path_state(path, state, why);
    });
    return true;
  }

  void start() {
    link_->start(
        [this](capnp::MessageReader& message) {
          auto m = message.getRoot<wire::DataPacket>();
          auto values = m.getValues();
          if (values.size() == 1 && values[0].isUint64()) confirmed_ = std::max(confirmed_, values[0].getUint64());
          pump();
        },
        [this](std::string_view reason) { finish(std::string(reason)); });
    start_ = Clock::now();
    pump();
  }

  int exit_code() const { return exit_code_; }

 private:
  // Path `index`'s fault history, from the observer: when it left `live` and came
  // back, and how much it had carried by then.
  struct Faults {
    bool faulted = false;
    std::optional<std::uint64_t> acked_at_recovery;  // bytes_acked when it was last live again
    std::vector<std::string> events;
  };

  void on_path_state(std::size_t path, PathState state, std::string_view why) {
    if (path >= faults_.size() || !link_->is_open()) return;
    auto& f = faults_[path];
    if (state == PathState::suspect || state == PathState::down) {
      f.faulted = true;
      f.acked_at_recovery.reset();
    } else if (state == PathState::live && f.faulted) {
      f.acked_at_recovery = striped_->stats().paths[path].bytes_acked;
    }
    char at[32];
    std::snprintf(at, sizeof at, "%.6f", wall_seconds());
    f.events.push_back("path_event path=" + std::to_string(path) + " state=" + std::string(to_string(state)) +
                       " at=" + at + " why=\"" + std::string(why) + "\"");
  }

  void pump() {
    if (closing_) return;
    const std::uint64_t count = *o_.count;
    while (next_ < count && next_ - confirmed_ < limit_) {
      if (o_.rate > 0) {
        auto due = start_ + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(static_cast<double>(next_) / o_.rate));
        if (due > Clock::now()) {
          pace_.expires_at(due);
          pace_.async_wait([this](const boost::system::error_code& ec) {
            if (!ec) pump();
          });
          return;
        }
      }
      capnp::MallocMessageBuilder b;
      build_message(b, next_, o_.size);
      link_->send(b);
      ++next_;
    }
    if (next_ == count) {
      closing_ = true;
      sent_at_ = Clock::now();
      if (striped_) before_close_ = striped_->stats();
      link_->close("done");  // flushes: every byte acknowledged (striped) or written (plain)
    }
  }

  void finish(std::string reason) {
    pace_.cancel();
    const auto end = Clock::now();
    bool ok = closing_ && reason == "done";
    if (!ok) std::fprintf(stderr, "canopy-stripe-peer: link closed before the end: %s\n", reason.c_str());
    std::printf("messages_sent=%llu\n", static_cast<unsigned long long>(next_));
    std::printf("seconds=%.3f\n", std::chrono::duration<double>(end - start_).count());
    if (closing_) std::printf("flush_seconds=%.3f\n", std::chrono::duration<double>(end - sent_at_).count());
    if (striped_) print_stats();
    std::printf("result=%s\n", ok ? "ok" : "failed");
    std::fflush(stdout);
    exit_code_ = ok ? 0 : 1;
    io_.stop();
  }

  void print_stats() {
    auto s = striped_->stats();
    std::printf("link_retransmissions=%llu\nlink_timeouts=%llu\nlink_failovers=%llu\nlink_nacks_received=%llu\n"
                "link_round_trip_ms=%.2f\n",
                static_cast<unsigned long long>(s.retransmissions), static_cast<unsigned long long>(s.timeouts),
                static_cast<unsigned long long>(s.failovers), static_cast<unsigned long long>(s.nacks_received),
                s.round_trip_ms);
    // Corrupt frames from the receiver (its progress reports, with --corrupt there)
    // caught on this end.
    std::printf("link_checksum_failures=%llu\n", static_cast<unsigned long long>(s.checksum_failures));
    for (std::size_t i = 0; i < s.paths.size(); ++i) {
      const auto& p = s.paths[i];
      auto key = [&](const char* name) { return "path" + std::to_string(i) + "_" + name; };
      // The state before close(), which closes every path.
      auto state = before_close_ ? before_close_->paths[i].state : p.state;
      std::printf("%s=%s\n", key("state").c_str(), std::string(to_string(state)).c_str());
      for (auto [name, value] : {std::pair{"bytes_sent", p.bytes_sent},
                                 {"bytes_acked", p.bytes_acked},
                                 {"retransmissions", p.retransmissions},
                                 {"corruptions_injected", p.corruptions_injected},
                                 {"timeouts", p.timeouts},
                                 {"failures", p.failures},
                                 {"rejoins", p.rejoins}}) {
        std::printf("%s=%llu\n", key(name).c_str(), static_cast<unsigned long long>(value));
      }
      // Proof that a path that failed (or was suspected) carried data again after it
      // came back: bytes acknowledged among fragments sent on it since then.
      const auto& f = faults_[i];
      if (f.faulted) {
        std::uint64_t after = f.acked_at_recovery ? p.bytes_acked - *f.acked_at_recovery : 0;
        std::printf("%s=%llu\n", key("acked_since_recovery").c_str(), static_cast<unsigned long long>(after));
      }
    }
    if (o_.paths_report) {
      for (const auto& f : faults_) {
        for (const auto& e : f.events) std::printf("%s\n", e.c_str());
      }
    }
  }

  asio::io_context& io_;
  Options o_;
  std::shared_ptr<Link> link_;
  std::shared_ptr<StripedLink> striped_;
  std::optional<LinkStats> before_close_;
  std::vector<Faults> faults_;
  asio::steady_timer pace_;
  std::uint64_t next_ = 0, confirmed_ = 0, limit_ = 0;
  Clock::time_point start_, sent_at_;
  bool closing_ = false;
  int exit_code_ = 1;
};

constexpr const char* kUsage =
    "usage: canopy-stripe-peer serve --listen A1[,A2...] --port P [--count N] [--report FILE] [common]\n"
    "       canopy-stripe-peer send --local L1[,L2...] --remote R1[,R2...] --port P --count N --size BYTES\n"
    "                               [--rate MSGS_PER_S] [--window BYTES] [--checksum crc32c|additive|none]\n"
    "                               [--paths-report] [common]\n"
    "common: [--plain] [--corrupt FRACTION] [--retransmit MS] [--keepalive MS] [--path-silence MS]\n"
    "        [--link-timeout MS]\n"
    "  serve   receives one link and checks every message: exactly once, in order, intact;\n"
    "          prints received= lost= duplicated= reordered= corrupt= bytes= seconds= MBps= max_gap_ms=\n"
    "          and exits 0 only if nothing was lost, duplicated, reordered or corrupt and N arrived\n"
    "  send    sends N messages of BYTES padding (paced at --rate, else as fast as the receiver's\n"
    "          progress reports allow, at most --window bytes ahead: default 8 MiB), closes (which\n"
    "          flushes) and prints the link's statistics, one key=value a line\n"
    "  --plain a plain TcpLink over the first address only; otherwise a StripedLink, one path per\n"
    "          address pair (paths_between)\n"
    "  --corrupt, --retransmit (initial time-out), --keepalive, --path-silence, --link-timeout:\n"
    "          StripedOptions corrupt_fraction, retransmit.initial, keepalive, path_silence, link_timeout\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf("%s", kUsage);
    return 0;
  }
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const Usage& u) {
    std::fprintf(stderr, "canopy-stripe-peer: %s (try --help)\n", u.message.c_str());
    return 2;
  }
  asio::io_context io;
  try {
    if (o.mode == "serve") {
      Receiver receiver(io, o);
      receiver.listen();
      io.run();
      return receiver.exit_code();
    }
    Sender sender(io, o);
    if (!sender.connect()) return 1;
    sender.start();
    io.run();
    return sender.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "canopy-stripe-peer: %s\n", e.what());
    return 1;
  }
}
