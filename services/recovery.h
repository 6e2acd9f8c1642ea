// RecoveryService: an orphan's search for a new parent (docs/fault-tolerance.md).
//
// When the core reports this node orphaned, the service computes the potential
// adopters from the live tree (TreeView::potential_adopters), connects to the first
// live one (plain or striped, as the topology says), and hands the connection to the
// core, which asks for adoption under a fresh incarnation. A refusal, a failed
// connection or an adopter that does not answer in time moves on to the next; when
// the list is exhausted it is computed again a little later (reports change the
// view). Once adopted, and the stream service has sent its state, the orphan reports
// how the recovery went (Recovered) to the front-end, where it is the observer's
// on_recovered.
//
// With standby links (FaultToleranceOptions::standby_links), the service also keeps,
// while the node runs, a connection to its first potential adopter as the core's
// standby link: it checks where that link should go a moment after the live tree
// changes, and every second; and an orphan asks that adopter first, on that link.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "canopy/event.h"
#include "core/rank_set.h"
#include "core/service_context.h"
#include "recovery.capnp.h"
#include "services/streams.h"

namespace canopy::services {

namespace asio = boost::asio;

// What an orphan reports once it has been adopted and has compensated: the public
// Event of kind `recovered` (include/canopy/event.h), `rank` being the orphan.
using RecoveryReport = Event;

class RecoveryService final : public core::Service {
 public:
  class Observer {
   public:
    virtual ~Observer() = default;
    // At the root, every orphan's report; at an orphan, its own.
    virtual void on_recovered(const RecoveryReport& report) {}
    // At a front-end that re-attached, how the tree outlived the front-end before
    // it: events frontend_lost, promoted and reattached (the last without `connect`,
    // which only the front-end knows).
    virtual void on_promotion(std::vector<Event> events) {}
  };

  // Everything is borrowed; `observer` may be null.
  RecoveryService(core::ServiceContext& node, const StreamService& streams, Observer* observer);

  core::ServiceId id() const override { return wire::recovery::SERVICE_ID; }
  std::string_view name() const override { return "recovery"; }
  // Its reports read what the streams made of the same event (incomplete streams).
  std::vector<core::ServiceId> runs_after() const override;
  void on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) override;
  void on_event(const core::NodeEvent& event) override;

 private:
  void start_round();
  void try_next();
  // The connection to `candidate` is up (then asks it), or failed.
  void reached(Rank candidate, core::Dialled dialled);
  void connected(Rank candidate, std::shared_ptr<transport::Link> link);
  void answered(Result<core::Adoption> result);
  void give_up_attempt();
  void stop();
  void report(const RecoveryReport& report);
  // The heir: how long until every process left without the root is adopted here;
  // on a front-end's re-attach, the report of it (PROMOTED) goes to that front-end.
  void check_promotion();
  void report_promotion();
  void on_promotion_report(wire::recovery::Promoted::Reader report);
  // Standby links: check after `delay`, and not before the link may open or move
  // (an earlier check stands).
  void check_standby_after(std::chrono::milliseconds delay);
  // None opens or moves for a while (kStandbyQuiet): after the node starts, a
  // failure it hears of, its own adoption.
  void hold_standby_back();
  void check_standby();

  core::ServiceContext& node_;
  const StreamService& streams_;
  Observer* observer_;

  // The search for an adopter, made when this node is orphaned (most never are:
  // docs/scale.md, "A back-end's own state") and dropped once it is adopted.
  struct Search {
    explicit Search(boost::asio::io_context& io) : retry(io), attempt(io) {}
    bool searching = false;
    std::chrono::steady_clock::time_point connect_start;
    std::chrono::microseconds choose{0};
    std::chrono::system_clock::time_point orphaned_at;  // when the parent was found lost
    std::vector<Rank> candidates;
    std::size_t next = 0;
    std::uint32_t attempts = 0;
    Rank trying = 0;
    // The attempt under way: a connection (core/dial.h), or the core's adoption request.
    core::Dial dial;
    bool asking = false;
    bool over_standby = false;  // the request under way went on the standby link
    Timer retry, attempt;
  };
  Search& search();
  bool searching() const { return search_ && search_->searching; }
  std::unique_ptr<Search> search_;
  // Potential adopters a connection to failed: where commnodes hold parts, a process
  // hears of the failure of a commnode outside its line (its parent's sibling) from
  // no one, and finds it so. Chosen last, and never for the standby link, until a
  // connection to it succeeds again. Ranges (core/rank_set.h), made when the first
  // is found: nearly every process holds none (a pointer, not a set's 32 bytes).
  bool unreachable(Rank rank) const { return unreachable_ && unreachable_->contains(rank); }
  std::size_t unreachable_count() const { return unreachable_ ? unreachable_->size() : 0; }
  void set_unreachable(Rank rank, bool is);
  std::unique_ptr<core::RankSet> unreachable_;
  // The standby link's upkeep, made only where standby links are on (48 bytes in
  // every process before).
  struct Standby {
    explicit Standby(boost::asio::io_context& io) : timer(io) {}
    core::Dial dial;  // the standby link being connected, to `target`
    Rank target = 0;
    NodeClock::time_point not_before{};  // no standby link opens or moves before
    Timer timer;
  };
  Standby& standby();
  std::unique_ptr<Standby> standby_;
  bool standby_links() const;
  // While this node stands in the root's place (events::Promoted).
  struct Promotion {
    Rank failed_root = 0;
    std::string reason;
    std::chrono::system_clock::time_point lost_at;
    NodeClock::time_point since;  // the node's clock: virtual in tests, like the grace period
    std::chrono::microseconds complete{0};  // 0: not every process is adopted yet
    std::uint32_t adopted = 0;
  };
  std::unique_ptr<Promotion> promotion_;
};

}  // namespace canopy::services
