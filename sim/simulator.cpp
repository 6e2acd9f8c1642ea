#include "sim/simulator.h"

#include "core/service.h"
#include "sim/heap_account.h"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace canopy::sim {

// ---- the fabric of one process: ports of the simulator ----

class Simulator::PortFabric final : public transport::Fabric {
 public:
  PortFabric(Simulator& sim, ProcessId process) : sim_(sim), process_(process) {}

  Result<std::uint16_t> listen(boost::asio::io_context&, std::uint16_t port, OnLink on_link) override {
    if (port == 0) {
      if (sim_.next_port_ == 0) return Error{"the simulator has no port left (65,535 listening processes)"};
      port = sim_.next_port_++;
    }
    ChargeHeap sims_own(kNobody);
    if (!sim_.ports_.emplace(port, Listening{process_, std::move(on_link)}).second) {
      return Error{"port " + std::to_string(port) + " is in use"};
    }
    return port;
  }

  void stop_listening(std::uint16_t port) override {
    auto it = sim_.ports_.find(port);
    if (it != sim_.ports_.end() && it->second.process == process_) sim_.ports_.erase(it);
  }

  Connected connect(boost::asio::io_context&, std::uint16_t port) override {
    auto it = sim_.ports_.find(port);
    if (it == sim_.ports_.end()) return {nullptr, "Connection refused", true};
    const ProcessId server = it->second.process;
    auto mine = std::make_shared<MemoryLink>(sim_, process_, sim_.processes_[server].name);
    std::shared_ptr<MemoryLink> theirs;
    {
      ChargeHeap charge(server);  // the listener's end is the listener's, as its socket would be
      theirs = std::make_shared<MemoryLink>(sim_, server, sim_.processes_[process_].name);
    }
    MemoryLink::pair(mine, theirs);
    // The connection reaches the listener after the latency (a handshake's first
    // half); frames sent meanwhile follow it.
    sim_.schedule(server, sim_.arrival_time(server, false), [sim = &sim_, port, theirs] {
      auto at = sim->ports_.find(port);
      if (at == sim->ports_.end()) return theirs->abort("nobody listens any more");
      at->second.on_link(theirs);
    });
    return {std::move(mine), {}, false};
  }

 private:
  Simulator& sim_;
  ProcessId process_;
};

// ---- the simulator ----

Simulator::Simulator(Options options) : options_(options), epoch_(NodeClock::now()) {}

Simulator::~Simulator() = default;

ProcessId Simulator::add(boost::asio::io_context& io, std::string name) {
  ChargeHeap sims_own(kNobody);
  const auto id = static_cast<ProcessId>(processes_.size());
  Process& p = processes_.emplace_back();
  p.io = &io;
  // Its timers wait in the simulator's hands, not in a reactor of its own: a
  // simulated process holds no descriptor.
  p.timers = &TimerQueue::install(io);
  p.name = std::move(name);
  p.fabric = std::make_unique<PortFabric>(*this, id);
  p.scratch = std::make_unique<core::ScratchPool>();
  make_ready(id);  // whatever its start posted
  return id;
}

transport::Fabric& Simulator::fabric(ProcessId process) { return *processes_.at(process).fabric; }

void Simulator::remove(ProcessId process) {
  Process& p = processes_.at(process);
  p.gone = true;
  p.io = nullptr;
  p.timers = nullptr;
  // What it kept goes with it (released to its own account); not from its own run.
  if (current_ != process) p.scratch.reset();
  for (auto it = ports_.begin(); it != ports_.end();) {
    it = it->second.process == process ? ports_.erase(it) : std::next(it);
  }
}

std::chrono::microseconds Simulator::now() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(NodeClock::now() - epoch_);
}

void Simulator::make_ready(ProcessId process) {
  Process& p = processes_[process];
  if (p.ready || p.gone) return;
  p.ready = true;
  ready_.push_back(process);
}

NodeClock::time_point Simulator::arrival_time(ProcessId to, bool costs_cpu) {
  Process& p = processes_[to];
  const auto arrives = NodeClock::now() + options_.latency;
  const auto at = std::max(arrives, p.busy_until) + (costs_cpu ? options_.cpu : std::chrono::microseconds{0});
  p.busy_until = at;
  return at;
}

void Simulator::schedule(ProcessId to, NodeClock::time_point at, std::function<void()> action) {
  ChargeHeap sims_own(kNobody);
  arrivals_.push(Arrival{at, sequence_++, to, std::move(action)});
}

void Simulator::post(ProcessId process, std::function<void()> action) {
  Process& p = processes_.at(process);
  if (p.gone) return;
  boost::asio::post(*p.io, std::move(action));
  make_ready(process);
}

void Simulator::transmit(ProcessId from, const std::weak_ptr<MemoryLink>& to, ProcessId to_process,
                         std::shared_ptr<transport::FrameBuffer> frame, std::size_t messages) {
  const std::size_t bytes = frame->size() * sizeof(transport::Word);
  auto& sent = processes_[from].traffic;
  sent.bytes_sent += bytes;
  sent.messages_sent += messages;
  if (processes_[to_process].gone) return;
  schedule(to_process, arrival_time(to_process, true), [this, to, to_process, frame = std::move(frame), bytes, messages] {
    auto link = to.lock();
    if (!link) return;
    auto& got = processes_[to_process].traffic;
    got.bytes_received += bytes;
    got.messages_received += messages;
    link->arrive(*frame);
  });
}

void Simulator::transmit_eof(const std::weak_ptr<MemoryLink>& to, ProcessId to_process) {
  if (to_process == kNoProcess || processes_[to_process].gone) return;
  schedule(to_process, arrival_time(to_process, false), [to] {
    if (auto link = to.lock()) link->arrive_eof();
  });
}

void Simulator::run(ProcessId process) {
  Process& p = processes_[process];
  p.ready = false;
  if (p.gone) return;
  current_ = process;
  ChargeHeap charge(process);
  core::ScratchPool::Use scratch(*p.scratch);
  auto& io = *p.io;
  auto& timers = *p.timers;
  do {
    if (io.stopped()) io.restart();
    timers.fire_due(NodeClock::now());
    ++runs_;
  } while (io.poll() > 0);
  current_ = kNoProcess;
  Process& q = processes_[process];  // a handler may have added processes
  if (q.gone) return;
  // Every timer of the node core and its services waits in its queue.
  const auto next = timers.next_expiry();
  q.next_timer = next.value_or(NodeClock::time_point::max());
  if (next) {
    ChargeHeap sims_own(kNobody);
    timers_.emplace(*next, process);
  }
}

bool Simulator::run_until(const std::function<bool()>& done, std::chrono::microseconds limit) {
  const auto deadline = NodeClock::now() + limit;
  while (true) {
    if (!ready_.empty()) {
      // Deliveries and starts may add to the list while it is worked through.
      std::vector<ProcessId> now;
      now.swap(ready_);
      for (ProcessId p : now) run(p);
      continue;
    }
    if (done()) return true;
    // Nothing to do now: on to the next arrival or timer.
    while (!timers_.empty() && (processes_[timers_.top().second].gone ||
                                processes_[timers_.top().second].next_timer != timers_.top().first)) {
      timers_.pop();
    }
    NodeClock::time_point next = NodeClock::time_point::max();
    if (!arrivals_.empty()) next = arrivals_.top().at;
    if (!timers_.empty()) next = std::min(next, timers_.top().first);
    if (next == NodeClock::time_point::max()) return done();  // nothing will ever happen
    if (next > deadline) {
      time_.advance(deadline - NodeClock::now());
      return done();
    }
    if (next > NodeClock::now()) time_.advance(next - NodeClock::now());
    const auto at = NodeClock::now();
    while (!arrivals_.empty() && arrivals_.top().at <= at) {
      Arrival a = arrivals_.top();
      arrivals_.pop();
      if (processes_[a.process].gone) continue;
      boost::asio::post(*processes_[a.process].io, std::move(a.action));
      make_ready(a.process);
    }
    while (!timers_.empty() && timers_.top().first <= at) {
      const ProcessId p = timers_.top().second;
      timers_.pop();
      if (!processes_[p].gone && processes_[p].next_timer <= at) {
        processes_[p].next_timer = NodeClock::time_point::max();
        make_ready(p);
      }
    }
  }
}

bool Simulator::run_until_quiet(std::chrono::microseconds limit) {
  return run_until([this] { return arrivals_.empty(); }, limit);
}

// ---- a link of memory ----

MemoryLink::MemoryLink(Simulator& sim, ProcessId owner, std::string peer_name)
    : sim_(sim), owner_(owner), peer_name_("sim:" + peer_name) {}

MemoryLink::~MemoryLink() {
  // A process that goes closes its sockets: the peer reads an end of file.
  if (open_) send_eof();
}

void MemoryLink::pair(const std::shared_ptr<MemoryLink>& a, const std::shared_ptr<MemoryLink>& b) {
  a->peer_ = b;
  a->peer_process_ = b->owner_;
  b->peer_ = a;
  b->peer_process_ = a->owner_;
}

void MemoryLink::begin() {
  // What came before the start, on the loop as a socket's first read would be.
  sim_.post(owner_, [weak = weak_from_this()] {
    if (auto self = weak.lock(); self && self->open_) self->take_messages();
  });
}

void MemoryLink::send(capnp::MessageBuilder& message) {
  if (!open_ || closing_) return;
  auto frame = std::make_shared<transport::FrameBuffer>();
  transport::append_frame(message, *frame);
  note_sent();
  sim_.transmit(owner_, peer_, peer_process_, std::move(frame), 1);
}

void MemoryLink::arrive(const transport::FrameBuffer& frame) {
  if (!open_) return;
  const std::size_t bytes = frame.size() * sizeof(transport::Word);
  // As a quiet socket link reads (transport/tcp_link.h): into at least
  // kMinReadBytes, given back once read, before it waits (TcpLink::read_now).
  auto space = reader_.prepare(std::max(bytes, transport::FrameReader::kMinReadBytes));
  std::memcpy(space.data(), frame.data(), bytes);
  reader_.commit(bytes);
  note_received();
  if (started()) take_messages();
}

void MemoryLink::take_messages() {
  auto outcome = transport::read_messages(reader_, [&](capnp::MessageReader& message) {
    deliver(message);
    return open_;  // the handler may have closed us
  });
  if (outcome.status == transport::ReadOutcome::Status::failed) fail(std::move(outcome.error));
  else reader_.release_if_read(0);
}

void MemoryLink::arrive_eof() {
  if (!open_) return;
  // Ours goes back (fail() closes our end): a peer that closed first completes its
  // close on it.
  fail(closing_ ? *closing_ : "connection closed by peer");
}

void MemoryLink::send_eof() {
  if (eof_sent_) return;
  eof_sent_ = true;
  sim_.transmit_eof(peer_, peer_process_);
}

void MemoryLink::close(std::string_view reason) {
  if (!open_ || closing_) return;
  closing_ = std::make_unique<std::string>(reason);
  // Our end of file; the close completes when the peer's comes back (it closes its
  // end on ours), as over TCP.
  send_eof();
  if (peer_.expired()) {
    sim_.post(owner_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->fail(*self->closing_);
    });
  }
}

void MemoryLink::fail(std::string reason) {
  if (!open_) return;
  open_ = false;
  send_eof();
  deliver_close(reason);
}

void MemoryLink::abort(std::string_view reason) { fail(std::string(reason)); }

void MemoryLink::abort_with(capnp::MessageBuilder& last, std::string_view reason) {
  send(last);
  abort(reason);
}

void MemoryLink::detach() {
  forget_close();
  if (!open_) return;
  open_ = false;
  send_eof();
}

}  // namespace canopy::sim
