// canopy-link-bench: latency and bandwidth of one link on loopback, like Table 1 of
// the LA-MPI paper (paper 002): plain TcpLink against StripedLink with one path
// (without checksum, with CRC-32C, with the additive checksum, with reliability off)
// and with two paths (127.0.0.1 and 127.0.0.2).
//
//   latency:   median round trip of a small message (ping-pong), microseconds
//   bandwidth: 1 GiB in 1 MiB messages, one way (--quick: 128 MiB), MB/s (10^6 B/s)
//
// Each variant is measured `--runs` times, the variants interleaved so that drift in
// the machine's load spreads over all of them; the CSV gives the median of the runs
// and its ratio to plain TCP's median from the same invocation. The two sides run
// on two threads, each with its own io_context, as two processes would. Output: CSV
// on stdout, progress on stderr. Never run by ctest (docs/striping.md).
//
// A bandwidth run counts only if it was right: the receiver checks every message (its
// tag and first 8 bytes are its sequence number, the rest a fixed pattern, compared
// with memcmp, for every variant alike), and with two paths each path must have
// carried a share of the stream (> 0 bytes acknowledged on each) and the paths'
// shares must add up to the stream sent, which the receiver delivered whole.
// Otherwise the program stops with "canopy-link-bench: FAILED ..." and status 1.
#include <capnp/message.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "canopy.capnp.h"
#include "core/loop_thread.h"
#include "transport/striped_link.h"
#include "transport/tcp_link.h"

using namespace canopy;
using namespace canopy::transport;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

struct Variant {
  std::string name;
  bool striped = false;
  std::size_t paths = 1;
  ChecksumKind checksum = ChecksumKind::none;
  bool reliable = true;
};

struct Config {
  bool quick = false;
  int runs = 5;
  std::size_t message_bytes = 1u << 20;
  std::uint64_t total_bytes = 1ull << 30;
  int round_trips = 20000;
  std::size_t window_messages = 16;  // in flight during the bandwidth test
  StripedOptions striped;            // fragment, write and receive-buffer sizes from the command line
};

// A connected pair of links, the server end on `server`, the client end on `client`.
struct Pair {
  std::shared_ptr<Link> client, server;
};

Pair connect_pair(const Variant& v, const Config& c, core::LoopThread& server, core::LoopThread& client) {
  const std::vector<std::string> addresses{"127.0.0.1", "127.0.0.2"};
  std::vector<std::unique_ptr<tcp::acceptor>> listeners;
  std::vector<PathEndpoints> paths;
  std::promise<std::shared_ptr<Link>> server_end;
  std::unique_ptr<StripedAcceptor> striped;
  server.call([&] {
    for (std::size_t i = 0; i < v.paths; ++i) {
      auto l = std::make_unique<tcp::acceptor>(server.io(), tcp::endpoint(asio::ip::make_address(addresses[i]), 0));
      paths.push_back({addresses[i], addresses[i], l->local_endpoint().port()});
      listeners.push_back(std::move(l));
    }
    if (v.striped) {
      striped = std::make_unique<StripedAcceptor>(server.io(), c.striped,
                                                  [&](std::shared_ptr<StripedLink> link) { server_end.set_value(link); });
      for (auto& l : listeners) {
        l->async_accept([&](const boost::system::error_code& ec, tcp::socket s) {
          if (!ec) striped->take(std::move(s));
        });
      }
    } else {
      listeners[0]->async_accept([&](const boost::system::error_code& ec, tcp::socket s) {
        if (!ec) server_end.set_value(TcpLink::create(std::move(s)));
      });
    }
  });
  Pair pair;
  if (v.striped) {
    StripedOptions options = c.striped;
    options.checksum = v.checksum;
    options.reliable = v.reliable;
    std::promise<Result<std::shared_ptr<StripedLink>>> connected;
    client.post([&] {
      StripedLink::async_connect(client.io(), paths, options,
                                 [&](Result<std::shared_ptr<StripedLink>> r) { connected.set_value(std::move(r)); });
    });
    auto r = connected.get_future().get();
    if (!r) throw std::runtime_error(r.error());
    pair.client = *r;
    // Every path up before measuring.
    auto link = *r;
    while (client.call([&] { return link->live_paths(); }) < v.paths) std::this_thread::sleep_for(1ms);
  } else {
    pair.client = client.call([&] {
      boost::system::error_code ec;
      auto s = connect_tcp(client.io(), paths[0].remote_address, paths[0].remote_port, ec);
      if (ec) throw std::runtime_error("connect: " + ec.message());
      return std::shared_ptr<Link>(TcpLink::create(std::move(s)));
    });
  }
  pair.server = server_end.get_future().get();
  server.call([&] {
    listeners.clear();
    striped.reset();
  });
  return pair;
}

void detach(Pair& pair, core::LoopThread& server, core::LoopThread& client) {
  client.call([&] { pair.client->detach(); });
  server.call([&] { pair.server->detach(); });
  std::this_thread::sleep_for(20ms);  // aborted handlers let go of the links
}

void set_tag(capnp::MallocMessageBuilder& b, std::int32_t tag) {
  b.getRoot<wire::DataPacket>().setTag(tag);
}

// Median round trip of a small message, in microseconds.
double measure_latency(Pair& pair, core::LoopThread& server, core::LoopThread& client, int round_trips) {
  auto server_link = pair.server;
  server.call([&] {
    server_link->start(
        [server_link](capnp::MessageReader& message) {
          auto m = message.getRoot<wire::DataPacket>();
          capnp::MallocMessageBuilder reply;
          reply.initRoot<wire::DataPacket>().setTag(m.getTag());
          server_link->send(reply);
        },
        [](std::string_view) {});
  });
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(round_trips));
  std::promise<void> done;
  auto client_link = pair.client;
  auto ping = std::make_shared<capnp::MallocMessageBuilder>();
  ping->initRoot<wire::DataPacket>().setTag(0);
  Clock::time_point sent_at;
  int warmup = std::max(10, round_trips / 20), count = 0;
  client.call([&] {
    client_link->start(
        [&](capnp::MessageReader&) {
          auto now = Clock::now();
          if (count >= warmup) samples.push_back(std::chrono::duration<double, std::micro>(now - sent_at).count());
          if (++count == round_trips + warmup) {
            done.set_value();
            return;
          }
          sent_at = Clock::now();
          client_link->send(*ping);
        },
        [](std::string_view) {});
    sent_at = Clock::now();
    client_link->send(*ping);
  });
  done.get_future().wait();
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

double cpu_seconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

struct Bandwidth {
  double mb_per_s;
  double cpu_s_per_gib;  // user + system time of both ends (the whole process), per GiB
};

// The payload of message `seq` in the bandwidth test: its first 8 bytes are `seq`
// (little-endian), byte i >= 8 is i * 13 (mod 256).
constexpr std::size_t kSeqBytes = 8;
std::vector<capnp::byte> payload_pattern(std::size_t size) {
  std::vector<capnp::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<capnp::byte>(i * 13);
  return bytes;
}
void put_seq(capnp::byte* at, std::uint64_t seq) {
  for (std::size_t i = 0; i < kSeqBytes; ++i) at[i] = static_cast<capnp::byte>(seq >> (8 * i));
}

// The receiver's check of one message; empty if it is message `seq`, intact.
std::string check_message(capnp::MessageReader& message, std::uint64_t seq, const std::vector<capnp::byte>& pattern) {
  auto m = message.getRoot<wire::DataPacket>();
  if (static_cast<std::uint64_t>(m.getTag()) != seq) {
    return "message " + std::to_string(seq) + " has the tag " + std::to_string(m.getTag());
  }
  auto values = m.getValues();
  if (values.size() != 1 || !values[0].isBytes()) return "message " + std::to_string(seq) + " has no bytes value";
  auto bytes = values[0].getBytes();
  if (bytes.size() != pattern.size()) {
    return "message " + std::to_string(seq) + " has " + std::to_string(bytes.size()) + " bytes, not " +
           std::to_string(pattern.size());
  }
  capnp::byte want[kSeqBytes];
  put_seq(want, seq);
  if (std::memcmp(bytes.begin(), want, kSeqBytes) != 0) {
    return "message " + std::to_string(seq) + " carries another sequence number";
  }
  if (std::memcmp(bytes.begin() + kSeqBytes, pattern.data() + kSeqBytes, pattern.size() - kSeqBytes) != 0) {
    return "message " + std::to_string(seq) + "'s bytes differ from the pattern";
  }
  return "";
}

// With several paths: each carried a share of the stream, and the shares add up to it.
// Waits (at most 5 s) until the sender has every byte acknowledged, so that each
// byte is counted on the path that last carried it.
void check_path_shares(Pair& pair, core::LoopThread& server, core::LoopThread& client, const std::string& variant) {
  auto sender = std::dynamic_pointer_cast<StripedLink>(pair.client);
  auto receiver = std::dynamic_pointer_cast<StripedLink>(pair.server);
  if (!sender || !receiver) throw std::runtime_error(variant + ": not a striped link");
  LinkStats sent;
  const auto deadline = Clock::now() + 5s;
  while (true) {
    sent = client.call([&] { return sender->stats(); });
    if (sent.unacked_bytes == 0 || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(1ms);
  }
  LinkStats got = server.call([&] { return receiver->stats(); });
  if (sent.unacked_bytes != 0) {
    throw std::runtime_error(variant + ": " + std::to_string(sent.unacked_bytes) + " bytes never acknowledged");
  }
  std::uint64_t acked = 0;
  std::string shares;
  for (std::size_t i = 0; i < sent.paths.size(); ++i) {
    const auto& path = sent.paths[i];
    if (path.bytes_acked == 0) {
      throw std::runtime_error(variant + ": path " + std::to_string(i) + " (" + path.local + " -> " + path.remote +
                               ") carried no bytes");
    }
    acked += path.bytes_acked;
    shares += " path" + std::to_string(i) + "=" + std::to_string(path.bytes_acked);
  }
  if (acked != sent.bytes_sent || got.bytes_delivered != sent.bytes_sent) {
    throw std::runtime_error(variant + ": the paths' shares add up to " + std::to_string(acked) + " bytes, the receiver " +
                             "delivered " + std::to_string(got.bytes_delivered) + ", the sender sent " +
                             std::to_string(sent.bytes_sent));
  }
  std::fprintf(stderr, "  %s: %llu stream bytes, acknowledged by path:%s\n", variant.c_str(),
               static_cast<unsigned long long>(sent.bytes_sent), shares.c_str());
}

// One-way bandwidth in MB/s: `total` bytes in messages of `size`, at most `window`
// messages ahead of the receiver's reports; timed from the first send to the report
// of the last message. Every message is checked on arrival (check_message); throws
// if one was wrong.
Bandwidth measure_bandwidth(Pair& pair, core::LoopThread& server, core::LoopThread& client, const Config& c) {
  const std::uint64_t messages = c.total_bytes / c.message_bytes;
  // Packet overhead makes the frame slightly larger than the payload.
  const auto pattern = payload_pattern(c.message_bytes - 64);
  auto server_link = pair.server;
  std::uint64_t received = 0, wrong = 0;
  std::string first_wrong;
  server.call([&] {
    server_link->start(
        [&, server_link](capnp::MessageReader& message) {
          if (auto error = check_message(message, received, pattern); !error.empty()) {
            if (wrong++ == 0) first_wrong = error;
          }
          ++received;
          if (received % 4 == 0 || received == messages) {
            capnp::MallocMessageBuilder report;
            report.initRoot<wire::DataPacket>().setTag(static_cast<std::int32_t>(received));
            server_link->send(report);
          }
        },
        [](std::string_view) {});
  });
  auto payload = std::make_shared<capnp::MallocMessageBuilder>();
  auto bytes = payload->initRoot<wire::DataPacket>().initValues(1)[0].initBytes(static_cast<unsigned>(pattern.size()));
  std::memcpy(bytes.begin(), pattern.data(), pattern.size());
  std::promise<void> done;
  std::uint64_t sent = 0, confirmed = 0;
  auto client_link = pair.client;
  Clock::time_point start;
  std::function<void()> pump = [&] {
    while (sent < messages && sent - confirmed < c.window_messages) {
      set_tag(*payload, static_cast<std::int32_t>(sent));
      put_seq(bytes.begin(), sent);
      client_link->send(*payload);
      ++sent;
    }
  };
  Clock::time_point end;
  client.call([&] {
    client_link->start(
        [&](capnp::MessageReader& message) {
          auto m = message.getRoot<wire::DataPacket>();
          confirmed = static_cast<std::uint64_t>(m.getTag());
          if (confirmed == messages) {
            end = Clock::now();
            done.set_value();
            return;
          }
          pump();
        },
        [](std::string_view) {});
    start = Clock::now();
    pump();
  });
  double cpu_before = cpu_seconds();
  done.get_future().wait();
  double cpu = cpu_seconds() - cpu_before;
  const std::uint64_t checked = server.call([&] { return received; });
  const std::uint64_t bad = server.call([&] { return wrong; });
  if (bad > 0) {
    throw std::runtime_error("bandwidth: " + std::to_string(bad) + " of " + std::to_string(checked) +
                             " messages wrong; the first: " + server.call([&] { return first_wrong; }));
  }
  if (checked != messages) {
    throw std::runtime_error("bandwidth: the receiver got " + std::to_string(checked) + " messages, not " +
                             std::to_string(messages));
  }
  double seconds = std::chrono::duration<double>(end - start).count();
  double bytes_total = static_cast<double>(messages * c.message_bytes);
  return {bytes_total / seconds / 1e6, cpu / (bytes_total / (1u << 30))};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  // The links' warnings on stderr, with the progress lines.
  c.striped.log =
      std::make_shared<spdlog::logger>("canopy-link-bench", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  c.striped.log->set_level(spdlog::level::warn);
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      c.quick = true;
      c.runs = 3;
      c.total_bytes = 128ull << 20;
      c.round_trips = 2000;
    } else if (a == "--runs" && i + 1 < argc) {
      c.runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--megabytes" && i + 1 < argc) {
      c.total_bytes = static_cast<std::uint64_t>(std::max(1, std::atoi(argv[++i]))) << 20;
    } else if (a == "--fragment" && i + 1 < argc) {
      c.striped.max_fragment_bytes = std::strtoul(argv[++i], nullptr, 0);
    } else if (a == "--write" && i + 1 < argc) {
      c.striped.max_write_bytes = std::strtoul(argv[++i], nullptr, 0);
    } else if (a == "--receive-buffer" && i + 1 < argc) {
      c.striped.receive_buffer_bytes = std::strtoul(argv[++i], nullptr, 0);
    } else if (a == "--variant" && i + 1 < argc) {
      only.push_back(argv[++i]);
    } else if (a == "--help" || a == "-h") {
      std::printf("usage: canopy-link-bench [--quick] [--runs N] [--megabytes M] [--variant NAME]...\n"
                  "                         [--fragment BYTES] [--write BYTES] [--receive-buffer BYTES]\n"
                  "  --quick        3 runs, 128 MiB, 2000 round trips (default: 5 runs, 1 GiB, 20000)\n"
                  "  --variant NAME measure only these variants (tcp is always measured: the ratios need it)\n"
                  "  --fragment, --write, --receive-buffer: StripedOptions max_fragment_bytes,\n"
                  "                 max_write_bytes, receive_buffer_bytes (defaults 64 KiB, 1 MiB, 256 KiB)\n");
      return 0;
    } else {
      std::fprintf(stderr, "canopy-link-bench: unknown argument '%s' (try --help)\n", a.c_str());
      return 2;
    }
  }
  std::vector<Variant> variants = {
      {"tcp", false, 1, ChecksumKind::none, true},
      {"striped-1path-nochecksum", true, 1, ChecksumKind::none, true},
      {"striped-1path-crc32c", true, 1, ChecksumKind::crc32c, true},
      {"striped-1path-additive", true, 1, ChecksumKind::additive, true},
      {"striped-1path-crc32c-unreliable", true, 1, ChecksumKind::crc32c, false},
      {"striped-2paths-crc32c", true, 2, ChecksumKind::crc32c, true},
  };
  if (!only.empty()) {
    std::erase_if(variants, [&](const Variant& v) {
      return v.name != "tcp" && std::find(only.begin(), only.end(), v.name) == only.end();
    });
  }
  std::vector<std::vector<double>> latency(variants.size()), bandwidth(variants.size()), cpu(variants.size());
  try {
    core::LoopThread server, client;
    for (int run = 0; run < c.runs; ++run) {
      for (std::size_t v = 0; v < variants.size(); ++v) {
        auto pair = connect_pair(variants[v], c, server, client);
        double lat = measure_latency(pair, server, client, c.round_trips);
        detach(pair, server, client);
        pair = connect_pair(variants[v], c, server, client);
        auto bw = measure_bandwidth(pair, server, client, c);
        if (variants[v].paths > 1) check_path_shares(pair, server, client, variants[v].name);
        detach(pair, server, client);
        latency[v].push_back(lat);
        bandwidth[v].push_back(bw.mb_per_s);
        cpu[v].push_back(bw.cpu_s_per_gib);
        std::fprintf(stderr, "run %d/%d %-32s latency %8.1f us  bandwidth %8.0f MB/s  cpu %5.2f s/GiB\n", run + 1,
                     c.runs, variants[v].name.c_str(), lat, bw.mb_per_s, bw.cpu_s_per_gib);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "canopy-link-bench: FAILED %s\n", e.what());
    return 1;
  }
  double tcp_latency = median(latency[0]), tcp_bandwidth = median(bandwidth[0]), tcp_cpu = median(cpu[0]);
  std::printf("variant,paths,checksum,reliable,runs,latency_us,bandwidth_MBps,cpu_s_per_GiB,"
              "latency_vs_tcp,bandwidth_vs_tcp,cpu_vs_tcp\n");
  for (std::size_t v = 0; v < variants.size(); ++v) {
    const auto& x = variants[v];
    double lat = median(latency[v]), bw = median(bandwidth[v]), cp = median(cpu[v]);
    std::printf("%s,%zu,%s,%s,%d,%.1f,%.0f,%.2f,%.2f,%.2f,%.2f\n", x.name.c_str(), x.paths,
                x.striped ? std::string(to_string(x.checksum)).c_str() : "tcp", x.reliable ? "yes" : "no", c.runs,
                lat, bw, cp, lat / tcp_latency, bw / tcp_bandwidth, cp / tcp_cpu);
  }
  return 0;
}
