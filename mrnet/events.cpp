// MRNet's events on Canopy's (docs/mrnet.md, decision 9): Canopy's failures,
// adoptions and views become topology events; packets become data events; errors
// on receiving become error events. Delivered by callbacks (on the layer's event
// thread), by one pipe per class, and by polling (next_Event).
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "mrnet/network_impl.h"

namespace MRN {

const EventClass Event::EVENT_CLASS_ALL = 0;
const EventClass Event::DATA_EVENT = 1;
const EventClass Event::TOPOLOGY_EVENT = 2;
const EventClass Event::ERROR_EVENT = 3;
EventType Event::EVENT_TYPE_ALL = -1;
EventType DataEvent::DATA_AVAILABLE = 0;
EventType ErrorEvent::ERROR_INTERNAL = 0;
EventType ErrorEvent::ERROR_SYSTEM = 1;
EventType ErrorEvent::ERROR_USAGE = 2;
EventType TopologyEvent::TOPOL_ADD_BE = 0;
EventType TopologyEvent::TOPOL_ADD_CP = 1;
EventType TopologyEvent::TOPOL_REMOVE_NODE = 2;
EventType TopologyEvent::TOPOL_CHANGE_PARENT = 3;

namespace {

bool matches(EventClass want_class, EventType want_type, const Event& event) {
  return (want_class == Event::EVENT_CLASS_ALL || want_class == event.get_Class()) &&
         (want_type == Event::EVENT_TYPE_ALL || want_type == event.get_Type());
}

}  // namespace

// Called with the mutex held. An event a callback takes goes to the event thread;
// the others wait for next_Event(). Either way the class's descriptor is told.
void Network::Impl::post(std::unique_ptr<Event> event) {
  for (auto& [event_class, fds] : event_pipes) {
    if (event_class == Event::EVENT_CLASS_ALL || event_class == event->get_Class()) {
      const char byte = 1;
      [[maybe_unused]] auto n = ::write(fds.second, &byte, 1);
    }
  }
  const bool taken = std::any_of(callbacks.begin(), callbacks.end(), [&](const Callback& c) {
    return matches(c.event_class, c.type, *event);
  });
  if (!taken) {
    events.push_back(std::move(event));
    return;
  }
  for_callbacks.push_back(std::move(event));
  const char byte = 2;  // wakes the event thread
  [[maybe_unused]] auto n = ::write(wake[1], &byte, 1);
}

void Network::Impl::poll_canopy_events() {
  std::vector<canopy::Event> got;
  while (true) {
    std::optional<canopy::Event> e = frontend ? frontend->next_event(std::chrono::milliseconds(0))
                                   : backend  ? backend->next_event(std::chrono::milliseconds(0))
                                              : std::nullopt;
    if (!e) break;
    got.push_back(std::move(*e));
  }
  if (got.empty()) return;
  std::lock_guard lock(mutex);
  for (const auto& e : got) {
    using K = canopy::Event::Kind;
    if (e.kind == K::failure) {
      post(std::make_unique<TopologyEvent>(TopologyEvent::TOPOL_REMOVE_NODE,
                                           new TopologyEvent::TopolEventData(e.rank, UnknownRank)));
    } else if (e.kind == K::adoption) {
      post(std::make_unique<TopologyEvent>(TopologyEvent::TOPOL_CHANGE_PARENT,
                                           new TopologyEvent::TopolEventData(e.rank, e.adopter)));
    } else if (e.kind == K::view) {
      for (Rank joined : e.joined) {
        post(std::make_unique<TopologyEvent>(TopologyEvent::TOPOL_ADD_BE,
                                             new TopologyEvent::TopolEventData(joined, UnknownRank)));
      }
    }
  }
}

void Network::clear_Events() {
  impl_->poll_canopy_events();
  std::lock_guard lock(impl_->mutex);
  impl_->events.clear();
}

unsigned int Network::num_EventsPending() {
  impl_->poll_canopy_events();
  std::lock_guard lock(impl_->mutex);
  return static_cast<unsigned int>(impl_->events.size());
}

Event* Network::next_Event() {
  impl_->poll_canopy_events();
  std::lock_guard lock(impl_->mutex);
  if (impl_->events.empty()) return nullptr;
  auto event = std::move(impl_->events.front());
  impl_->events.pop_front();
  return event.release();
}

int Network::get_EventNotificationFd(EventClass event_class) {
  auto& impl = *impl_;
  {
    std::lock_guard lock(impl.mutex);
    auto it = impl.event_pipes.find(event_class);
    if (it != impl.event_pipes.end()) return it->second.first;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
    impl.event_pipes[event_class] = {fds[0], fds[1]};
    if (event_class == Event::DATA_EVENT || event_class == Event::EVENT_CLASS_ALL) impl.data_events_wanted = true;
  }
  impl.start_event_thread();
  return impl.event_pipes[event_class].first;
}

void Network::clear_EventNotificationFd(EventClass event_class) {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->event_pipes.find(event_class);
  if (it == impl_->event_pipes.end()) return;
  char buffer[256];
  while (::read(it->second.first, buffer, sizeof buffer) > 0) {
  }
}

void Network::close_EventNotificationFd(EventClass event_class) {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->event_pipes.find(event_class);
  if (it == impl_->event_pipes.end()) return;
  ::close(it->second.first);
  ::close(it->second.second);
  impl_->event_pipes.erase(it);
}

bool Network::register_EventCallback(EventClass event_class, EventType type, evt_cb_func function, void* data,
                                     bool onetime) {
  if (!function) return false;
  auto& impl = *impl_;
  {
    std::lock_guard lock(impl.mutex);
    impl.callbacks.push_back({event_class, type, function, data, onetime});
    if (event_class == Event::DATA_EVENT || event_class == Event::EVENT_CLASS_ALL) impl.data_events_wanted = true;
  }
  impl.start_event_thread();
  return true;
}

bool Network::remove_EventCallback(evt_cb_func function, EventClass event_class, EventType type) {
  std::lock_guard lock(impl_->mutex);
  auto& list = impl_->callbacks;
  const auto before = list.size();
  std::erase_if(list, [&](const Impl::Callback& c) {
    return c.function == function && c.event_class == event_class && c.type == type;
  });
  return list.size() != before;
}

bool Network::remove_EventCallbacks(EventClass event_class, EventType type) {
  std::lock_guard lock(impl_->mutex);
  auto& list = impl_->callbacks;
  const auto before = list.size();
  std::erase_if(list, [&](const Impl::Callback& c) { return c.event_class == event_class && c.type == type; });
  return list.size() != before;
}

// ---- the event thread: runs callbacks, and receives while data is wanted ----

void Network::Impl::start_event_thread() {
  std::lock_guard lock(mutex);
  if (event_thread.joinable()) return;
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) return;
  event_thread = std::thread([this] { event_loop(); });
}

void Network::Impl::stop_event_thread() {
  if (!event_thread.joinable()) return;  // 1 stops it, 2 only wakes it
  const char byte = 1;
  [[maybe_unused]] auto n = ::write(wake[1], &byte, 1);
  event_thread.join();
  ::close(wake[0]);
  ::close(wake[1]);
  for (auto& [c, fds] : event_pipes) ::close(fds.first), ::close(fds.second);
  event_pipes.clear();
}

void Network::Impl::event_loop() {
  const int events_fd = frontend ? frontend->events_fd() : backend ? backend->events_fd() : -1;
  const int data_fd = frontend ? frontend->event_fd() : backend ? backend->event_fd() : -1;
  while (true) {
    bool want_data;
    {
      std::lock_guard lock(mutex);
      want_data = data_events_wanted && !stopped;
    }
    pollfd fds[3] = {{wake[0], POLLIN, 0}, {events_fd, POLLIN, 0}, {want_data ? data_fd : -1, POLLIN, 0}};
    ::poll(fds, 3, 200);
    if (fds[0].revents & POLLIN) {
      char bytes[64];
      const auto n = ::read(wake[0], bytes, sizeof bytes);
      if (std::find(bytes, bytes + std::max<ssize_t>(n, 0), 1) != bytes + std::max<ssize_t>(n, 0)) return;
    }
    poll_canopy_events();
    std::unique_lock lock(mutex);
    if (want_data && (fds[2].revents & POLLIN) && !pumping) pump(lock, std::chrono::milliseconds(0));
    // Callbacks run without the lock, so that they may call the network.
    while (!for_callbacks.empty()) {
      auto event = std::move(for_callbacks.front());
      for_callbacks.pop_front();
      std::vector<Callback> run;
      for (auto it = callbacks.begin(); it != callbacks.end();) {
        if (matches(it->event_class, it->type, *event)) {
          run.push_back(*it);
          if (it->onetime) {
            it = callbacks.erase(it);
            continue;
          }
        }
        ++it;
      }
      lock.unlock();
      for (const auto& c : run) c.function(event.get(), c.data);
      lock.lock();
    }
  }
}

}  // namespace MRN
