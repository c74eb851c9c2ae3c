#include "core/status.h"

#include <cstring>

namespace conflux {

Status invalid_argument(std::string message) { return {cfxInvalidArgument, std::move(message)}; }
Status invalid_usage(std::string message) { return {cfxInvalidUsage, std::move(message)}; }
Status system_error(std::string message, int err) {
  return {cfxSystemError, std::move(message) + ": " + std::strerror(err)};
}
Status remote_error(std::string message) { return {cfxRemoteError, std::move(message)}; }
Status timeout_error(std::string message) { return {cfxTimeout, std::move(message)}; }
Status internal_error(std::string message) { return {cfxInternalError, std::move(message)}; }
Status aborted_error(std::string message) { return {cfxAborted, std::move(message)}; }

}  // namespace conflux
