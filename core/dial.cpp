#include "core/dial.h"

#include "core/parent_link.h"
#include "transport/striped_link.h"
#include "transport/tcp_link.h"

namespace canopy::core {

namespace asio = boost::asio;

struct Dial::State {
  bool over = false;
  std::unique_ptr<asio::ip::tcp::socket> socket;  // a plain connection under way
  DialDone done;

  void finish(Dialled outcome) {
    if (over) {
      if (outcome.link) outcome.link->abort("connection abandoned");
      return;
    }
    over = true;
    socket.reset();
    auto then = std::move(done);
    done = nullptr;
    then(std::move(outcome));
  }
};

void Dial::cancel() {
  if (!state_ || state_->over) return;
  state_->over = true;
  state_->done = nullptr;
  if (state_->socket) {
    boost::system::error_code ignored;
    state_->socket->close(ignored);  // its handler sees operation_aborted
  }
}

bool Dial::under_way() const { return state_ && !state_->over; }

Result<Dial> dial(asio::io_context& io, const Topology& topology, Rank from, Rank to, const Secret& secret, bool plain,
                  DialDone done, transport::Fabric* fabric) {
  const canopy::TopologyNode* me = topology.find(from);
  const canopy::TopologyNode* n = topology.find(to);
  if (!me || !n) return Error{"rank " + std::to_string(to) + " is not in the topology"};
  if (n->port == 0) return Error{"rank " + std::to_string(to) + " has published no port yet"};
  Dial d;
  d.state_ = std::make_shared<Dial::State>();
  d.state_->done = std::move(done);
  std::weak_ptr<Dial::State> weak = d.state_;
  if (fabric) {
    // Done on the loop, as a connection's end is: never inside the caller.
    asio::post(io, [weak, connected = fabric->connect(io, n->port)]() mutable {
      auto state = weak.lock();
      if (!state || state->over) {
        if (connected.link) connected.link->abort("connection abandoned");
        return;
      }
      state->finish({std::move(connected.link), std::move(connected.error), connected.refused});
    });
    return d;
  }
  if (!plain && topology.link_between(*me, *n) == LinkKind::striped) {
    auto options = striped_options(topology.links());
    options.path_mac = path_mac(secret);
    // A striped handshake cannot be cancelled: a late link finds its dial over and is
    // aborted (the state lives on in the handler for that).
    transport::StripedLink::async_connect(
        io, transport::paths_between(topology.nics_of(me->host), topology.nics_of(n->host), n->port),
        std::move(options), [state = d.state_](Result<std::shared_ptr<transport::StripedLink>> link) {
          if (!link) return state->finish({nullptr, link.error(), false});
          state->finish({std::move(*link), {}, false});
        });
    return d;
  }
  boost::system::error_code ec;
  const std::string host = topology.address_of(n->host);
  auto address = asio::ip::make_address(host, ec);
  if (ec) {
    asio::ip::tcp::resolver resolver(io);
    auto results = resolver.resolve(host, "0", ec);
    if (ec || results.empty()) return Error{"host '" + n->host + "' does not resolve: " + ec.message()};
    address = results.begin()->endpoint().address();
  }
  d.state_->socket = std::make_unique<asio::ip::tcp::socket>(io);
  d.state_->socket->async_connect({address, n->port}, [weak](const boost::system::error_code& ec) {
    auto state = weak.lock();
    if (!state || state->over || !state->socket) return;
    if (ec) return state->finish({nullptr, ec.message(), ec == asio::error::connection_refused});
    auto socket = std::move(state->socket);
    state->finish({transport::TcpLink::create(std::move(*socket)), {}, false});
  });
  return d;
}

}  // namespace canopy::core
