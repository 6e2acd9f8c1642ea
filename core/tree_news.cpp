#include "core/tree_news.h"

#include <algorithm>
#include <utility>

#include "transport/link.h"

namespace canopy::core {

void set_adoption(wire::AttachReport::Builder a, Rank orphan, Rank adopter, std::uint32_t incarnation,
                  bool orphan_is_commnode) {
  a.setOrphan(orphan);
  a.setAdopter(adopter);
  a.setIncarnation(incarnation);
  a.setOrphanIsCommnode(orphan_is_commnode);
}

TreeNews::TreeNews(boost::asio::io_context& io, const NodeIdentity& sender, ChildTable& children)
    : sender_(sender), children_(children), fast_timer_(io), leaf_timer_(io) {}

void TreeNews::add(Rank orphan, Rank adopter, std::uint32_t incarnation, const transport::Link* except,
                   bool about_backend) {
  const News news{orphan, adopter, incarnation, except, about_backend};
  fast_.push_back(news);
  if (fast_.size() == 1) {
    fast_timer_.expires_after(kFastWindow);
    fast_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) flush_fast();
    });
  }
  if (!about_backend) return;
  leaf_.push_back(news);
  if (leaf_.size() == 1) {
    leaf_timer_.expires_after(kLeafWindow);
    leaf_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) flush_leaf();
    });
  }
}

// Nothing waits, no timer is armed (it is armed with the first report and cancelled
// with the batch): the common case, on every message to a child, costs a test.
void TreeNews::flush_fast() {
  if (fast_.empty()) return;
  fast_timer_.cancel();
  send(std::exchange(fast_, {}), false);
}

void TreeNews::flush_leaf() {
  if (leaf_.empty()) return;
  leaf_timer_.cancel();
  send(std::exchange(leaf_, {}), true);
}

void TreeNews::flush(bool backends_too) {
  flush_fast();
  if (backends_too) flush_leaf();
}

void TreeNews::drop() {
  fast_.clear();
  leaf_.clear();
  fast_timer_.cancel();
  leaf_timer_.cancel();
}

void TreeNews::send(const std::vector<News>& news, bool leaf) {
  // Whether back-end children take a report: the same for all of them, asked once
  // the first back-end child comes.
  std::vector<bool> for_backends;
  for (auto& child : children_) {
    if (!child.link) continue;
    const bool backend = child.role == Role::backend;
    if (backend && for_backends.empty()) {
      for (const auto& n : news) for_backends.push_back(!backend_wants_ || backend_wants_(n.orphan, n.adopter));
    }
    // A commnode takes every report in the fast batch; a back-end, those about
    // back-ends in the leaf batch only, and of those only what its part of the tree
    // holds. A back-end adopted here holds the part its first parent sent it, whose
    // back-ends (its former siblings) may be adopted here too: it takes those.
    auto wanted = [&](const News& n) {
      if (n.except == child.link.get()) return false;
      if (!backend) return !leaf && (!commnode_wants_ || commnode_wants_(child.rank, n.orphan));
      if (n.about_backend != leaf) return false;
      return for_backends[static_cast<std::size_t>(&n - news.data())] || (child.adopted && n.adopter == sender_.rank);
    };
    const auto count = std::count_if(news.begin(), news.end(), wanted);
    if (count == 0) continue;
    Message message(sender_);
    auto list = message.body().initAttachReports(static_cast<unsigned>(count));
    unsigned i = 0;
    for (const auto& n : news) {
      if (wanted(n)) set_adoption(list[i++], n.orphan, n.adopter, n.incarnation, !n.about_backend);
    }
    child.link->send(message.builder());
  }
}

void TreeNews::send_live_tree(const LiveTree& tree, transport::Link& link, bool to_a_child) const {
  constexpr std::size_t kPerBatch = 4096;
  const auto reports = tree.reports();
  auto commnode = [&](Rank r) { return tree.view().role(r) == Role::commnode; };
  for (std::size_t i = 0; i < reports.size();) {
    Message message(sender_);
    if (reports[i].failure) {
      auto f = message.body().initFailureReport();
      f.setRank(reports[i].rank);
      f.setReason("failed before this process joined");
      f.setIncarnation(tree.view().incarnation(reports[i].rank));
      ++i;
    } else if (!to_a_child) {
      set_adoption(message.body().initAttachReport(), reports[i].rank, reports[i].adopter, reports[i].incarnation,
                   commnode(reports[i].rank));
      ++i;
    } else {
      std::size_t end = i;
      while (end < reports.size() && !reports[end].failure && end - i < kPerBatch) ++end;
      auto list = message.body().initAttachReports(static_cast<unsigned>(end - i));
      for (unsigned k = 0; i < end; ++i, ++k) {
        set_adoption(list[k], reports[i].rank, reports[i].adopter, reports[i].incarnation, commnode(reports[i].rank));
      }
    }
    link.send(message.builder());
  }
}

}  // namespace canopy::core
