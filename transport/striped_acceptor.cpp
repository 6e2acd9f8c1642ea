// StripedAcceptor: tells striped paths from plain connections, runs the accepting
// side of the path handshake, and makes links of paths (docs/striping.md).
#include "transport/striped_link.h"
#include "transport/striped_link_detail.h"
#include "transport/refusal_log.h"

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

// ---------------------------------------------------------------------------
// StripedAcceptor

struct StripedAcceptor::State : std::enable_shared_from_this<StripedAcceptor::State> {
  State(asio::io_context& io, StripedOptions options, LinkHandler on_link, PlainHandler on_plain)
      : io(io), options(with_logger(std::move(options))), on_link(std::move(on_link)), on_plain(std::move(on_plain)) {}

  struct Pending {
    explicit Pending(tcp::socket s) : socket(std::move(s)), timer(socket.get_executor()) {}
    tcp::socket socket;
    asio::steady_timer timer;
    std::byte hello[kPathHelloBytes];
    std::byte reply[kHelloReplyBytes];
    HelloReply answer;  // as sent in `reply`
    PathTag proof{};
  };

  asio::io_context& io;
  StripedOptions options;
  LinkHandler on_link;
  PlainHandler on_plain;
  std::unordered_map<std::uint64_t, std::weak_ptr<StripedLink>> links;
  std::vector<std::shared_ptr<Pending>> pending;
  bool closed = false;
  // Connections closed for being over max_pending, not yet logged: one line a
  // second at most, however fast they come.
  std::size_t refused_unlogged = 0;
  std::chrono::steady_clock::time_point refusal_logged{};
  // The other refusals, by the address that caused them.
  RefusalLog refusals;

  template <typename... Args>
  void log_refusal(const std::string& from, std::string_view kind, fmt::format_string<Args...> format, Args&&... args) {
    if (auto unlogged = refusals.admit(from, kind)) {
      options.log->warn("{}{}", fmt::format(format, std::forward<Args>(args)...), RefusalLog::unlogged_note(*unlogged));
    }
  }

  void drop(const std::shared_ptr<Pending>& h) {
    error_code ignored;
    h->timer.cancel();
    h->socket.close(ignored);
    std::erase(pending, h);
  }

  void peek(const std::shared_ptr<Pending>& h) {
    h->socket.async_wait(tcp::socket::wait_read, [self = shared_from_this(), h](const error_code& ec) {
      if (self->closed) return;
      if (ec) return self->drop(h);
      std::byte first[8];
      error_code e;
      std::size_t n = h->socket.receive(asio::buffer(first), tcp::socket::message_peek, e);
      if (e || n == 0) return self->drop(h);
      std::byte magic[8];
      std::memcpy(magic, &kPathHelloMagic, 8);
      if (std::memcmp(first, magic, n) != 0) return self->plain(h);
      if (n < 8) {
        // Part of the magic so far: look again shortly (bounded by the hello timer).
        auto retry = std::make_shared<asio::steady_timer>(self->io, std::chrono::milliseconds(1));
        retry->async_wait([self, h, retry](const error_code& ec) {
          if (!ec && !self->closed) self->peek(h);
        });
        return;
      }
      self->read_hello(h);
    });
  }

  void plain(const std::shared_ptr<Pending>& h) {
    h->timer.cancel();
    std::erase(pending, h);
    if (on_plain) {
      on_plain(std::move(h->socket));
    } else {
      error_code ec;
      const std::string from = endpoint_text(h->socket.remote_endpoint(ec));
      log_refusal(from, "plain", "closing a connection from {} on a striped-only port: no path hello", from);
      error_code ignored;
      h->socket.close(ignored);
    }
  }

  void read_hello(const std::shared_ptr<Pending>& h) {
    asio::async_read(h->socket, asio::buffer(h->hello),
                     [self = shared_from_this(), h](const error_code& ec, std::size_t) {
                       if (self->closed) return;
                       if (ec) return self->drop(h);
                       self->on_hello(h);
                     });
  }

  void on_hello(const std::shared_ptr<Pending>& h) {
    error_code ec;
    std::string from = endpoint_text(h->socket.remote_endpoint(ec));
    auto hello = decode_hello(h->hello);
    std::shared_ptr<StripedLink> link;
    bool created = false;
    HelloStatus status = HelloStatus::accepted;
    if (!hello) {
      std::uint16_t version;
      std::memcpy(&version, h->hello + 8, 2);
      status = version != kStripeVersion ? HelloStatus::bad_version : HelloStatus::malformed;
      log_refusal(from, "hello", "striped path from {} refused: {}", from, hello.error());
    } else {
      if (auto it = links.find(hello->link_id); it != links.end()) {
        link = it->second.lock();
        if (!link || !link->is_open()) {
          links.erase(it);
          link = nullptr;
        }
      }
      if (link && !link->matches(*hello)) {
        status = HelloStatus::mismatch;
        link = nullptr;
      } else if (!link && hello->rejoin) {
        status = HelloStatus::unknown_link;
      } else if (!link) {
        // Registered now, before the reply goes out, so that the link's other paths,
        // arriving meanwhile, join it instead of making links of their own.
        link = StripedLink::create_accepted(io, *hello, options, from);
        links[hello->link_id] = link;
        created = true;
      }
      if (status != HelloStatus::accepted) {
        log_refusal(from, "link", "striped path {} of link {:016x} from {} refused: {}", hello->path_index,
                    hello->link_id, from, to_string(status));
      }
    }
    h->answer.status = status;
    h->answer.nonce = new_path_nonce();
    if (status == HelloStatus::accepted) h->answer.tag = accept_tag(options.path_mac, h->hello, h->answer);
    encode_hello_reply(h->answer, h->reply);
    const std::size_t index = hello ? hello->path_index : 0;
    asio::async_write(
        h->socket, asio::buffer(h->reply),
        [self = shared_from_this(), h, link, created, status, index, from](const error_code& ec, std::size_t) {
          if (self->closed || ec || status != HelloStatus::accepted) {
            return self->give_up(h, created ? link : nullptr, "its first path failed during the hello");
          }
          // The path is the connecting side's once it proves the secret over our
          // nonce (the hello timer still runs).
          asio::async_read(h->socket, asio::buffer(h->proof), [self, h, link, created, index, from](
                                                                   const error_code& ec, std::size_t) {
            if (self->closed || ec) {
              return self->give_up(h, created ? link : nullptr, "its first path failed during the hello");
            }
            if (!tags_equal(h->proof, proof_tag(self->options.path_mac, h->hello, h->answer))) {
              self->log_refusal(from, "proof",
                                "striped path {} of link {:016x} from {} refused: its proof of the network's secret "
                                "is wrong",
                                index, link->link_id_, from);
              return self->give_up(h, created ? link : nullptr, "its first path did not prove the network's secret");
            }
            h->timer.cancel();
            std::erase(self->pending, h);
            link->attach(index, std::move(h->socket));
            if (!link->announced_) {
              link->announced_ = true;
              self->on_link(link);
            }
          });
        });
  }

  // Ends a path that did not make it through the hello; `created`, if not null, is
  // the link it made, which goes with it.
  void give_up(const std::shared_ptr<Pending>& h, const std::shared_ptr<StripedLink>& created,
               const std::string& why) {
    h->timer.cancel();
    std::erase(pending, h);
    error_code ignored;
    h->socket.close(ignored);
    if (created) created->finish(why, false);
  }
};

StripedAcceptor::StripedAcceptor(asio::io_context& io, StripedOptions options, LinkHandler on_link,
                                 PlainHandler on_plain)
    : state_(std::make_shared<State>(io, std::move(options), std::move(on_link), std::move(on_plain))) {}

StripedAcceptor::~StripedAcceptor() {
  state_->closed = true;
  for (auto& h : state_->pending) {
    error_code ignored;
    h->timer.cancel();
    h->socket.close(ignored);
  }
  state_->pending.clear();
}

void StripedAcceptor::take(tcp::socket socket) {
  if (state_->pending.size() >= state_->options.max_pending) {
    error_code ignored;
    const std::string from = endpoint_text(socket.remote_endpoint(ignored));
    socket.close(ignored);
    ++state_->refused_unlogged;
    const auto now = std::chrono::steady_clock::now();
    if (now - state_->refusal_logged >= std::chrono::seconds(1)) {
      state_->options.log->warn("closing {} connection(s), the last from {}: {} connections are already waiting "
                                "for their first bytes, the most this port holds",
                                state_->refused_unlogged, from, state_->options.max_pending);
      state_->refused_unlogged = 0;
      state_->refusal_logged = now;
    }
    return;
  }
  auto h = std::make_shared<State::Pending>(std::move(socket));
  state_->pending.push_back(h);
  h->timer.expires_after(state_->options.hello_timeout);
  h->timer.async_wait([weak = std::weak_ptr<State>(state_), h](const error_code& ec) {
    auto state = weak.lock();
    if (ec || !state || state->closed) return;
    error_code ignored;
    const std::string from = endpoint_text(h->socket.remote_endpoint(ignored));
    state->log_refusal(from, "silent", "closing a connection from {}: no hello within {} ms", from,
                       ms(state->options.hello_timeout));
    state->drop(h);
  });
  state_->peek(h);
}

std::size_t StripedAcceptor::open_links() const {
  std::size_t n = 0;
  for (const auto& [id, weak] : state_->links) {
    auto link = weak.lock();
    if (link && link->is_open()) ++n;
  }
  return n;
}

}  // namespace canopy::transport
