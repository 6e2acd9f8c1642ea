// MembershipService: which back-ends are alive, in which view (docs/membership.md).
//
// Varma et al.'s radix-tree membership (paper 000) on the Canopy tree, with Bland's
// epochs (paper 001). The members are the tree's back-ends; the front-end is the
// root that orders views:
//   - a detector (the parent of a back-end whose process or link is gone) sends
//     NODE_FAILURE up, hop by hop, and resends it until the root answers
//     (FAILURE_DET_ACK); a back-end that connects after the first view (attach mode)
//     is reported the same way (NEW_NODE, JOIN_DET_ACK);
//   - the root assigns the next view, bumps the epoch of every member that left, and
//     sends the change down (FAILED_NODE / NEW_NODE_JOIN): who left and joined, the
//     epochs that changed, and a digest of the view after it. Each process applies
//     it to the view it holds, checks the digest, tells its observer, passes the
//     change on to its children and acknowledges up once all of them have
//     (FAILURE_ACK); the view is stable when the root has every acknowledgement.
//     A process that missed a change (cut off while it was an orphan) or finds
//     another digest asks its parent for the whole view. Reports that arrive while
//     a view is not yet stable are batched into the next one.
//   - epochs: a back-end's hellos carry its epoch; an orphan back-end asking for
//     adoption with an epoch below the one the tree knows (it was declared failed,
//     e.g. it hung and woke up) is refused and told to stop, and a back-end that
//     finds itself excluded from a view stops. Refusals are counted.
//   - a new process under the rank of a back-end that left the view (a restarted
//     rank; paper 000's NODE_ALIVE) rejoins: its parent welcomes it with the view
//     and its epoch and reports the join; a rejoin before the view without the old
//     process is out at the parent is refused.
// A commnode's failure is not a membership change: its back-ends are re-adopted.
//
// Runs on the node's io_context thread, like every service.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/container/flat_map.hpp>

#include "canopy/view.h"
#include "core/rank_set.h"
#include "core/service_context.h"
#include "membership.capnp.h"

namespace canopy::membership {

// The epoch of every back-end above epoch 0, by rank, as sorted pairs: 8 bytes an
// entry, where a std::map's node was 40. Every process of the tree holds one entry
// for each back-end that ever failed or rejoined.
using Epochs = boost::container::flat_map<Rank, std::uint32_t>;

// One view applied at one process. `view.members` is filled only where a program
// reads it (an observer, or a program reading public events): a view held as ranges
// is expanded only for it.
struct ViewChange {
  View view;
  std::vector<Rank> left, joined;  // since the view this process held before
  // Root only: from the first report of the change reaching the root to the last
  // acknowledgement.
  std::chrono::microseconds stabilise{0};
};

// The public forms (include/canopy/event.h) of a view this process applied, and of a
// failure the gossip detector of member `detector` confirmed.
Event view_event(const ViewChange& change);
Event gossip_event(Rank rank, Rank detector, std::chrono::milliseconds silent);

class MembershipService final : public core::Service {
 public:
  class Observer {
   public:
    virtual ~Observer() = default;
    // Every process: a view it applied, once each, in view order. At the root, once
    // the view is stable (every process acknowledged it).
    virtual void on_view(const ViewChange& change) {}
    // Root: member `detector`'s gossip detector confirmed that `rank` failed, its
    // heartbeat still for `silent` (docs/gossip.md); once per report that reaches the
    // root, whether or not the view had it already.
    virtual void on_gossip_report(Rank rank, Rank detector, std::chrono::milliseconds silent) {}
    // Root: back-end `rank`, below a commnode when it failed, was not adopted within
    // `lost + suspect` and is declared failed (`reason` says so); nothing it sent can
    // have come through for `silent` (since `lost` before its parent's failure was
    // known).
    virtual void on_orphan_lost(Rank rank, const std::string& reason, std::chrono::milliseconds silent) {}
  };

  // `node` and `observer` (may be null) are borrowed.
  MembershipService(core::ServiceContext& node, Observer* observer);

  core::ServiceId id() const override { return wire::membership::SERVICE_ID; }
  std::string_view name() const override { return "membership"; }
  void on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) override;
  void on_event(const core::NodeEvent& event) override;
  void fill_hello(wire::Hello::Builder hello) override;
  std::optional<std::string> refuse_hello(wire::Hello::Reader hello) override;

  // The view this process holds (at the root: the newest, stable or not), for a
  // program: its members are expanded from the ranges held (O(members)).
  View view() const { return View{view_.id, view_.members.to_vector()}; }
  // The same view's number, and whether a rank is a member of it (O(log ranges)).
  std::uint64_t view_id() const { return view_.id; }
  bool is_member(Rank rank) const { return view_.members.contains(rank); }
  // Its members as held: ascending ranges (docs/membership.md, "What a process holds").
  const core::RankSet& members() const { return view_.members; }
  // The epoch this process knows for back-end `rank`: 0 until it is first declared
  // failed, then one more each time.
  std::uint32_t epoch(Rank rank) const;
  // Hellos refused for a stale epoch, reports about a member at an epoch it has
  // left behind, and excluded back-ends cut off, here.
  std::uint64_t stale_dropped() const { return stale_dropped_; }
  // Root: the same, counted wherever in the tree it happened, by the back-end rank
  // concerned (each process reports its drops up).
  const std::map<Rank, std::uint64_t>& stale_dropped_in_tree() const;
  // How many times this process asked its parent for the whole view (it missed a
  // change); for tests and diagnostics.
  std::uint64_t asked_whole() const { return asked_whole_; }
  // Root: a view not yet acknowledged by every process.
  bool changing() const { return root_ && root_->change.has_value(); }

  // A detector of this process (or a test) declares members failed: reported to the
  // root as the overlay's own detection does.
  void report_failure(const std::vector<Rank>& ranks, const std::string& reason);
  // The gossip detector of this member confirmed that member `rank` failed, its
  // heartbeat still for `silent`: reported to the root, which takes it from any live
  // member (not only the failed member's parent).
  void report_end_to_end(Rank rank, const std::string& reason, std::chrono::milliseconds silent);

 private:
  enum class ReportKind : std::uint8_t { failure, join };
  // A view as a process holds it: its members as ranges.
  struct HeldView {
    std::uint64_t id = 0;
    core::RankSet members;
    bool contains(Rank rank) const { return members.contains(rank); }
  };
  struct Report {
    ReportKind kind;
    std::uint32_t epoch;
    std::string reason;
    bool end_to_end = false;  // a failure confirmed by this member's gossip detector
    std::chrono::milliseconds silent{0};
  };
  // The last view this process applied, as the change from the view before it: what
  // goes down to the children that held that one.
  struct Delta {
    std::uint64_t base = 0;
    std::vector<Rank> left, joined;
    std::vector<std::pair<Rank, std::uint32_t>> epochs;  // changed, with the new epoch
  };
  // Root: the view being stabilised.
  struct Change {
    ViewChange applied;
    NodeClock::time_point first_report;
    NodeClock::time_point sent;  // when this view went down
  };

  void initialise();
  // Detector side.
  void report(Rank rank, Report report);
  // Every report not yet acknowledged, or only the one about `only`.
  void send_reports(std::optional<Rank> only = std::nullopt);
  void arm_resend();
  void on_det_ack(wire::membership::DetAck::Reader ack, std::uint16_t kind);
  // Root side.
  void on_failure_report(Rank detector, Rank rank, const Report& report);
  void on_join_report(Rank detector, Rank rank);
  void answer_detector(Rank detector, const std::vector<Rank>& ranks, wire::membership::Kind kind);
  void start_change();
  void arm_supersede();
  void stable();
  void inherit_view(wire::membership::ViewChange::Reader change);
  // Every process.
  void on_view_change(wire::membership::ViewChange::Reader change);
  void on_whole_view(wire::membership::ViewChange::Reader change);
  void on_change(wire::membership::ViewChange::Reader change);
  // Applies a newer view, tells the observer, passes it down. `digest`: its digest,
  // if known already.
  void accept(HeldView next, const Epochs& epochs, std::optional<std::uint64_t> digest = {});
  // This process holds the view it was sent, or a newer one: acknowledged up at once
  // if its subtree holds it too (else when the subtree's acknowledgements come).
  void ack_held();
  // Asks the parent for the whole view (once until it comes, or a new parent).
  void request_whole(const std::string& why);
  // Of a view and its epochs: what a change's receiver checks it reached.
  static std::uint64_t digest_of(const HeldView& view, const Epochs& epochs);
  void write_change(wire::membership::ViewChange::Builder v) const;
  void write_offer(wire::membership::ViewChange::Builder v) const;
  // The view to `child`: the change, if it held the view before; else the whole.
  void send_view(std::size_t child);
  // A whole view as sent; none if its ranges are not ascending and disjoint (logged).
  static std::optional<std::pair<HeldView, Epochs>> read_view(
      wire::membership::ViewChange::Reader change);
  void write_view(wire::membership::ViewChange::Builder v) const;
  void welcome(std::size_t child);
  ViewChange apply(HeldView next, const Epochs& epochs, std::optional<std::uint64_t> digest = {});
  void cut_off(const std::vector<Rank>& left);
  void count_stale(Rank rank, std::uint32_t stale_epoch);
  void watch_orphans(Rank failed);
  void pass_down(std::optional<std::size_t> only_child = std::nullopt);
  void on_view_ack(std::size_t child, std::uint64_t id);
  void check_acks();
  std::optional<std::size_t> child_towards(Rank rank) const;
  template <typename T>
  void forward_up(wire::membership::Kind kind, typename T::Reader body);

  core::ServiceContext& node_;
  Observer* observer_;
  bool started_ = false;
  bool requested_ = false;  // asked the parent for the whole view; not answered yet
  // Every process: whether this subtree's acknowledgement of the view passed down
  // (awaiting_id_) went up. The flags here share one word.
  bool acked_ = true;
  HeldView view_;
  Epochs epochs_;
  std::uint64_t digest_ = 0;          // digest_of(view_, epochs_)
  // To view_ from the one before; kept only where children may need it (never at a
  // back-end: docs/scale.md, "A back-end's own state").
  std::unique_ptr<Delta> last_change_;
  std::uint64_t asked_whole_ = 0;
  std::uint64_t stale_dropped_ = 0;

  // Detector: reports not yet acknowledged by the root, by rank; made by the first
  // report, gone once all are acknowledged (48 bytes at every back-end before).
  std::unique_ptr<std::map<Rank, Report>> unacked_;
  bool reporting() const { return unacked_ && !unacked_->empty(); }
  Timer resend_;

  // What a process with children keeps of them, by child index: made when first
  // needed, never at a back-end (docs/scale.md, "A back-end's own state").
  struct Below {
    // The view each child was sent, by its index (a launch child holds view 0
    // without a message): 8 bytes a child, a std::map's node of 48 until stop 84.
    std::vector<std::uint64_t> child_view;
    std::uint64_t view_of(std::size_t child) const { return child < child_view.size() ? child_view[child] : 0; }
    void set_view(std::size_t child, std::uint64_t id) {
      if (child >= child_view.size()) {
        if (id == 0) return;
        child_view.resize(child + 1, 0);
      }
      child_view[child] = id;
    }
    // Children that rejoined under the rank of a lost back-end, on their new link:
    // what they send before they applied the welcome (their new epoch) is theirs.
    std::set<std::size_t> rejoined;
    // Children cut off (cut_off) whose links are still closing: a graceful close
    // waits for the peer, which may be hung; no view waits for them.
    std::set<std::size_t> cut;
    std::set<std::size_t> awaiting;  // yet to acknowledge the view awaiting_id_
  };
  Below& below();
  std::unique_ptr<Below> below_;
  // Every process: the view passed down (its children in Below::awaiting; acked_).
  std::uint64_t awaiting_id_ = 0;

  // Root: made when first needed (docs/scale.md, "A back-end's own state"). A
  // commnode that takes the root's place makes it then.
  struct Root {
    explicit Root(boost::asio::io_context& io) : supersede(io) {}
    std::optional<Change> change;
    bool inherited = false;  // a re-attached front-end has the heir's view
    Timer supersede;
    bool supersede_armed = false;
    std::map<Rank, std::string> pending_left;
    std::set<Rank> pending_joined;
    std::optional<NodeClock::time_point> first_pending;
    // One per failed commnode, until its orphans must have been adopted.
    std::vector<std::unique_ptr<Timer>> orphan_watches;
    bool holding_change = false;  // reports are being gathered into one change
    std::map<Rank, std::uint64_t> stale_in_tree;
    HeldView reported;  // the last view the observer was told of
  };
  // Made with reported = view_.
  Root& root();
  std::unique_ptr<Root> root_;
};

}  // namespace canopy::membership
