#include "core/healing.h"

namespace canopy::core {

using transport::Link;

void Healing::open_standby(const std::shared_ptr<Link>& link, Rank acceptor, std::uint32_t incarnation,
                           const std::vector<Service*>& services,
                           const std::function<void(wire::Hello::Builder)>& fill) {
  close_standby("replaced");
  standby_ = {link, acceptor};
  up.begin(link, incarnation, false, true, acceptor, services, fill);
}

TreeNews& Healing::news() {
  if (!news_) news_ = std::make_unique<TreeNews>(io_, self_, children_);
  return *news_;
}

HeldAdoptions& Healing::held() {
  if (!held_) held_ = std::make_unique<HeldAdoptions>(node_, adopt_);
  return *held_;
}

std::optional<Rank> Healing::standby() const {
  if (!standby_.link || !standby_.link->is_open()) return std::nullopt;
  return standby_.acceptor;
}

void Healing::close_standby(std::string_view why) {
  if (!standby_.link) return;
  auto link = std::exchange(standby_.link, nullptr);
  up.forget(link.get());
  link->close(why);
}

Rank Healing::forget_standby() { return std::exchange(standby_, {}).acceptor; }

std::shared_ptr<Link> Healing::take_standby(Rank candidate) {
  if (!standby_.link || !standby_.link->is_open() || standby_.acceptor != candidate ||
      up.under_way(standby_.link.get())) {
    return nullptr;
  }
  return std::exchange(standby_.link, nullptr);
}

void Healing::detach() {
  if (standby_.link) std::exchange(standby_.link, nullptr)->detach();
  if (reattaching.link) std::exchange(reattaching.link, nullptr)->detach();
}

}  // namespace canopy::core
