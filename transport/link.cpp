#include "transport/link.h"

#include <utility>

namespace canopy::transport {

namespace {

// start(functions): the two functions as a handler the link owns.
class FunctionHandler final : public LinkHandler {
 public:
  FunctionHandler(Link::MessageHandler on_message, Link::CloseHandler on_close)
      : on_message_(std::move(on_message)), on_close_(std::move(on_close)) {}
  void on_link_message(Link&, capnp::MessageReader& message) override {
    if (on_message_) on_message_(message);
  }
  void on_link_closed(Link&, std::string_view reason) override {
    // The close handler may drop the last owner of the link, and with it this.
    auto on_close = std::move(on_close_);
    if (on_close) on_close(reason);
  }
  // What it captured goes with it (it may hold the link: a cycle until the link went).
  void forget_close() { on_close_ = nullptr; }

 private:
  Link::MessageHandler on_message_;
  Link::CloseHandler on_close_;
};

}  // namespace

Link::~Link() {
  if (owns_handler_) delete handler_;
}

void Link::forget_close() {
  close_owed_ = false;
  if (owns_handler_) static_cast<FunctionHandler*>(handler_)->forget_close();
}

void Link::start(LinkHandler& handler, std::uint8_t purpose) { take_handler(&handler, false, purpose); }

void Link::start(MessageHandler on_message, CloseHandler on_close) {
  take_handler(new FunctionHandler(std::move(on_message), std::move(on_close)), true, 0);
}

void Link::take_handler(LinkHandler* handler, bool owned, std::uint8_t purpose) {
  if (owns_handler_) delete handler_;
  handler_ = handler;
  owns_handler_ = owned;
  close_owed_ = true;
  purpose_ = purpose;
  begin();
}

}  // namespace canopy::transport
