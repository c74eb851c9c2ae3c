// Status: an error code plus a message that says what failed. Internal code
// returns Status (or Result<T>); the C API turns it into cfxResult_t and
// keeps the message for cfxGetLastError. No exception crosses the API.
#pragma once

#include <conflux/conflux.h>

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace conflux {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(cfxResult_t code, std::string message) : code_(code) {
    if (!message.empty()) message_ = new std::string(std::move(message));
  }
  Status(const Status& other) : code_(other.code_), message_(copy(other.message_)) {}
  Status& operator=(const Status& other) {
    if (this != &other) {
      std::string* m = copy(other.message_);
      delete message_;
      message_ = m;
      code_ = other.code_;
    }
    return *this;
  }
  Status(Status&& other) noexcept : code_(other.code_), message_(std::exchange(other.message_, nullptr)) {}
  Status& operator=(Status&& other) noexcept {
    if (this != &other) {
      delete message_;
      message_ = std::exchange(other.message_, nullptr);
      code_ = other.code_;
    }
    return *this;
  }
  ~Status() { delete message_; }

  static Status Ok() { return {}; }
  bool ok() const { return code_ == cfxSuccess; }
  cfxResult_t code() const { return code_; }
  const std::string& message() const {
    static const std::string kNone;
    return message_ != nullptr ? *message_ : kNone;
  }

  // Prepends context ("allreduce #12: ") so the outermost caller's message
  // reads from the general to the specific. A literal costs nothing on
  // success (no string is made); a context built by concatenation is built
  // every time, so hot paths prepend only after checking ok().
  Status& prepend(std::string_view context) {
    if (ok()) return *this;
    if (message_ == nullptr) message_ = new std::string();
    message_->insert(0, context);
    return *this;
  }

 private:
  static std::string* copy(const std::string* m) { return m != nullptr ? new std::string(*m) : nullptr; }
  cfxResult_t code_ = cfxSuccess;
  // The message lives on the heap, and only where there is one: a
  // successful Status is a code and a null pointer, which every layer
  // returns and moves at the cost of two words (the per-call path of the
  // smallest collectives returns a Status from a dozen functions). Owned.
  std::string* message_ = nullptr;
};

Status invalid_argument(std::string message);
Status invalid_usage(std::string message);
Status system_error(std::string message, int err);  // appends strerror(err)
Status remote_error(std::string message);
Status timeout_error(std::string message);
Status internal_error(std::string message);
Status aborted_error(std::string message);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& value() const& { return std::get<T>(v_); }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace conflux

#define CFX_RETURN_IF_ERROR(expr)             \
  do {                                        \
    ::conflux::Status cfx_status_ = (expr);   \
    if (!cfx_status_.ok()) return cfx_status_; \
  } while (0)

#define CFX_CONCAT_INNER(a, b) a##b
#define CFX_CONCAT(a, b) CFX_CONCAT_INNER(a, b)
#define CFX_ASSIGN_OR_RETURN(lhs, expr) \
  CFX_ASSIGN_OR_RETURN_IMPL(CFX_CONCAT(cfx_result_, __LINE__), lhs, expr)
#define CFX_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
