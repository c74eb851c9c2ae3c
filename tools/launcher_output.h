// Forwards one child pipe (a rank's stdout or stderr) to one of our own
// descriptors, a whole line at a time with the rank's prefix, so that lines
// of different ranks never interleave mid-line.
#pragma once

#include <cstddef>
#include <string>

namespace conflux::tools::launcher {

// Writes all of `text` to `fd`, retrying short writes and EINTR. Output that
// cannot be written (reader gone: EPIPE) is dropped; the job keeps running.
void WriteAll(int fd, const std::string& text);

class LineForwarder {
 public:
  LineForwarder(int out_fd, std::string prefix) : out_fd_(out_fd), prefix_(std::move(prefix)) {}

  // Buffers `data` and writes every line it completes.
  void Append(const char* data, size_t size);
  // Writes what is left of an unterminated last line, ending it with '\n'
  // so that the next line on our descriptor starts clean.
  void Flush();

 private:
  // A child writing without newlines must not grow us without bound: past
  // this size the pending text is written as if it were a line.
  static constexpr size_t kMaxPendingLine = 64 * 1024;

  int out_fd_;
  std::string prefix_;
  std::string pending_;
};

}  // namespace conflux::tools::launcher
