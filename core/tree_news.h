// TreeNews: the live tree's changes on their way down from one node to its children.
//
// A failure report is flooded at once (adopters wait for it); adoption reports
// going down are batched. They go to the children together kFastWindow after the
// first of them, or at once before anything else this node sends down (a failure
// report, a message to a child). Each report goes to every child but the link it
// came from. 128 orphans adopted over 40 ms woke every process of the tree up to
// 128 times; batched, a few times.
//
// A back-end needs the adoption of another back-end only to keep its view complete:
// it adopts no one, and a back-end adopted elsewhere changes none of the commnodes
// it would ask to adopt it. Those reports go to back-end children in a batch of
// their own, kLeafWindow after the first (or before the next flood), so that in a
// storm of adoptions a back-end wakes for them once, after it.
//
// Also the replay of the live tree to a peer that missed it (send_live_tree).
// All on the node's io_context thread.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "canopy.capnp.h"
#include "core/children.h"
#include "core/live_tree.h"
#include "core/service.h"
#include "transport/clock.h"

namespace canopy::core {

// Fills one adoption report (of a join too: open attach).
void set_adoption(wire::AttachReport::Builder report, Rank orphan, Rank adopter, std::uint32_t incarnation,
                  bool orphan_is_commnode);

class TreeNews {
 public:
  static constexpr std::chrono::milliseconds kFastWindow{5};
  static constexpr std::chrono::milliseconds kLeafWindow{250};

  // `sender` and `children` are borrowed from the node and outlive this.
  TreeNews(boost::asio::io_context& io, const NodeIdentity& sender, ChildTable& children);
  TreeNews(const TreeNews&) = delete;
  TreeNews& operator=(const TreeNews&) = delete;

  // An adoption (or join) report to send down, to every child but the one on
  // `except`; `about_backend`: the orphan is a back-end.
  void add(Rank orphan, Rank adopter, std::uint32_t incarnation, const transport::Link* except, bool about_backend);
  // Sends the fast batch now, if one waits (before a message to a child).
  void flush_fast();
  // Sends the fast batch now, and the back-ends' batch too if `backends_too` (before
  // a flood that goes to them).
  void flush(bool backends_too = true);
  // Forgets what waits (the node stops: its children are told to stop instead).
  void drop();
  // Nothing waits to be sent.
  bool idle() const { return fast_.empty() && leaf_.empty(); }
  // Which adoptions a back-end child takes (it holds its part of the tree:
  // docs/scale.md): `wanted(orphan, adopter)`. Unset: all of them.
  void set_backend_filter(std::function<bool(Rank orphan, Rank adopter)> wanted) {
    backend_wants_ = std::move(wanted);
  }
  // Which adoptions commnode child `child` takes: `wanted(child, orphan)`. Unset: all
  // of them (each holds the whole tree).
  void set_commnode_filter(std::function<bool(Rank child, Rank orphan)> wanted) { commnode_wants_ = std::move(wanted); }

  // Every report `tree` applied so far, to a peer that missed them (an orphan
  // adopted after the reports of other failures and adoptions had flooded the tree),
  // as flooded, so that applying them is idempotent, and in the same order.
  // Adoptions that follow one another go to a child in one attachReports message
  // (at most 4,096); up, one by one (a parent takes no batch).
  void send_live_tree(const LiveTree& tree, transport::Link& link, bool to_a_child) const;

 private:
  struct News {
    Rank orphan;
    Rank adopter;
    std::uint32_t incarnation;
    const transport::Link* except;
    bool about_backend;  // goes to back-end children with the leaf batch only
  };
  void flush_leaf();
  void send(const std::vector<News>& news, bool leaf);

  const NodeIdentity& sender_;
  ChildTable& children_;
  std::vector<News> fast_;
  std::vector<News> leaf_;  // adoptions of back-ends, for back-end children
  std::function<bool(Rank, Rank)> backend_wants_;
  std::function<bool(Rank, Rank)> commnode_wants_;
  Timer fast_timer_;
  Timer leaf_timer_;
};

}  // namespace canopy::core
