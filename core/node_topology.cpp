// The tree a node holds: the topology its parent sends once it is a child (its part,
// where commnodes hold parts: docs/scale.md), the listening ports learnt after it,
// which it sets and sends on to its own children (docs/protocol.md, `topology` and
// `endpoints`), the subtrees of orphans it grafts, and who among its children hears
// of a change.
#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "core/codec.h"
#include "core/log.h"
#include "core/node.h"
#include "core/reachable.h"

namespace canopy::core {

using transport::Link;

BackendPart& Node::backend_part() {
  if (!backend_part_) backend_part_ = std::make_unique<BackendPart>();
  return *backend_part_;
}

void Node::adopt_topology(Topology topology) {
  backend_part_.reset();  // of the tree held before, if any (a re-attach that failed)
  hold_topology(std::move(topology));
  for (Rank r : topology_->at(id_.rank).children) children_.add(r, topology_->at(r).role);
  log().info("topology: {} processes, {} children, {} back-ends below", topology_->size(), children_.size(),
             tree_->routes());
}

void Node::hold_topology(Topology topology) {
  topology_ = std::make_unique<Topology>(std::move(topology));
  // (Not backend_part_: a part unfolded keeps what its back-end children were sent,
  // which the news to them is judged by; built again now, it would hold the orphans
  // grafted since.)
  tree_ = std::make_unique<LiveTree>(*topology_, id_.rank);
}

void Node::unfold_part() {
  auto folded = std::move(folded_);
  auto topology = folded->unfold();
  // It was decoded once, as it arrived; decoding the same words cannot fail now.
  if (!topology) {
    log().critical("cannot unfold its part of the tree: {}", topology.error());
    std::abort();
  }
  log().info("unfolds its part of the tree: {} processes, {} changes since launch", topology->size(),
             folded->reports().size());
  hold_topology(std::move(*topology));
  // A commnode's children stay in its child table as they are (a back-end has
  // none); the live tree learns the index of those it did not launch (adopted
  // orphans, joined back-ends), through which the adoptions below route them.
  for (std::size_t i = 0; i < children_.size(); ++i) tree_->note_child(children_[i].rank, i);
  // The orphans' subtrees it grafted, in order, before the adoptions that hold them.
  for (const auto& g : folded->grafts()) hold_graft(g.subtree, g.under);
  // What changed since launch, if it was folded again after a heal: adoptions first,
  // then failures, so that a process adopted and then lost ends lost (an adoption
  // makes its orphan alive). A back-end the part did not hold, adopted or joined
  // under a process it holds, is added first, as when its report came
  // (Node::on_attach_report).
  for (const auto& r : folded->reports()) {
    if (r.failure) continue;
    if (!tree_->view().contains(r.rank)) {
      if (!tree_->view().contains(r.adopter)) continue;
      if (!topology_->find(r.rank) && !topology_->add_backend(r.rank, r.adopter)) continue;
      if (!tree_->add_backend(r.rank, r.adopter)) continue;
    }
    tree_->apply_adoption(r.rank, r.adopter, r.incarnation);
  }
  for (const auto& r : folded->reports()) {
    if (r.failure) tree_->apply_failure(r.rank);
  }
  refold_ = std::move(folded);  // the part as it came, to fold again
  fold_part_later();
}

void Node::fold_part_later() {
  if (fold_timer_armed_) return;
  fold_timer_armed_ = true;
  part_read_ = false;
  fold_timer_.expires_after(kFoldAgainAfter);
  fold_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    fold_timer_armed_ = false;
    if (!part_read_ && std::holds_alternative<Running>(phase_)) return fold_part();
    if (!stopping()) fold_part_later();  // look again
  });
}

void Node::fold_part() {
  if (folded_ || !refold_ || !topology_ || !tree_) return;
  const TreeView& view = tree_->view();
  const Rank parent = view.parent(id_.rank);
  const TopologyNode* up = parent == TreeView::kNone ? nullptr : topology_->find(parent);
  if (!up) return;
  refold_->set_live(tree_->reports(), {parent, up->role, up->host}, view.incarnation(parent), view.place(id_.rank));
  refold_->set_routes(tree_->take_routes());  // a commnode's: what its waves read
  folded_ = std::move(refold_);
  tree_.reset();
  topology_.reset();
  // Quiet for kFoldAgainAfter: what was made for a launch or a heal goes too (the
  // room of adopted children, the news, larger message segments), made again when
  // needed.
  children_.shrink_to_fit();
  if (healing_) {
    healing_->shed_news();
    shed_healer();
  }
  ScratchPool::shrink_current();
  log().info("folds its part of the tree again: {} changes since launch, {} bytes", folded_->reports().size(),
             folded_->bytes());
}

Rank Node::parent_rank() const {
  if (folded_) return folded_->parent();
  return tree_ ? tree_->view().parent(id_.rank) : TreeView::kNone;
}

std::uint32_t Node::parent_incarnation() const {
  if (folded_) return folded_->parent_incarnation();
  const Rank parent = parent_rank();
  return parent == TreeView::kNone ? 0 : tree_->view().incarnation(parent);
}

Rank Node::root_rank() const {
  if (folded_) return folded_->root();
  return tree_ ? tree_->view().root() : TreeView::kNone;
}

bool Node::knows_every_port() const {
  if (folded_) return folded_->ports_known();
  if (!topology_) return false;
  // A back-end holding a part is sent the ports of its potential adopters only.
  const TopologyNode* me = topology_->find(id_.rank);
  if (id_.role == Role::backend && topology_->partial() && me && me->parent) {
    return adopter_ports_missing(*topology_, *me->parent).empty();
  }
  return std::none_of(topology_->nodes().begin(), topology_->nodes().end(),
                      [](const TopologyNode& n) { return n.role != Role::backend && n.port == 0; });
}

std::optional<TreeView::Place> Node::own_place() const {
  if (folded_) return folded_->place();
  if (!tree_ || !tree_->view().contains(id_.rank)) return std::nullopt;
  return tree_->view().place(id_.rank);
}

void Node::on_topology(wire::Topology::Reader t) {
  auto topology = decode_topology(t);
  if (!topology) {
    log().error("parent sent an invalid topology: {}", topology.error());
    return begin_stop("invalid topology from parent");
  }
  if (knows_tree()) {
    log().warn("ignoring a second topology from the parent");
    return;
  }
  if (!topology->find(id_.rank)) {
    log().error("parent's topology does not contain this node's rank {}", id_.rank);
    return begin_stop("rank not in topology");
  }
  auto plan = decode_plan(t);
  if (!plan) {
    log().error("parent sent an invalid launch plan: {}", plan.error());
    return begin_stop("invalid launch plan from parent");
  }
  // A commnode holds a part only where the plan says (LaunchPlan::commnode_parts),
  // and it routes, adopts and launches over its whole subtree, which its part holds.
  if (topology->partial() && id_.role != Role::backend && !plan->commnode_parts()) {
    log().error("parent sent a commnode a part of the tree, where the plan says it holds the whole");
    return begin_stop("part of the tree sent to a commnode");
  }
  // A launched back-end's part comes with view 0, of which it is a member.
  if (topology->partial() && !plan->attach && id_.role == Role::backend &&
      std::none_of(plan->view_zero.begin(), plan->view_zero.end(),
                   [&](const auto& range) { return range.first <= id_.rank && id_.rank <= range.second; })) {
    log().error("parent sent a part of the tree whose view 0 does not hold this back-end, rank {}", id_.rank);
    return begin_stop("view 0 without this back-end");
  }
  plan_ = std::move(*plan);
  // An address of its host that its children and adopted orphans on other hosts can
  // reach, if its name resolves here to a loopback one (core/reachable.h).
  if (id_.role == Role::commnode && !fabric_) {
    auto reachable = choose_reachable_address(*topology, id_.rank, "");
    if (!reachable) {
      log().error("{}", reachable.error());
      emit(events::Started{reachable.error()});
      return begin_stop(reachable.error());
    }
    for (const auto& note : *reachable) log().info("{}", note);
  }
  // A back-end keeps its part folded until something reads it; a commnode folds its
  // once its subtree is up (core/folded_part.h, Node::subtree_up).
  if (id_.role == Role::backend && topology->partial()) {
    folded_ = std::make_unique<FoldedPart>(t, *topology, id_.rank);
    log().info("topology: its part, {} processes, held folded in {} bytes", topology->size(), folded_->bytes());
  } else {
    if (id_.role == Role::commnode && topology->partial()) refold_ = std::make_unique<FoldedPart>(t, *topology, id_.rank);
    adopt_topology(std::move(*topology));
  }
  // A commnode listens for its children, and, in open attach, for back-ends that
  // join under it (it may have none at launch).
  if (!children_.empty() || (plan_.open_attach && id_.role == Role::commnode)) {
    if (auto r = listen(); !r) {
      log().error("{}", r.error());
      emit(events::Started{r.error()});
      return begin_stop(r.error());
    }
  }
  emit(events::Started{});
}

void Node::send_topology(Link& link, Role role, Rank to) {
  Message message(id_);
  auto t = message.body().initTopology();
  const Topology* part = role == Role::backend ? backend_part().get(topo(), id_.rank, plan_) : nullptr;
  if (part && !part->find(to)) part = nullptr;
  // A commnode child's part is its own (its subtree whole), built for it.
  std::optional<Topology> commnode_part;
  if (role == Role::commnode && plan_.commnode_parts() && topo().find(to)) {
    commnode_part = topo().part(to);
    if (commnode_part->partial()) part = &*commnode_part;
  }
  encode_topology(part ? *part : topo(), t);
  encode_plan(plan_, t, role != Role::backend);
  if (part) encode_view_zero(backend_part().view_zero(topo(), plan_), t);
  link.send(message.builder());
  // The last back-end child launched has its part: it need not be kept.
  if (role == Role::backend && std::none_of(children_.begin(), children_.end(), [](const Child& c) {
        return c.role == Role::backend && c.state == ChildState::starting;
      })) {
    backend_part().release();
  }
}

std::optional<Topology> Node::live_subtree() const {
  // Breadth-first from this node, as the live tree has it now (adopted orphans below
  // it, none of those adopted elsewhere), with hosts and ports from the topology.
  const TreeView& view = tree().view();
  std::vector<TopologyNode> nodes;
  std::unordered_set<std::string_view> used;
  std::vector<Rank> order{id_.rank};
  for (std::size_t i = 0; i < order.size(); ++i) {
    const TopologyNode* held = topo().find(order[i]);
    if (!held) continue;
    TopologyNode node = *held;
    node.parent = i == 0 ? std::nullopt : std::optional<Rank>(view.parent(order[i]));
    node.children.clear();
    for (Rank c : view.children(order[i])) {
      if (!topo().find(c)) continue;
      node.children.push_back(c);
      order.push_back(c);
    }
    used.insert(held->host);
    nodes.push_back(std::move(node));
  }
  std::vector<Host> hosts;
  for (const Host& h : topo().hosts()) {
    if (used.count(h.name)) hosts.push_back(h);
  }
  auto subtree = Topology::make_subtree(std::move(nodes), std::move(hosts), "live subtree");
  if (!subtree) {
    log().warn("cannot send this node's subtree: {}", subtree.error());
    return std::nullopt;
  }
  return std::move(*subtree);
}

void Node::fill_adoption(wire::Hello::Builder hello) const {
  if (!plan_.commnode_parts() || !knows_tree()) return;
  const TreeView& view = tree().view();
  std::vector<Rank> ancestors;  // up from the failed parent, then reversed
  for (Rank r = view.parent(id_.rank); r != TreeView::kNone && ancestors.size() <= 64; r = view.parent(r)) {
    ancestors.push_back(r);
  }
  auto list = hello.initAncestors(static_cast<unsigned>(ancestors.size()));
  for (unsigned i = 0; i < ancestors.size(); ++i) list.set(i, ancestors[ancestors.size() - 1 - i]);
  if (hello.getStandby()) return;  // the subtree comes with the request on it, if ever
  if (auto subtree = live_subtree()) encode_topology(*subtree, hello.initSubtree());
}

void Node::on_endpoints(wire::Endpoints::Reader in) {
  std::vector<std::pair<Rank, std::uint16_t>> learnt;
  if (!knows_tree() || !read_endpoints(in, learnt)) {
    log().warn("ignoring endpoints from the parent: {}",
               knows_tree() ? "its ranks are not runs of as many ranks as it has ports" : "no topology yet");
    return;
  }
  if (folded_ && id_.role == Role::backend) {  // with no one to pass them on to, it keeps them as they came
    folded_->add_endpoints(in, learnt);
    return;
  }
  unfold();  // a commnode passes them on, which its part says how (rare after launch)
  if (refold_) refold_->add_endpoints(in, learnt);  // for when it folds again
  std::map<Rank, std::uint16_t> endpoints;
  for (const auto& [rank, port] : learnt) endpoints[rank] = port;
  publish_endpoints(endpoints);
  log().debug("{} listening endpoints learnt", endpoints.size());
}

void Node::publish_endpoints(const std::map<Rank, std::uint16_t>& endpoints) {
  std::vector<std::pair<Rank, std::uint16_t>> known;
  for (const auto& [rank, port] : endpoints) {
    if (topo().set_port(rank, port)) {
      known.emplace_back(rank, port);
      backend_part().set_port(rank, port);
    } else if (!topo().partial()) {  // a part holds only some ranks (docs/scale.md)
      log().warn("ignoring the endpoint of rank {}: not in the topology", rank);
    }
  }
  // Back-ends too: an orphaned back-end needs the endpoints of its potential adopters,
  // this node, its ancestors and its siblings (backend_needs_port). A commnode child
  // gets those its part holds: the ones every child's part holds, and those of its
  // own subtree. (Sent every port, a commnode child of the front-end kept the ports of
  // every commnode of the tree, folded: 4.5 KB at b:47^3, 20 KB at b:100^3.)
  auto encode = [](Message& message, const std::vector<std::pair<Rank, std::uint16_t>>& sent) {  // ascending
    auto e = message.body().initEndpoints();
    std::vector<Rank> ascending;
    for (const auto& [rank, port] : sent) ascending.push_back(rank);
    const auto runs = rank_runs(ascending);
    auto wire_runs = e.initRankRuns(static_cast<unsigned>(runs.size()));
    for (unsigned i = 0; i < runs.size(); ++i) wire_runs.set(i, runs[i]);
    auto wire_ports = e.initPorts(static_cast<unsigned>(sent.size()));
    for (std::size_t i = 0; i < sent.size(); ++i) wire_ports.set(static_cast<unsigned>(i), sent[i].second);
  };
  std::vector<std::pair<Rank, std::uint16_t>> to_every_commnode;
  std::unordered_map<Rank, std::vector<std::pair<Rank, std::uint16_t>>> to_one;  // by child
  for (const auto& e : known) {  // from a map: ascending
    if (const Rank only = only_part_holding(e.first); only != TreeView::kNone) {
      to_one[only].push_back(e);
    } else {
      to_every_commnode.push_back(e);
    }
  }
  std::optional<Message> to_each_backend, to_each_commnode;
  for (auto& child : children_) {
    if (!child.link) continue;
    if (child.role == Role::backend) {
      if (!to_each_backend) {
        std::vector<std::pair<Rank, std::uint16_t>> sent;
        for (const auto& e : known) {
          if (backend_part().sends_port(topo(), id_.rank, plan_, e.first)) sent.push_back(e);
        }
        encode(to_each_backend.emplace(id_), sent);
      }
      child.link->send(to_each_backend->builder());
      continue;
    }
    const auto own = to_one.find(child.rank);
    if (own == to_one.end()) {
      if (!to_each_commnode) encode(to_each_commnode.emplace(id_), to_every_commnode);
      child.link->send(to_each_commnode->builder());
      continue;
    }
    std::vector<std::pair<Rank, std::uint16_t>> sent;
    sent.reserve(to_every_commnode.size() + own->second.size());
    std::merge(to_every_commnode.begin(), to_every_commnode.end(), own->second.begin(), own->second.end(),
               std::back_inserter(sent));
    Message message(id_);
    encode(message, sent);
    child.link->send(message.builder());
  }
}

Rank Node::only_part_holding(Rank rank) const {
  if (!plan_.commnode_parts()) return TreeView::kNone;
  const TreeView& view = tree().view();
  if (!view.contains(rank)) return TreeView::kNone;
  // Up from `rank` to the child of this node it hangs from, if any (a bounded walk,
  // as TreeView's: a view built from stale reports must not loop).
  Rank below = rank;
  for (std::size_t steps = 0; steps <= view.held(); ++steps) {
    const Rank up = view.parent(below);
    if (up == TreeView::kNone) return TreeView::kNone;  // the root, or above this node
    if (up == id_.rank) return below == rank ? TreeView::kNone : below;  // a child is in every part
    below = up;
  }
  return TreeView::kNone;
}

bool Node::hears_of(Rank child, Rank about, bool failure) const {
  const TreeView& view = tree().view();
  if (!view.contains(about) || !view.contains(child)) return false;
  // Its ancestors, for routes; a failure, its siblings too (they may adopt its
  // orphans); an adoption, the orphan's subtree (its path up changed).
  if (view.in_subtree(about, child)) return true;
  if (failure) return view.parent(about) == id_.rank;
  return view.in_subtree(child, about);
}

bool Node::graft(const Topology& subtree, Rank under) {
  const TreeView& view = tree().view();
  const TopologyNode& top = subtree.root();
  // Not held, or held without its children (a frontier) while the subtree has some.
  if (view.holds_below(top.rank) || (view.contains(top.rank) && top.children.empty())) return true;
  if (!hold_graft(subtree, under)) return false;
  if (refold_) refold_->add_graft(subtree, under);  // grafted again as it unfolds
  log().info("holds the subtree of {} ({} processes) below {}", describe(top.rank), subtree.size(), describe(under));
  return true;
}

bool Node::hold_graft(const Topology& subtree, Rank under) {
  if (!tree_->graft(subtree, under)) return false;
  if (auto held = topology_->graft(under, subtree); !held) {
    log().warn("the topology does not take the subtree of {}: {}", subtree.root().rank, held.error());
  }
  return true;
}

// The news with its filters, made at its first use (core/healing.h).
TreeNews& Node::news() {
  if (TreeNews* made = news_if_made()) return *made;
  TreeNews& news = healer().news();
  // A back-end child hears of the adoptions its part of the tree holds. Where
  // commnodes hold parts, an adoption goes down only into the orphan's subtree
  // (Node::hears_of), the one place below an adopter's ancestors where a path up
  // changed. A back-end adopted here is news to them only if the part they were sent
  // holds it (a sibling that came back); one adopted from elsewhere is not in their
  // part, and news of it reached F back-ends of each of F adopters. (A back-end
  // adopted here hears of its former siblings adopted here too: TreeNews::send.)
  news.set_backend_filter([this](Rank orphan, Rank adopter) {
    // (Through tree() and topo(): asked as held news goes out, which a commnode's
    // folded part may no longer be by then.)
    if (plan_.commnode_parts() && adopter != id_.rank) return tree().view().in_subtree(id_.rank, orphan);
    return backend_part().holds(topo(), id_.rank, plan_, orphan);
  });
  news.set_commnode_filter([this](Rank child, Rank orphan) { return !plan_.commnode_parts() || hears_of(child, orphan, false); });
  return news;
}

}  // namespace canopy::core
