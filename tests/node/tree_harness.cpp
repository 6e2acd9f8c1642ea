#include "tree_harness.h"

#include <cstdlib>
#include <stdexcept>

#include <gtest/gtest.h>

#include "core/log.h"
#include "transport/tcp_link.h"

namespace canopy::testing {

std::vector<core::events::TreeChanged> Recorder::tree_changes() const {
  std::vector<core::events::TreeChanged> out;
  for (const auto& event : events) {
    if (auto* changed = std::get_if<core::events::TreeChanged>(&event)) out.push_back(*changed);
  }
  return out;
}

TreeHarness::TreeHarness(const std::string& spec, FaultToleranceOptions fault, AddServices extra)
    : fault_(fault), extra_(std::move(extra)) {
  // Every process of the tree logs to the test's stderr; warnings by default.
  if (const char* level = std::getenv("CANOPY_LOG_LEVEL")) core::log().set_level(spdlog::level::from_str(level));
  auto topology = generate_topology(spec);
  if (!topology) throw std::invalid_argument(topology.error());
  topology_ = std::move(*topology);
}

// Nothing runs once the test is over, so the order in which members go is of no
// consequence.
TreeHarness::~TreeHarness() = default;

TreeHarness::Member& TreeHarness::member(Rank rank) {
  auto it = members_.find(rank);
  if (it == members_.end()) throw std::out_of_range("rank " + std::to_string(rank) + " is not running");
  return *it->second;
}

bool TreeHarness::alive(Rank rank) const { return members_.count(rank) != 0; }

TreeHarness::Member& TreeHarness::add(Rank rank, Role role) {
  auto& m = members_[rank];
  m = std::make_unique<Member>();
  core::NodeIdentity identity{.rank = rank, .role = role, .network_id = network_id_, .incarnation = 0};
  Recorder* r = &m->heard;
  m->runtime = std::make_unique<services::Runtime>(
      m->io, identity, m->filters,
      services::Observers{.node = r, .launch = r, .detection = r, .streams = r, .requests = r, .recovery = r,
                         .membership = r, .gossip = r},
      this);
  if (extra_) {
    m->extra = extra_(rank, m->runtime->node);
    if (m->extra) {
      if (auto added = m->runtime->node.add_service(*m->extra); !added) throw std::logic_error(added.error());
    }
  }
  return *m;
}

bool TreeHarness::launch(std::chrono::milliseconds limit) {
  core::LaunchPlan plan;
  plan.startup_timeout = std::chrono::seconds(5);
  plan.fault = fault_;
  plan.attach = attach_;
  plan.whole_tree = whole_tree_;
  Member& root = add(topology_.root().rank, Role::frontend);
  if (auto started = root.runtime->node.start_as_root(topology_, plan); !started) {
    throw std::runtime_error(started.error());
  }
  return until_up(limit);
}

bool TreeHarness::until_up(std::chrono::milliseconds limit) {
  Member& root = member(topology_.root().rank);
  // Up, and every process knows every listening endpoint (an orphan needs them).
  auto endpoints_known = [&] {
    // (Without reading a back-end's tree, which would unfold its part: core/folded_part.h.)
    for (auto& [rank, m] : members_) {
      if (!m->runtime->node.knows_every_port()) return false;
    }
    return members_.size() == (attach_ ? topology_.size() - topology_.backends().size() : topology_.size());
  };
  return run_until([&] { return !root.heard.launch_failures.empty() || (root.heard.ready && endpoints_known()); },
                   limit) &&
         root.heard.launch_failures.empty();
}

Result<std::unique_ptr<core::ChildProcess>> TreeHarness::start(core::ServiceContext& parent, Rank rank) {
  Member& m = add(rank, topology_.at(rank).role);
  m.frozen = start_frozen_.count(rank) != 0;
  core::ParentLink link{.address = "127.0.0.1", .port = parent.listen_port()};
  if (auto started = m.runtime->node.start_as_child(link); !started) return Error{started.error()};
  return std::unique_ptr<core::ChildProcess>();  // no process to watch
}

void TreeHarness::attach(Rank rank) {
  Member& m = add(rank, Role::backend);
  const Rank parent = *topology_.at(rank).parent;
  core::ParentLink link{.address = "127.0.0.1", .port = node(parent).listen_port()};
  if (auto started = m.runtime->node.start_as_child(link); !started) throw std::runtime_error(started.error());
}

bool TreeHarness::poll_all() {
  bool worked = false;
  // A handler may kill or start members: walk a snapshot of the ranks.
  std::vector<Rank> ranks;
  for (auto& [rank, m] : members_) ranks.push_back(rank);
  for (Rank rank : ranks) {
    auto it = members_.find(rank);
    if (it == members_.end() || it->second->frozen) continue;
    auto& io = it->second->io;
    if (io.stopped()) io.restart();
    worked |= io.poll() > 0;
  }
  return worked;
}

bool TreeHarness::run_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = NodeClock::now() + limit;
  auto last_idle = std::chrono::steady_clock::now();
  int idle_rounds = 0;
  while (!done()) {
    if (NodeClock::now() >= deadline) {
      // What falls due at the deadline itself still runs.
      for (int idle = 0, rounds = 0; idle < 2 && rounds < 100000; ++rounds) idle = poll_all() ? 0 : idle + 1;
      return done();
    }
    time_.take_nearest_expiry();  // forget timers looked at in earlier rounds
    if (poll_all()) {
      idle_rounds = 0;
      if (std::chrono::steady_clock::now() - last_idle > std::chrono::minutes(1)) {
        ADD_FAILURE() << "the tree was busy for a minute of real time without a pause";
        return false;
      }
      continue;
    }
    last_idle = std::chrono::steady_clock::now();
    // Two rounds in a row with nothing to do: what one process wrote to a socket after
    // its reader was polled is read in the next round.
    if (++idle_rounds < 2) continue;
    idle_rounds = 0;
    // Every running process is idle: on to the next timer that is due (this round's
    // polls looked at each one's nearest), or one step if none is pending.
    const auto now = NodeClock::now();
    const auto next = time_.take_nearest_expiry();
    const auto to = std::min(next && *next > now ? *next : now + kStep, deadline);
    time_.advance(to - now);
  }
  return true;
}

std::chrono::milliseconds TreeHarness::elapsed() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(NodeClock::now() - epoch_);
}

void TreeHarness::run_for(std::chrono::milliseconds duration) {
  run_until([] { return false; }, duration);
}

void TreeHarness::kill(Rank rank) { members_.erase(rank); }

void TreeHarness::reattach_frontend(Rank acceptor) {
  const std::uint16_t port = node(acceptor).listen_port();
  Member& m = add(root(), Role::frontend);
  boost::asio::ip::tcp::socket socket(m.io);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  Recorder* heard = &m.heard;
  m.runtime->node.reattach(transport::TcpLink::create(std::move(socket)), acceptor,
                           [heard](Result<void> done) { heard->reattached = done ? "" : done.error(); });
}

StreamId TreeHarness::open_stream(const std::string& filter, SyncMode sync, std::chrono::milliseconds timeout,
                                  const std::vector<Rank>& backends) {
  services::StreamSpec spec;
  spec.id = next_stream_++;
  spec.backends = core::RankSet::of(backends.empty() ? topology_.backends() : backends);
  spec.upstream_filter = filter;
  spec.sync = sync;
  spec.sync_timeout = timeout;
  runtime(root()).streams.create_stream(spec);
  EXPECT_TRUE(run_until([&] { return heard(root()).acks.count(spec.id) != 0; }, std::chrono::seconds(5)));
  EXPECT_EQ(heard(root()).acks[spec.id], "");
  return spec.id;
}
void TreeHarness::freeze(Rank rank) { member(rank).frozen = true; }
void TreeHarness::thaw(Rank rank) { member(rank).frozen = false; }

const Event* own_recovery(TreeHarness& tree, Rank orphan) {
  const auto& own = tree.heard(orphan).recovered;
  return own.empty() ? nullptr : &own.back();
}

void expect_whole_wave(TreeHarness& tree, StreamId stream, Rank count) {
  auto& root = tree.heard(tree.root());
  tree.run_for(std::chrono::milliseconds(100));  // the stream's reopening after the healing
  const std::size_t before = root.upstream.size();
  for (Rank b = 0; b < count; ++b) tree.runtime(b).streams.send_up(stream, Packet(9, {std::int64_t(b + 1)}));
  const std::int64_t whole = std::int64_t{count} * (count + 1) / 2;
  std::int64_t total = 0;
  ASSERT_TRUE(tree.run_until(
      [&] {
        total = 0;
        for (std::size_t i = before; i < root.upstream.size(); ++i) total += std::get<std::int64_t>(root.upstream[i][0]);
        return total == whole;
      },
      std::chrono::seconds(5)))
      << "the sums after the healing came to " << total << " of " << whole;
}

}  // namespace canopy::testing
