// StripedLink, connecting side: the path handshake (blocking and asynchronous),
// connecting and reconnecting paths (docs/striping.md).
#include "transport/striped_link.h"
#include "transport/striped_link_detail.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <unordered_map>

namespace canopy::transport {

namespace {

// Waits until `fd` is ready for `events` or `deadline` passes.
error_code wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return asio::error::timed_out;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r > 0) return {};
    if (r < 0 && errno != EINTR) return {errno, boost::system::system_category()};
  }
}

// Why a connecting side leaves a path whose acceptor accepted it without the tag.
constexpr const char* kNoProofFromAcceptor =
    "the peer accepted the path without proving the network's secret (another key, or none)";

// The connecting side's handshake on one path, blocking, bounded by `timeout`.
error_code blocking_handshake(tcp::socket& socket, const PathEndpoints& path, const PathHello& hello,
                              const PathMac& mac, std::chrono::milliseconds timeout, HelloStatus& status,
                              std::string& detail) {
  const auto deadline = Clock::now() + timeout;
  error_code ec;
  auto remote = asio::ip::make_address(path.remote_address, ec);
  if (ec) return ec;
  socket.open(remote.is_v4() ? tcp::v4() : tcp::v6(), ec);
  if (ec) return ec;
  if (!path.local_address.empty()) {
    socket.bind({asio::ip::make_address(path.local_address, ec), 0}, ec);
    if (ec) return ec;
  }
  socket.native_non_blocking(true, ec);
  if (ec) return ec;
  const int fd = socket.native_handle();
  tcp::endpoint to(remote, path.remote_port);
  if (::connect(fd, to.data(), static_cast<socklen_t>(to.size())) != 0) {
    if (errno != EINPROGRESS) return {errno, boost::system::system_category()};
    if ((ec = wait_fd(fd, POLLOUT, deadline))) return ec;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return {err, boost::system::system_category()};
  }
  auto send_all = [&](const std::byte* out, std::size_t size) -> error_code {
    for (std::size_t done = 0; done < size;) {
      ssize_t n = ::send(fd, out + done, size - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<std::size_t>(n);
      } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        if (auto e = wait_fd(fd, POLLOUT, deadline)) return e;
      } else {
        return {errno, boost::system::system_category()};
      }
    }
    return {};
  };
  std::byte out[kPathHelloBytes];
  encode_hello(hello, out);
  if ((ec = send_all(out, sizeof out))) return ec;
  std::byte in[kHelloReplyBytes];
  for (std::size_t done = 0; done < sizeof in;) {
    ssize_t n = ::recv(fd, in + done, sizeof in - done, 0);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n == 0) {
      return asio::error::eof;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if ((ec = wait_fd(fd, POLLIN, deadline))) return ec;
    } else {
      return {errno, boost::system::system_category()};
    }
  }
  auto reply = decode_hello_reply(in);
  if (!reply) {
    detail = reply.error();
    return asio::error::invalid_argument;
  }
  status = reply->status;
  if (status == HelloStatus::accepted) {
    if (!tags_equal(reply->tag, accept_tag(mac, out, *reply))) {
      detail = kNoProofFromAcceptor;
      return asio::error::access_denied;
    }
    const PathTag proof = proof_tag(mac, out, *reply);
    if ((ec = send_all(proof.data(), proof.size()))) return ec;
  }
  socket.native_non_blocking(false, ec);
  return {};
}

}  // namespace

// A connecting side's handshake in progress on one path.
struct StripedLink::Handshake {
  explicit Handshake(asio::io_context& io) : socket(io), timer(io) {}
  tcp::socket socket;
  asio::steady_timer timer;
  std::byte hello[kPathHelloBytes];
  std::byte reply[kHelloReplyBytes];
  PathTag proof{};
  bool timed_out = false;
};

// ---------------------------------------------------------------------------
// Setting up

PathHello StripedLink::hello_for(std::size_t index) const {
  PathHello hello;
  hello.reliable = options_.reliable;
  hello.rejoin = ever_accepted_;
  hello.checksum = options_.checksum;
  hello.path_index = static_cast<std::uint16_t>(index);
  hello.path_count = static_cast<std::uint16_t>(paths_.size());
  hello.max_fragment_bytes = static_cast<std::uint32_t>(options_.max_fragment_bytes);
  hello.link_id = link_id_;
  hello.nonce = new_path_nonce();
  return hello;
}

void StripedLink::async_connect(asio::io_context& io, std::vector<PathEndpoints> paths, StripedOptions options,
                                ConnectHandler handler) {
  if (auto problem = validate(paths, options); !problem.empty()) {
    asio::post(io, [handler = std::move(handler), problem] { handler(Error{problem}); });
    return;
  }
  std::shared_ptr<StripedLink> link(
      new StripedLink(io, Side::connecting, random_link_id(), std::move(options), paths.size()));
  for (std::size_t i = 0; i < paths.size(); ++i) link->paths_[i]->endpoints = paths[i];
  link->peer_ = paths[0].remote_address + ":" + std::to_string(paths[0].remote_port) + " (striped, " +
                std::to_string(paths.size()) + " paths)";
  struct FirstAttempts {
    std::size_t remaining;
    bool reported = false;
    std::string errors;
    ConnectHandler handler;
  };
  auto first = std::make_shared<FirstAttempts>(FirstAttempts{paths.size(), false, {}, std::move(handler)});
  for (std::size_t i = 0; i < paths.size(); ++i) {
    link->connect_path(i, [link, first, i](const error_code& ec, const std::string& error) {
      --first->remaining;
      if (!ec) {
        if (!first->reported) {
          first->reported = true;
          first->handler(link);
        }
        return;
      }
      first->errors += (first->errors.empty() ? "" : "; ") + link->describe(*link->paths_[i]) + ": " + error;
      if (first->remaining == 0 && !first->reported) {
        first->reported = true;
        link->finish("no path could be connected", false);
        first->handler(Error{"cannot connect any of the " + std::to_string(link->paths_.size()) +
                             " paths of a striped link: " + first->errors});
        return;
      }
      link->schedule_reconnect(i);
    });
  }
}

Result<std::shared_ptr<StripedLink>> StripedLink::connect(asio::io_context& io, std::vector<PathEndpoints> paths,
                                                          StripedOptions options) {
  if (auto problem = validate(paths, options); !problem.empty()) return Error{problem};
  std::shared_ptr<StripedLink> link(
      new StripedLink(io, Side::connecting, random_link_id(), std::move(options), paths.size()));
  for (std::size_t i = 0; i < paths.size(); ++i) link->paths_[i]->endpoints = paths[i];
  link->peer_ = paths[0].remote_address + ":" + std::to_string(paths[0].remote_port) + " (striped, " +
                std::to_string(paths.size()) + " paths)";
  std::string errors;
  std::vector<std::size_t> failed;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    tcp::socket socket(io);
    HelloStatus status = HelloStatus::malformed;
    std::string detail;
    auto ec = blocking_handshake(socket, paths[i], link->hello_for(i), link->options_.path_mac,
                                 link->options_.hello_timeout, status, detail);
    std::string error;
    if (ec) {
      error = detail.empty() ? ec.message() : detail;
    } else if (status != HelloStatus::accepted) {
      error = "refused: " + std::string(to_string(status));
    }
    if (!error.empty()) {
      errors += (errors.empty() ? "" : "; ") + link->describe(*link->paths_[i]) + ": " + error;
      link->paths_[i]->last_error = error;
      failed.push_back(i);
      continue;
    }
    link->ever_accepted_ = true;
    link->attach(i, std::move(socket));
  }
  if (!link->ever_accepted_) {
    link->finish("no path could be connected", false);
    return Error{"cannot connect any of the " + std::to_string(paths.size()) + " paths of a striped link: " + errors};
  }
  for (auto i : failed) link->schedule_reconnect(i);
  return link;
}

void StripedLink::connect_path(std::size_t index,
                               std::function<void(const error_code&, const std::string&)> done) {
  Path& path = *paths_[index];
  set_state(path, PathState::connecting, "connecting");
  auto hs = std::make_shared<Handshake>(io_);
  encode_hello(hello_for(index), hs->hello);
  auto self = shared_from_this();
  // Every outcome goes through here, once.
  auto finish_attempt = [self, index, hs, done](error_code ec, std::string error) {
    hs->timer.cancel();
    Path& p = *self->paths_[index];
    if (!self->open_) {
      error_code ignored;
      hs->socket.close(ignored);
      return;
    }
    if (hs->timed_out && ec) {
      ec = asio::error::timed_out;
      error = "no hello reply within " + std::to_string(ms(self->options_.hello_timeout)) + " ms";
    }
    if (ec) {
      if (error.empty()) error = ec.message();
      p.last_error = error;
      p.peer_closed = ec == asio::error::connection_refused;
      self->set_state(p, PathState::down, "connect failed: " + error);
      done(ec, error);
      self->check_all_down();
      return;
    }
    self->ever_accepted_ = true;
    self->attach(index, std::move(hs->socket));
    done(ec, {});
  };

  error_code ec;
  auto remote = asio::ip::make_address(path.endpoints.remote_address, ec);
  if (!ec) hs->socket.open(remote.is_v4() ? tcp::v4() : tcp::v6(), ec);
  if (!ec && !path.endpoints.local_address.empty()) {
    auto local = asio::ip::make_address(path.endpoints.local_address, ec);
    if (!ec) hs->socket.bind({local, 0}, ec);
  }
  if (ec) {
    asio::post(io_, [finish_attempt, ec] { finish_attempt(ec, "cannot bind: " + ec.message()); });
    return;
  }
  hs->timer.expires_after(options_.hello_timeout);
  hs->timer.async_wait([hs](const error_code& ec) {
    if (ec) return;
    hs->timed_out = true;
    error_code ignored;
    hs->socket.close(ignored);
  });
  hs->socket.async_connect({remote, path.endpoints.remote_port}, [hs, finish_attempt, mac = options_.path_mac](
                                                                      const error_code& ec) {
    if (ec) return finish_attempt(ec, {});
    asio::async_write(hs->socket, asio::buffer(hs->hello), [hs, finish_attempt, mac](const error_code& ec, std::size_t) {
      if (ec) return finish_attempt(ec, {});
      asio::async_read(hs->socket, asio::buffer(hs->reply), [hs, finish_attempt, mac](const error_code& ec, std::size_t) {
        if (ec) return finish_attempt(ec, ec == asio::error::eof ? "closed by the peer during the hello" : "");
        auto reply = decode_hello_reply(hs->reply);
        if (!reply) return finish_attempt(asio::error::invalid_argument, reply.error());
        if (reply->status != HelloStatus::accepted) {
          return finish_attempt(asio::error::connection_refused, "refused: " + std::string(to_string(reply->status)));
        }
        if (!tags_equal(reply->tag, accept_tag(mac, hs->hello, *reply))) {
          return finish_attempt(asio::error::access_denied, kNoProofFromAcceptor);
        }
        hs->proof = proof_tag(mac, hs->hello, *reply);
        asio::async_write(hs->socket, asio::buffer(hs->proof), [finish_attempt](const error_code& ec, std::size_t) {
          finish_attempt(ec, {});
        });
      });
    });
  });
}

void StripedLink::schedule_reconnect(std::size_t index) {
  Path& path = *paths_[index];
  if (!open_ || side_ != Side::connecting) return;
  if (!path.reconnect_timer) path.reconnect_timer = std::make_unique<asio::steady_timer>(io_);
  path.reconnect_timer->expires_after(options_.reconnect.delay(++path.reconnect_attempts));
  path.reconnect_timer->async_wait([self = shared_from_this(), index](const error_code& ec) {
    if (ec || !self->open_) return;
    self->connect_path(index, [self, index](const error_code& ec, const std::string& error) {
      if (ec && error.find("unknown link") != std::string::npos) {
        self->finish("the peer no longer knows this link (it closed it): " + error, true);
        return;
      }
      if (ec) self->schedule_reconnect(index);
    });
  });
}

std::shared_ptr<StripedLink> StripedLink::create_accepted(asio::io_context& io, const PathHello& hello,
                                                          StripedOptions options, std::string peer) {
  options.checksum = hello.checksum;
  options.reliable = hello.reliable;
  options.max_fragment_bytes = hello.max_fragment_bytes;
  options.max_unacked_bytes = std::max(options.max_unacked_bytes, 2 * options.max_fragment_bytes);
  std::shared_ptr<StripedLink> link(new StripedLink(io, Side::accepting, hello.link_id, options, hello.path_count));
  link->peer_ = std::move(peer) + " (striped, " + std::to_string(hello.path_count) + " paths)";
  return link;
}

bool StripedLink::matches(const PathHello& hello) const {
  return hello.checksum == options_.checksum && hello.reliable == options_.reliable &&
         hello.path_count == paths_.size() && hello.max_fragment_bytes == options_.max_fragment_bytes;
}

void StripedLink::attach(std::size_t index, tcp::socket socket) {
  Path& path = *paths_[index];
  if (!open_) {
    error_code ignored;
    socket.close(ignored);
    return;
  }
  if (path.conn) path_failed(path, "replaced by a new connection from the peer", false);
  tune(socket, options_.path_silence);
  error_code ec;
  path.stats.local = endpoint_text(socket.local_endpoint(ec));
  path.stats.remote = endpoint_text(socket.remote_endpoint(ec));
  path.conn = std::make_shared<Connection>(std::move(socket), receive_buffer_bytes(options_));
  path.last_received = path.last_sent = Clock::now();
  path.peer_closed = false;
  path.reconnect_attempts = 0;
  path.last_error.clear();
  bool rejoin = path.ever_live;
  if (rejoin) ++path.stats.rejoins;
  path.ever_live = true;
  set_state(path, PathState::live, rejoin ? "rejoined" : "up");
  check_all_down();
  if (started()) read_more(path);
  schedule_pump();
}

}  // namespace canopy::transport
