// A node's listening socket sits above its links (core/listener.cpp), so that
// when the process is killed the kernel closes it first: a probe of a dead
// parent is refused by the time any orphan has read its link's end
// (docs/fault-tolerance.md).
#include <capnp/message.h>
#include <capnp/serialize.h>

#include "core/listener.h"
#include "transport/frame.h"
#include "transport/tcp_link.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace canopy::testing {
namespace {

constexpr int kLinks = 64;

// A socket connected to 127.0.0.1:`port`, or -1.
int connect_to(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr *>(&to), sizeof to) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

// Every socket descriptor of this process that listens, and every other one.
void sockets_of_this_process(std::vector<int> &listening, std::vector<int> &others) {
  for (int fd = 0; fd < 8192; ++fd) {
    int accepting = 0;
    socklen_t size = sizeof accepting;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &size) != 0) continue;  // not a socket
    (accepting ? listening : others).push_back(fd);
  }
}

// The size of this process's table of descriptors (FDSize in /proc/self/status).
long descriptor_table_size() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("FDSize:", 0) == 0) return std::stol(line.substr(7));
  }
  return -1;
}

// A front-end grows its table before its loop's thread starts (frontend/network.cpp):
// grown later, with threads, the kernel first waits for an RCU grace period (a first
// launch of b:2^2 waited 11 ms between its topology and its listening socket).
TEST(Listener, ReservingGrowsTheDescriptorTableToWhereAListenerMoves) {
  rlimit files{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
  const long top = files.rlim_cur == RLIM_INFINITY ? 4096 : std::min<long>(files.rlim_cur, 4096);
  if (top <= 128) GTEST_SKIP() << "RLIMIT_NOFILE " << files.rlim_cur << ": no listener moves";
  const long before = descriptor_table_size();
  ASSERT_GT(before, 0);
  if (before >= top - 32) GTEST_SKIP() << "this process's table is grown already (" << before << ")";
  const auto open_before = std::distance(std::filesystem::directory_iterator("/proc/self/fd"), {});
  core::reserve_listener_descriptor();
  EXPECT_GE(descriptor_table_size(), top - 32);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator("/proc/self/fd"), {}), open_before)
      << "a descriptor was left open";
  // A listener then moves up without growing it further.
  boost::asio::io_context io;
  core::Listener listener(io);
  ASSERT_TRUE(listener.open({"127.0.0.1"}, 0, {}, {}, [](auto) {}));
  EXPECT_LE(descriptor_table_size(), 4096);
}

// --ports LO-HI (issue 49): a listener takes a free port of the range, and says so
// when none is left, naming the range.
TEST(Listener, AListenerWithARangeTakesAFreePortOfItOrSaysNoneIsLeft) {
  boost::asio::io_context io;
  // A port the kernel chose, free a moment ago: a range of it alone.
  core::Listener probe(io);
  ASSERT_TRUE(probe.open({"127.0.0.1"}, 0, {}, {}, [](auto) {}));
  const std::uint16_t port = probe.port();
  probe.close();
  const canopy::PortRange one{port, port};
  core::Listener first(io);
  auto opened = first.open({"127.0.0.1"}, 0, one, {}, [](auto) {});
  if (!opened) GTEST_SKIP() << "port " << port << " was taken meanwhile: " << opened.error();
  EXPECT_EQ(first.port(), port);
  core::Listener second(io);
  auto full = second.open({"127.0.0.1"}, 0, one, {}, [](auto) {});
  ASSERT_FALSE(full);
  EXPECT_NE(full.error().find("no free port in " + canopy::to_string(one) + " (the tree's port range) on 127.0.0.1: "
                              "all 1 are taken"),
            std::string::npos)
      << full.error();
  // A wider range round it: another port of it.
  const canopy::PortRange round{static_cast<std::uint16_t>(std::max(1, port - 20)),
                                static_cast<std::uint16_t>(std::min(65535, port + 20))};
  core::Listener third(io);
  auto wide = third.open({"127.0.0.1"}, 0, round, {}, [](auto) {});
  ASSERT_TRUE(wide) << wide.error();
  EXPECT_GE(third.port(), round.first);
  EXPECT_LE(third.port(), round.last);
  EXPECT_NE(third.port(), port);
}

TEST(Listener, ListensAboveEveryLinkOpenedAfterIt) {
  boost::asio::io_context io;
  core::Listener listener(io);
  std::vector<std::shared_ptr<transport::Link>> links;
  ASSERT_TRUE(listener.open({"127.0.0.1"}, 0, {}, {}, [&](auto link) { links.push_back(std::move(link)); }));
  std::vector<int> clients;
  for (int i = 0; i < kLinks; ++i) {
    const int fd = connect_to(listener.port());
    ASSERT_GE(fd, 0) << std::strerror(errno);
    clients.push_back(fd);
    ASSERT_EQ(::send(fd, "canopy!!", 8, MSG_NOSIGNAL), 8);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (links.size() < kLinks && std::chrono::steady_clock::now() < deadline)
    io.run_for(std::chrono::milliseconds(10));
  ASSERT_EQ(links.size(), static_cast<std::size_t>(kLinks));
  std::vector<int> listening, others;
  sockets_of_this_process(listening, others);
  ASSERT_EQ(listening.size(), 1u);
  ASSERT_GE(others.size(), 2u * kLinks);  // both ends of every link
  for (int fd : others) EXPECT_LT(fd, listening.front()) << "a socket lies above the listener";
  for (int fd : clients) ::close(fd);
}

// The effect, on a real process: killed with 64 links open, its port refuses a
// connection by the time the first of them reads its end. A listener below its
// links (as it was) is closed last, and accepts that connection.
TEST(Listener, AKilledProcessRefusesConnectionsBeforeItsLinksEnd) {
  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ready[0]);
    boost::asio::io_context io;
    core::Listener listener(io);
    std::vector<std::shared_ptr<transport::Link>> links;
    bool told = false;
    if (!listener.open({"127.0.0.1"}, 0, {}, {}, [&](auto link) {
          links.push_back(std::move(link));
          if (links.size() == kLinks && !told) {
            told = true;
            const char byte = 1;
            (void)!::write(ready[1], &byte, 1);
          }
        })) {
      ::_exit(1);
    }
    const std::uint16_t port = listener.port();
    (void)!::write(ready[1], &port, sizeof port);
    io.run_for(std::chrono::seconds(30));  // killed long before
    ::_exit(2);
  }
  ::close(ready[1]);
  struct Reap {
    pid_t pid;
    ~Reap() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reap{pid};
  std::uint16_t port = 0;
  ASSERT_EQ(::read(ready[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  std::vector<pollfd> clients;
  for (int i = 0; i < kLinks; ++i) {
    const int fd = connect_to(port);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ASSERT_EQ(::send(fd, "canopy!!", 8, MSG_NOSIGNAL), 8);
    clients.push_back({fd, POLLIN, 0});
  }
  pollfd all_in{ready[0], POLLIN, 0};
  ASSERT_EQ(::poll(&all_in, 1, 10000), 1) << "the process did not take every link";
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);

  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_GT(::poll(clients.data(), clients.size(), 10000), 0) << "no link ended within 10 s";
  const int probe = connect_to(port);
  const int why = errno;
  EXPECT_LT(probe, 0) << "a connection was accepted after a link of the killed "
                         "process had ended";
  if (probe < 0) {
    EXPECT_EQ(why, ECONNREFUSED) << std::strerror(why);
  } else {
    ::close(probe);
  }
  for (auto &c : clients) ::close(c.fd);
}

// A TcpLink on loopback, started, and the plain socket at its other end.
class TcpLinkToPeer : public ::testing::Test {
 protected:
  void SetUp() override {
    peer = connect_to(acceptor.local_endpoint().port());
    ASSERT_GE(peer, 0) << std::strerror(errno);
    link = transport::TcpLink::create(acceptor.accept());
    link->start([](capnp::MessageReader&) {}, [](std::string_view) {});
  }
  void TearDown() override {
    if (link) link->abort("done");
    if (peer >= 0) ::close(peer);
  }

  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor{io, {boost::asio::ip::make_address("127.0.0.1"), 0}};
  int peer = -1;
  std::shared_ptr<transport::TcpLink> link;
};

// While corked, a link writes nothing: the messages of a burst wait, and leave
// together when it is uncorked.
TEST_F(TcpLinkToPeer, ACorkedBurstLeavesOnlyWhenUncorked) {
  auto readable = [&] {
    char byte;
    return ::recv(peer, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
  };
  {
    const transport::Cork burst(link);
    for (int i = 0; i < 5; ++i) {
      capnp::MallocMessageBuilder message;
      message.initRoot<capnp::AnyPointer>().setAs<capnp::Text>("part of a burst");
      link->send(message);
    }
    io.poll();
    EXPECT_GT(link->queued_bytes(), 0u);
    EXPECT_FALSE(readable()) << "a corked link wrote";
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (link->queued_bytes() > 0 && std::chrono::steady_clock::now() < deadline) io.run_for(std::chrono::milliseconds(1));
  EXPECT_EQ(link->queued_bytes(), 0u);
  pollfd in{peer, POLLIN, 0};
  ASSERT_EQ(::poll(&in, 1, 10000), 1);
  EXPECT_TRUE(readable());
}

// A burst queued while the peer reads nothing spans many of the link's blocks, and
// one frame is larger than a block: every frame arrives whole and in order, and the
// link's queue is empty once the peer has read it all.
TEST_F(TcpLinkToPeer, ABurstOverManyBlocksArrivesWholeAndInOrder) {
  constexpr std::uint32_t kFrames = 20000;
  constexpr std::uint32_t kLarge = 7777;  // this one is 1 MiB
  auto words_of = [](std::uint32_t i) -> std::uint32_t { return i == kLarge ? (1u << 17) : i % 97; };
  std::uint64_t sent = 0;
  for (std::uint32_t i = 0; i < kFrames; ++i) {
    capnp::MallocMessageBuilder message;
    auto list = message.initRoot<capnp::AnyPointer>().initAs<capnp::List<std::uint64_t>>(words_of(i) + 1);
    list.set(0, i);
    for (std::uint32_t w = 1; w <= words_of(i); ++w) list.set(w, i * 1000003ull + w);
    link->send(message);
    sent += capnp::computeSerializedSizeInWords(message) * 8;
    io.poll();  // writes start, and stall once the socket is full
  }
  EXPECT_GT(link->queued_bytes(), 0u) << "the peer read nothing, yet all " << sent << " bytes left";
  transport::FrameReader reader;
  std::uint32_t next = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (next < kFrames && std::chrono::steady_clock::now() < deadline) {
    io.poll();
    auto space = reader.prepare();
    const ssize_t n = ::recv(peer, space.data(), space.size(), MSG_DONTWAIT);
    if (n <= 0) {
      ASSERT_TRUE(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) << "the link's end closed";
      io.run_for(std::chrono::milliseconds(1));
      continue;
    }
    reader.commit(static_cast<std::size_t>(n));
    while (auto frame = reader.next()) {
      capnp::FlatArrayMessageReader message(kj::arrayPtr(frame->body.data(), frame->body.size()));
      auto list = message.getRoot<capnp::AnyPointer>().getAs<capnp::List<std::uint64_t>>();
      ASSERT_EQ(list.size(), words_of(next) + 1) << "frame " << next;
      ASSERT_EQ(list[0], next);
      for (std::uint32_t w = 1; w <= words_of(next); ++w) ASSERT_EQ(list[w], next * 1000003ull + w) << "frame " << next;
      ++next;
    }
    ASSERT_TRUE(reader.error().empty()) << reader.error();
  }
  EXPECT_EQ(next, kFrames) << "frames read before the time-out";
  io.poll();
  EXPECT_EQ(link->queued_bytes(), 0u);
}

// Two TcpLinks, the ends of one connection on loopback (`a` accepted, `b` dialled).
std::pair<std::shared_ptr<transport::TcpLink>, std::shared_ptr<transport::TcpLink>> linked_pair(
    boost::asio::io_context& io) {
  boost::asio::ip::tcp::acceptor acceptor{io, {boost::asio::ip::make_address("127.0.0.1"), 0}};
  boost::asio::ip::tcp::socket dialled(io);
  dialled.connect(acceptor.local_endpoint());
  auto accepted = transport::TcpLink::create(acceptor.accept());
  return {std::move(accepted), transport::TcpLink::create(std::move(dialled))};
}

// Issue 47: a TCP link that had carried anything held a 64 KB receive buffer and a
// send block (256 KB) for ever, at both ends; a process of the tree has a link to
// each neighbour, quiet most of the time. Now a link with nothing to send holds no
// send buffer, and one whose last read found little holds little to read into
// (transport/tcp_link.h), nothing while it waits; a large message in between changes
// neither, and arrives whole.
TEST(TcpLink, AQuietLinkHoldsNoBufferWhileItWaitsAfterCarryingALargeMessage) {
  boost::asio::io_context io;
  auto ends = linked_pair(io);  // not a structured binding: clang 14's lambdas cannot capture one
  auto a = ends.first, b = ends.second;
  struct Heard {
    std::vector<std::uint64_t> first;  // each message's first word
    std::uint64_t large_sum = 0;       // of the large message's words
  };
  Heard at_a, at_b;
  auto record = [](Heard& heard) {
    return [&heard](capnp::MessageReader& message) {
      auto list = message.getRoot<capnp::AnyPointer>().getAs<capnp::List<std::uint64_t>>();
      heard.first.push_back(list[0]);
      if (list.size() > 1000) {
        for (auto w : list) heard.large_sum += w;
      }
    };
  };
  std::string closed;
  a->start(record(at_a), [&](std::string_view why) { closed = "a: " + std::string(why); });
  b->start(record(at_b), [&](std::string_view why) { closed = "b: " + std::string(why); });
  auto send = [](transport::TcpLink& link, std::uint64_t first, std::uint32_t words) {
    capnp::MallocMessageBuilder message;
    auto list = message.initRoot<capnp::AnyPointer>().initAs<capnp::List<std::uint64_t>>(words);
    for (std::uint32_t w = 0; w < words; ++w) list.set(w, first + w);
    link.send(message);
  };
  auto run_until = [&](auto done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done() && closed.empty() && std::chrono::steady_clock::now() < deadline) {
      io.run_for(std::chrono::milliseconds(1));
    }
    io.poll();  // the last writes' completions
  };

  constexpr std::uint32_t kLargeWords = 1u << 17;  // 1 MiB
  for (std::uint64_t i = 0; i < 100; ++i) {
    send(*a, i, 3);
    send(*b, i, 3);
  }
  send(*a, 100, kLargeWords);
  run_until([&] { return at_a.first.size() == 100 && at_b.first.size() == 101; });
  ASSERT_EQ(closed, "");
  ASSERT_EQ(at_b.first.size(), 101u);
  ASSERT_EQ(at_a.first.size(), 100u);
  const std::uint64_t n = kLargeWords;
  EXPECT_EQ(at_b.large_sum, n * 100 + n * (n - 1) / 2) << "the large message did not arrive whole";
  for (std::uint64_t i = 0; i <= 100; ++i) EXPECT_EQ(at_b.first[i], i);

  // Then a few small ones each way, as heartbeats would be.
  for (std::uint64_t i = 200; i < 203; ++i) {
    send(*a, i, 3);
    send(*b, i, 3);
  }
  run_until([&] { return at_a.first.size() == 103 && at_b.first.size() == 104; });
  ASSERT_EQ(closed, "");
  ASSERT_EQ(at_b.first.size(), 104u);
  EXPECT_EQ(a->queued_bytes(), 0u);
  EXPECT_EQ(b->queued_bytes(), 0u);
  // A link whose reads are small waits for its peer without a read buffer: 0 bytes
  // (512 until stop 76, twice what its last read found; 64 KiB + 256 KiB before stop
  // 69).
  EXPECT_EQ(a->buffer_bytes(), 0u);
  EXPECT_EQ(b->buffer_bytes(), 0u);

  // Waiting so, it still reads what comes, also what came while its reading was
  // paused, once resumed, and still holds nothing after.
  b->pause_reading(true);
  for (std::uint64_t i = 300; i < 303; ++i) send(*a, i, 3);
  run_until([&] { return a->queued_bytes() == 0; });
  b->pause_reading(false);
  send(*b, 400, 3);
  run_until([&] { return at_a.first.size() == 104 && at_b.first.size() == 107; });
  ASSERT_EQ(closed, "");
  ASSERT_EQ(at_b.first.size(), 107u);
  ASSERT_EQ(at_a.first.size(), 104u);
  EXPECT_EQ(at_b.first[106], 302u);
  EXPECT_EQ(at_a.first[103], 400u);
  EXPECT_EQ(a->buffer_bytes(), 0u);
  EXPECT_EQ(b->buffer_bytes(), 0u);
  a->abort("done");
  b->abort("done");
}

// Issue 47: a commnode has a link to each child, nearly all never closing and none
// with watermarks (only a link up holds its sender back). Each held a close reason and
// a linger timer (152 bytes) and its watermarks with their handler (48): a TcpLink
// was 640 bytes. Both are made when used now, and a link closes and signals its
// watermarks as before: a close flushes what is queued, lingers until the peer's end
// of file and names its reason at once end; watermarks rise and fall with the queue.
TEST(TcpLink, ALinkHoldsNoCloseStateOrWatermarksUntilItUsesThem) {
  EXPECT_LE(sizeof(transport::TcpLink), 448u) << "what closing or watermarks take is held in every link";

  boost::asio::io_context io;
  auto ends = linked_pair(io);  // not a structured binding: clang 14's lambdas cannot capture one
  auto a = ends.first, b = ends.second;
  std::uint64_t heard_sum = 0, heard = 0;
  std::string a_closed, b_closed;
  a->start([](capnp::MessageReader&) {}, [&](std::string_view why) { a_closed = why; });
  b->start(
      [&](capnp::MessageReader& message) {
        for (auto w : message.getRoot<capnp::AnyPointer>().getAs<capnp::List<std::uint64_t>>()) heard_sum += w;
        ++heard;
      },
      [&](std::string_view why) { b_closed = why; });
  std::vector<bool> marks;
  a->set_watermarks(64 * 1024, 1024, [&](bool above) { marks.push_back(above); });
  b->pause_reading(true);  // what a sends waits in the kernel, then in a's queue
  constexpr std::uint32_t kWords = 1u << 14;  // 128 KiB a message
  constexpr int kMessages = 64;               // 8 MiB: more than the kernel's buffers hold
  std::uint64_t sent_sum = 0;
  for (int m = 0; m < kMessages; ++m) {
    capnp::MallocMessageBuilder message;
    auto list = message.initRoot<capnp::AnyPointer>().initAs<capnp::List<std::uint64_t>>(kWords);
    for (std::uint32_t w = 0; w < kWords; ++w) {
      list.set(w, m * 7919ull + w);
      sent_sum += m * 7919ull + w;
    }
    a->send(message);
  }
  io.poll();
  ASSERT_EQ(marks, std::vector<bool>{true}) << "the queue passed its high watermark";
  EXPECT_TRUE(a->above_high());
  a->close("done sending");  // flushes what is queued first
  b->pause_reading(false);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((a_closed.empty() || heard < kMessages) && std::chrono::steady_clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(1));
    if (heard == kMessages && b_closed.empty() && b->is_open()) b->close("peer closed");
  }
  EXPECT_EQ(heard, static_cast<std::uint64_t>(kMessages)) << "a close dropped what was queued";
  EXPECT_EQ(heard_sum, sent_sum);
  EXPECT_EQ(marks, (std::vector<bool>{true, false})) << "the queue fell back to its low watermark";
  EXPECT_FALSE(a->above_high());
  EXPECT_EQ(a_closed, "done sending");
  EXPECT_FALSE(a->is_open());
}

// Issue 47: a link kept its owner's two handlers as std::function objects, 64 bytes
// of every link (a commnode holds one a child). An owner with many links now gives
// one LinkHandler and tells its links apart by the purpose it started each with; a
// link holds a pointer. Both ways of starting hand out every message and then the
// close once, with the link and its purpose; a link started with functions may be
// dropped by its own close handler.
TEST(TcpLink, ALinkHoldsOnePointerForItsHandlersAndTellsItsOwnerItsPurpose) {
  EXPECT_LE(sizeof(transport::TcpLink), 392u) << "a link holds its handlers in place again";

  struct Owner final : transport::LinkHandler {
    std::vector<std::pair<int, std::uint64_t>> heard;  // (purpose, first word)
    std::vector<std::pair<int, std::string>> closed;   // (purpose, reason)
    transport::Link* expected = nullptr;
    bool right_link = true;
    void on_link_message(transport::Link& link, capnp::MessageReader& message) override {
      right_link = right_link && &link == expected;
      heard.emplace_back(link.purpose(), message.getRoot<capnp::AnyPointer>().getAs<capnp::List<std::uint64_t>>()[0]);
    }
    void on_link_closed(transport::Link& link, std::string_view reason) override {
      right_link = right_link && &link == expected;
      closed.emplace_back(link.purpose(), std::string(reason));
    }
  };
  boost::asio::io_context io;
  auto ends = linked_pair(io);  // not a structured binding: clang 14's lambdas cannot capture one
  auto a = ends.first;
  auto b = ends.second;
  Owner owner;
  owner.expected = a.get();
  a->start(owner, 7);
  EXPECT_EQ(a->purpose(), 7);
  std::vector<std::uint64_t> b_heard;
  std::string b_closed;
  b->start([&](capnp::MessageReader& message) {
             b_heard.push_back(message.getRoot<capnp::AnyPointer>().getAs<capnp::List<std::uint64_t>>()[0]);
           },
           [&](std::string_view why) {
             b_closed = why;
             b.reset();  // the last owner: the link goes inside its own close handler
           });
  auto send = [](transport::Link& link, std::uint64_t first) {
    capnp::MallocMessageBuilder message;
    message.initRoot<capnp::AnyPointer>().initAs<capnp::List<std::uint64_t>>(1).set(0, first);
    link.send(message);
  };
  for (std::uint64_t m = 0; m < 3; ++m) {
    send(*a, 100 + m);
    send(*b, 200 + m);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((owner.heard.size() < 3 || b_heard.size() < 3) && std::chrono::steady_clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(1));
  }
  a->close("done");
  while ((owner.closed.empty() || b) && std::chrono::steady_clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(owner.heard, (std::vector<std::pair<int, std::uint64_t>>{{7, 200}, {7, 201}, {7, 202}}));
  EXPECT_EQ(b_heard, (std::vector<std::uint64_t>{100, 101, 102}));
  EXPECT_EQ(owner.closed, (std::vector<std::pair<int, std::string>>{{7, "done"}}));
  EXPECT_EQ(b_closed, "connection closed by peer");
  EXPECT_EQ(b, nullptr) << "the close handler dropped its link";
  EXPECT_TRUE(owner.right_link);
}

}  // namespace
}  // namespace canopy::testing
