// MRN::Stream on a Canopy stream (docs/mrnet.md, decision 5).
#include <fcntl.h>
#include <unistd.h>

#include <cstdarg>

#include "mrnet/conventions.h"
#include "mrnet/network_impl.h"
#include "mrnet/packet_codec.h"

namespace MRN {

Stream::Stream(Network* network, unsigned int id, unsigned int canopy_id, std::set<Rank> endpoints)
    : network_(network), id_(id), canopy_id_(canopy_id), endpoints_(std::move(endpoints)) {}

Stream::~Stream() {
  close_DataNotificationFd();
  // A tool's `delete stream`: the network forgets it (the Canopy stream stays open).
  auto& impl = *network_->impl_;
  std::lock_guard lock(impl.mutex);
  auto it = impl.streams.find(id_);
  if (it != impl.streams.end() && it->second.get() == this) {
    (void)it->second.release();  // being deleted already
    impl.streams.erase(it);
  }
}

Rank Stream::destination() const {
  // The front-end's per-back-end stream goes to its one back-end; a back-end's
  // packets all go up.
  return network_->impl_->is_frontend() && canopy_id_ == layer::kPerBackendStream ? id_ : UnknownRank;
}

int Stream::send_packet(const Packet& packet) { return network_->impl_->send(canopy_id_, destination(), packet); }

int Stream::send(int tag, const char* format, ...) {
  va_list values;
  va_start(values, format);
  const int sent = send(format, values, tag);
  va_end(values);
  return sent;
}

int Stream::send(const char* format, va_list values, int tag) {
  // Straight into Canopy's packet: no MRNet packet to build and copy from.
  auto packet = codec::pack_canopy(tag, format, values);
  auto& impl = *network_->impl_;
  if (!packet) return impl.fail(ERR_PACKING, packet.error());
  return impl.send(canopy_id_, destination(), std::move(*packet));
}

int Stream::send(int tag, const void** values, const char* format) {
  Packet packet(id_, tag, values, format);
  return send_packet(packet);
}

int Stream::send(PacketPtr& packet) {
  if (!packet) return network_->impl_->fail(ERR_PACKING, "send: a null packet");
  return send_packet(*packet);
}

int Stream::flush() const { return network_->flush(); }

int Stream::recv(int* tag, PacketPtr& packet, bool blocking) {
  return network_->impl_->receive(this, tag, packet, nullptr, blocking);
}

bool Stream::has_Data() {
  auto& impl = *network_->impl_;
  std::unique_lock lock(impl.mutex);
  if (queue_.empty() && !impl.pumping && !impl.stopped) impl.pump(lock, std::chrono::milliseconds(0));
  return !queue_.empty();
}

int Stream::get_DataNotificationFd() {
  auto& impl = *network_->impl_;
  {
    std::lock_guard lock(impl.mutex);
    if (data_fd_[0] < 0) {
      if (::pipe2(data_fd_, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
      for (std::size_t i = 0; i < queue_.size(); ++i) {
        const char byte = 1;
        [[maybe_unused]] auto n = ::write(data_fd_[1], &byte, 1);
      }
    }
    impl.data_events_wanted = true;  // the event thread receives, so that the fd fills
  }
  impl.start_event_thread();  // takes the lock itself
  return data_fd_[0];
}

void Stream::clear_DataNotificationFd() {
  if (data_fd_[0] < 0) return;
  char buffer[256];
  while (::read(data_fd_[0], buffer, sizeof buffer) > 0) {
  }
}

void Stream::close_DataNotificationFd() {
  for (int& fd : data_fd_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

int Stream::set_FilterParameters(FilterType type, const char* format, ...) const {
  va_list values;
  va_start(values, format);
  const int r = set_FilterParameters(format, values, type);
  va_end(values);
  return r;
}

int Stream::set_FilterParameters(const char* format, va_list values, FilterType type) const {
  auto& impl = *network_->impl_;
  if (!impl.frontend) return impl.fail(ERR_INTERNAL, "set_FilterParameters: only the front-end sets them");
  va_list copy;
  va_copy(copy, values);
  Packet params(format, copy, id_, 0);
  va_end(copy);
  if (params.has_Error()) return impl.fail(ERR_PACKING, params.impl().error);
  canopy::Result<void> set;
  if (type == FILTER_UPSTREAM_SYNC) {
    // The time-out of SFILTER_TIMEOUT, in milliseconds.
    unsigned int ms = 0;
    if (params.unpack("%ud", &ms) != 0) {
      return impl.fail(ERR_FORMATSTR, "set_FilterParameters(FILTER_UPSTREAM_SYNC): give the time-out as \"%ud\"");
    }
    set = impl.frontend->set_filter_params(canopy_id_, canopy::FilterSlot::sync,
                                           canopy::Packet{0, {static_cast<std::int32_t>(ms)}});
  } else {
    // A tool's function gets its own parameters after the file and function names;
    // the built-in filters take none and refuse them.
    const auto slot = type == FILTER_UPSTREAM_TRANS ? canopy::FilterSlot::upstream : canopy::FilterSlot::downstream;
    // With its format: after the names, an empty format must still be a packet.
    canopy::Packet encoded = codec::to_canopy(params, codec::Form::with_format);
    auto it = impl.stream_filters.find({canopy_id_, slot});
    if (it != impl.stream_filters.end() && (it->second.per_node || !it->second.so_file.empty())) {
      // Nodes with functions of their own keep them: the names are left empty.
      std::vector<canopy::Value> with_names{it->second.per_node ? std::string() : it->second.so_file,
                                            it->second.per_node ? std::string() : it->second.function};
      with_names.insert(with_names.end(), encoded.values().begin(), encoded.values().end());
      encoded = canopy::Packet{0, std::move(with_names)};
    }
    set = impl.frontend->set_filter_params(canopy_id_, slot, encoded);
  }
  if (!set) return impl.fail(ERR_INTERNAL, "set_FilterParameters: " + set.error());
  return 0;
}

void Stream::print_PerformanceData(perfdata_metric_t, perfdata_context_t) { layer::say_no_performance_data(); }

bool Stream::is_Closed() const { return network_->is_ShutDown(); }

}  // namespace MRN
