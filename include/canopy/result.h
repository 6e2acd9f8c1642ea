// Result<T>: an expected value or an error that a user can act on: a message that
// says what went wrong and where, and a kind that says what to do about it, so that
// no caller has to match on the text.
//
// Canopy returns expected failures (bad input, a node that did not come up, a
// timed-out request) as values; exceptions are kept for broken invariants.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace canopy {

enum class ErrorKind : std::uint8_t {
  failed,         // something did not work (a node did not come up, a filter or a request failed)
  invalid_input,  // the caller's input is wrong (an option, a rank, a topology file): fix it
  disconnected,   // a process of the tree was lost: results from then on are incomplete
  stopped,        // the network has stopped: nothing more will come
};
std::string_view to_string(ErrorKind kind);

struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::failed;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const std::string& error() const { return std::get<1>(state_).message; }
  ErrorKind error_kind() const { return std::get<1>(state_).kind; }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), failed_(true) {}

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return error_.message; }
  ErrorKind error_kind() const { return error_.kind; }

 private:
  Error error_;
  bool failed_ = false;
};

inline std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::failed: return "failed";
    case ErrorKind::invalid_input: return "invalid input";
    case ErrorKind::disconnected: return "disconnected";
    case ErrorKind::stopped: return "stopped";
  }
  return "error";
}

}  // namespace canopy
