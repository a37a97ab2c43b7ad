#pragma once
// Errors as values on every path that talks to the outside world: Redis, the handler, files.
// Exceptions are kept to configuration loading, where yaml-cpp throws anyway.

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace streamcar {

enum class StatusCode {
  kOk,
  kIo,           // the connection failed or was closed
  kTimeout,      // no answer in time
  kServerError,  // Redis answered with an error reply; see Status::server_prefix()
  kProtocol,     // the peer said something we cannot decode
  kInvalid,      // bad input from a user (config, arguments)
  kFatal,        // retrying cannot fix it (WRONGTYPE, authentication refused)
  kCancelled,    // shutdown interrupted the operation
};

const char* StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // For kServerError: the first word of the Redis error ("BUSYGROUP", "WRONGTYPE", "NOGROUP"...).
  std::string server_prefix() const;
  bool IsServerError(std::string_view prefix) const;

  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the reason there is none.
template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace streamcar
