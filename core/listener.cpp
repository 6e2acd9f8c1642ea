#include "core/listener.h"

#include "core/log.h"
#include "transport/tcp_link.h"

namespace canopy::core {

Result<void> Listener::open(const std::vector<std::string>& names, std::uint16_t port,
                            const transport::StripedOptions& striped, OnLink on_link) {
  std::vector<asio::ip::address> addresses;
  for (const std::string& name : names) {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(name, ec);
    if (ec) {
      asio::ip::tcp::resolver resolver(io_);
      auto results = resolver.resolve(name, "0", ec);
      if (ec || results.empty()) return Error{"cannot resolve " + name + " to listen on: " + ec.message()};
      addr = results.begin()->endpoint().address();
    }
    addresses.push_back(addr);
  }
  Result<void> listening;
  for (int attempt = 0; attempt < 8; ++attempt) {
    listening = bind_all(addresses, port);
    if (listening || port != 0 || addresses.size() == 1) break;
  }
  if (!listening) return listening;

  striped_ = std::make_unique<transport::StripedAcceptor>(
      io_, striped, [on_link](std::shared_ptr<transport::StripedLink> link) { on_link(std::move(link)); },
      [on_link](asio::ip::tcp::socket socket) { on_link(transport::TcpLink::create(std::move(socket))); });
  std::string where;
  for (const auto& a : addresses) where += (where.empty() ? "" : ", ") + a.to_string();
  log().info("listening on {} port {}", where, port_);
  for (auto& acceptor : acceptors_) accept_next(acceptor);
  return {};
}

Result<void> Listener::bind_all(const std::vector<asio::ip::address>& addresses, std::uint16_t port) {
  acceptors_.clear();
  for (const auto& address : addresses) {
    asio::ip::tcp::endpoint endpoint(address, port);
    auto& acceptor = acceptors_.emplace_back(io_);
    boost::system::error_code ec;
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      acceptors_.clear();
      return Error{"cannot listen on " + address.to_string() + ":" + std::to_string(port) + ": " + ec.message()};
    }
    if (port == 0) port = acceptor.local_endpoint().port();
  }
  port_ = port;
  return {};
}

void Listener::accept_next(asio::ip::tcp::acceptor& acceptor) {
  acceptor.async_accept([this, &acceptor](const boost::system::error_code& ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted || closed_) return;
    if (ec) {
      log().warn("accept failed: {}", ec.message());
    } else {
      striped_->take(std::move(socket));
    }
    accept_next(acceptor);
  });
}

void Listener::close() {
  closed_ = true;
  for (auto& acceptor : acceptors_) {
    boost::system::error_code ignored;
    acceptor.close(ignored);
  }
}

}  // namespace canopy::core
