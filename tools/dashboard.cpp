#include "dashboard.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <charconv>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "dashboard_page.h"

namespace canopy::tools {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct Dashboard::Impl {
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::thread thread;
  const std::string page = dashboard_page();
  std::mutex mutex;
  std::condition_variable fetched;  // a /view.html was served
  std::string state = "{\"run\":\"starting\",\"nodes\":[]}";
  std::string view = "<section id=\"run\"><p>Starting.</p></section>";
  std::uint64_t published = 0;     // publications so far
  std::uint64_t view_served = 0;   // the publication the last /view.html held
  std::chrono::steady_clock::time_point last_view_request{};

  std::string current_state() {
    std::lock_guard lock(mutex);
    return state;
  }
  std::string current_view() {
    std::lock_guard lock(mutex);
    view_served = published;
    last_view_request = std::chrono::steady_clock::now();
    fetched.notify_all();
    return view;
  }

  // One connection: requests answered until the peer closes it. Bounded: a request
  // head of 8 KiB, no body, 10 s of silence ends the connection.
  asio::awaitable<void> serve(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer(8192);
    try {
      while (true) {
        stream.expires_after(std::chrono::seconds(10));
        http::request_parser<http::empty_body> parser;
        parser.header_limit(8192);
        // The head only: a request with a body (a POST with a form, say) is answered,
        // not read, and the connection then closed (reading an empty body's request
        // whole failed on the body, and the peer got no answer at all).
        co_await http::async_read_header(stream, buffer, parser, asio::use_awaitable);
        const auto& request = parser.get();
        http::response<http::string_body> response;
        response.version(request.version());
        response.keep_alive(request.keep_alive() && parser.is_done());
        response.set(http::field::server, "canopy");
        response.set(http::field::cache_control, "no-store");
        const std::string_view target = request.target();
        if (request.method() != http::verb::get && request.method() != http::verb::head) {
          response.result(http::status::method_not_allowed);
          response.set(http::field::allow, "GET, HEAD");
          response.body() = "read-only\n";
        } else if (target == "/" || target == "/index.html") {
          response.result(http::status::ok);
          response.set(http::field::content_type, "text/html; charset=utf-8");
          response.body() = page;
        } else if (target == "/state.json") {
          response.result(http::status::ok);
          response.set(http::field::content_type, "application/json");
          response.body() = current_state();
        } else if (target == "/view.html") {
          response.result(http::status::ok);
          response.set(http::field::content_type, "text/html; charset=utf-8");
          response.body() = current_view();
        } else {
          response.result(http::status::not_found);
          response.set(http::field::content_type, "text/plain");
          response.body() = "no such page: /, /view.html and /state.json are served\n";
        }
        response.prepare_payload();
        if (request.method() == http::verb::head) response.body().clear();
        co_await http::async_write(stream, response, asio::use_awaitable);
        if (!response.keep_alive()) break;
      }
    } catch (const std::exception&) {
      // The peer went, sent garbage, or was silent: the connection ends.
    }
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  // Connections served at once. Each holds a descriptor of the front-end's, which
  // its links to the tree need too: 1,100 connections once used them all up and
  // delayed adoptions by 8.9 s (issue 45). One past the cap is answered 503 and
  // closed.
  static constexpr std::size_t kMaxConnections = 64;
  std::size_t connections = 0;  // on the io thread

  asio::awaitable<void> accept() {
    while (true) {
      auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec == asio::error::operation_aborted) co_return;
      if (ec) {
        // Out of descriptors, say: wait a little instead of spinning.
        asio::steady_timer pause(io, std::chrono::milliseconds(50));
        co_await pause.async_wait(asio::use_awaitable);
        continue;
      }
      if (connections >= kMaxConnections) {
        static constexpr std::string_view busy =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n";
        boost::system::error_code ignored;
        socket.non_blocking(true, ignored);
        socket.write_some(asio::buffer(busy.data(), busy.size()), ignored);
        socket.close(ignored);
        continue;
      }
      ++connections;
      asio::co_spawn(io, serve(std::move(socket)), [this](std::exception_ptr) { --connections; });
    }
  }
};

Result<std::unique_ptr<Dashboard>> Dashboard::start(const std::string& where, bool anywhere) {
  std::string address = "127.0.0.1", port_text = where;
  if (auto colon = where.rfind(':'); colon != std::string::npos) {
    address = where.substr(0, colon);
    port_text = where.substr(colon + 1);
  }
  unsigned port = 0;
  auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || error != std::errc{} || end != port_text.data() + port_text.size() || port > 65535) {
    return Error{"--dashboard " + where + ": give PORT or ADDRESS:PORT (a port from 0 to 65535)"};
  }
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(address, ec);
  if (ec) return Error{"--dashboard " + where + ": '" + address + "' is not an IP address"};
  if (!ip.is_loopback() && !anywhere) {
    return Error{"--dashboard " + where + ": " + address +
                 " is not a loopback address; the page shows the tree to whoever connects (add "
                 "--dashboard-anywhere to serve it there anyway)"};
  }
  auto impl = std::make_unique<Impl>();
  const tcp::endpoint endpoint(ip, static_cast<unsigned short>(port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Error{"--dashboard " + where + ": cannot listen: " + ec.message()};
  asio::co_spawn(impl->io, impl->accept(), asio::detached);
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<Dashboard>(new Dashboard(std::move(impl)));
}

Dashboard::Dashboard(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Dashboard::~Dashboard() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::string Dashboard::url() const {
  const auto endpoint = impl_->acceptor.local_endpoint();
  const auto address = endpoint.address();
  const std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return "http://" + host + ":" + std::to_string(endpoint.port()) + "/";
}

void Dashboard::publish(std::string state_json, std::string view_html) {
  std::lock_guard lock(impl_->mutex);
  impl_->state = std::move(state_json);
  impl_->view = std::move(view_html);
  ++impl_->published;
}

void Dashboard::let_watchers_see_the_end(std::chrono::milliseconds limit) {
  std::unique_lock lock(impl_->mutex);
  const auto now = std::chrono::steady_clock::now();
  if (impl_->last_view_request == std::chrono::steady_clock::time_point{} ||
      now - impl_->last_view_request > std::chrono::seconds(5)) {
    return;
  }
  impl_->fetched.wait_until(lock, now + limit, [&] { return impl_->view_served == impl_->published; });
}

}  // namespace canopy::tools
