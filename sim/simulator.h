// Simulator: many Canopy processes in one OS process, on virtual time, over links
// of memory (docs/simulation.md).
//
// Each simulated process is the real node core with its services on an io_context
// of its own, as in a real process, whose timers wait in a TimerQueue the simulator
// keeps (so that the io_context has no reactor: no descriptors). The simulator runs a process (polls its
// io_context until it is idle) only when it has something to do: a frame or an end
// of file arrived on one of its links, a connection came to its port, or one of its
// timers fell due. Time is canopy::ManualTime: it stands still while any process
// runs, and when none has anything to do, it moves straight to the next arrival or
// timer.
//
// A frame sent at virtual time t arrives at t + latency; each process handles its
// arrivals one after another, each taking `cpu` of its virtual time, so that a frame
// reaches its handler at max(t + latency, when the process is free) + cpu. Frames of
// one link stay in order. What each process sends and receives is counted (bytes of
// frames as TCP would carry them, header included, and messages).
#pragma once

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <vector>

#include "transport/clock.h"
#include "transport/fabric.h"
#include "transport/frame.h"
#include "transport/link.h"

namespace canopy::core {
class ScratchPool;  // core/service.h
}  // namespace canopy::core

namespace canopy::sim {

using ProcessId = std::uint32_t;
inline constexpr ProcessId kNoProcess = ~ProcessId{0};

// What a process sent and received over its memory links.
struct Traffic {
  std::uint64_t bytes_sent = 0, messages_sent = 0;
  std::uint64_t bytes_received = 0, messages_received = 0;
};

class MemoryLink;

class Simulator {
 public:
  struct Options {
    std::chrono::microseconds latency{0};  // one way, per frame
    std::chrono::microseconds cpu{0};      // per frame handled
  };
  explicit Simulator(Options options);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // A process whose node runs on `io` (borrowed until remove()). Its fabric is what
  // its node listens and connects with.
  ProcessId add(boost::asio::io_context& io, std::string name);
  transport::Fabric& fabric(ProcessId process);
  // The pool of message segments the process's code takes from (core::ScratchPool):
  // each simulated process has its own, as each real process has, and holds what it
  // keeps there. The simulator makes it the thread's pool while the process runs;
  // code that calls into a process's node outside run_until() makes it so itself.
  core::ScratchPool& scratch(ProcessId process) { return *processes_.at(process).scratch; }
  // The process is gone (killed): nothing of it runs again. Its links must be gone
  // first or go with it (their peers then read an end of file).
  void remove(ProcessId process);

  // Runs processes with something to do, moving virtual time on when none has,
  // until `done()` holds (true) or `limit` of virtual time passes (false).
  // `done` is asked whenever no process has anything left to do at this moment.
  bool run_until(const std::function<bool()>& done, std::chrono::microseconds limit);
  // Runs until nothing is in flight and no process has anything to do but wait for
  // its timers (true), or `limit` passes (false).
  bool run_until_quiet(std::chrono::microseconds limit);
  // Virtual time since the simulator was made.
  std::chrono::microseconds now() const;

  // The process whose handlers run now (kNoProcess between runs).
  ProcessId current() const { return current_; }
  const Traffic& traffic(ProcessId process) const { return processes_.at(process).traffic; }
  std::size_t size() const { return processes_.size(); }
  // Polls of a process's io_context so far, over all processes.
  std::uint64_t runs() const { return runs_; }

  // ---- for MemoryLink and the fabric ----
  // `frame` (whole frames) from `from`'s end of a link to the other end, `to`.
  void transmit(ProcessId from, const std::weak_ptr<MemoryLink>& to, ProcessId to_process,
                std::shared_ptr<transport::FrameBuffer> frame, std::size_t messages);
  // An end of file to `to`, after what was sent to it.
  void transmit_eof(const std::weak_ptr<MemoryLink>& to, ProcessId to_process);
  // Runs `action` on `process`'s io_context as soon as it can run (now).
  void post(ProcessId process, std::function<void()> action);

 private:
  class PortFabric;
  struct Process {
    boost::asio::io_context* io = nullptr;
    TimerQueue* timers = nullptr;  // on io
    std::string name;
    std::unique_ptr<PortFabric> fabric;
    std::unique_ptr<core::ScratchPool> scratch;
    Traffic traffic;
    NodeClock::time_point busy_until{};  // its arrivals are handled one after another
    NodeClock::time_point next_timer = NodeClock::time_point::max();
    bool ready = false;
    bool gone = false;
  };
  struct Arrival {
    NodeClock::time_point at;
    std::uint64_t sequence;
    ProcessId process;
    std::function<void()> action;
    bool operator>(const Arrival& o) const { return at != o.at ? at > o.at : sequence > o.sequence; }
  };
  struct Listening {
    ProcessId process;
    transport::Fabric::OnLink on_link;
  };

  void make_ready(ProcessId process);
  void run(ProcessId process);
  void schedule(ProcessId to, NodeClock::time_point at, std::function<void()> action);
  NodeClock::time_point arrival_time(ProcessId to, bool costs_cpu);

  Options options_;
  ManualTime time_;
  const NodeClock::time_point epoch_;
  std::vector<Process> processes_;
  std::vector<ProcessId> ready_;
  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<>> arrivals_;
  // Processes by the time their next timer falls due (stale entries are skipped:
  // a process's own next_timer says which is current).
  std::priority_queue<std::pair<NodeClock::time_point, ProcessId>, std::vector<std::pair<NodeClock::time_point, ProcessId>>,
                      std::greater<>>
      timers_;
  std::map<std::uint16_t, Listening> ports_;
  std::uint16_t next_port_ = 1;
  std::uint64_t sequence_ = 0;
  std::uint64_t runs_ = 0;
  ProcessId current_ = kNoProcess;
};

// One end of a connection of memory between two simulated processes.
class MemoryLink final : public transport::Link, public std::enable_shared_from_this<MemoryLink> {
 public:
  MemoryLink(Simulator& sim, ProcessId owner, std::string peer_name);
  ~MemoryLink() override;
  // Joins two ends.
  static void pair(const std::shared_ptr<MemoryLink>& a, const std::shared_ptr<MemoryLink>& b);

  void send(capnp::MessageBuilder& message) override;
  void close(std::string_view reason) override;
  void detach() override;
  void abort(std::string_view reason) override;
  void abort_with(capnp::MessageBuilder& last, std::string_view reason) override;
  bool is_open() const override { return open_; }
  const std::string& peer() const override { return peer_name_; }

  // From the simulator, on the owner's io_context.
  void arrive(const transport::FrameBuffer& frame);
  void arrive_eof();

 private:
  void begin() override;
  void take_messages();
  void fail(std::string reason);
  void send_eof();

  Simulator& sim_;
  ProcessId owner_;
  ProcessId peer_process_ = kNoProcess;
  std::weak_ptr<MemoryLink> peer_;
  std::string peer_name_;
  transport::FrameReader reader_;
  bool open_ = true;
  bool eof_sent_ = false;
  std::unique_ptr<std::string> closing_;  // the reason close() gave, made by it (as TcpLink)
};

}  // namespace canopy::sim
