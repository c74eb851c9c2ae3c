#include "launcher_output.h"

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace conflux::tools::launcher {

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

void LineForwarder::Append(const char* data, size_t size) {
  pending_.append(data, size);
  // Gather every complete line of this read into one write: fewer syscalls,
  // and a reader of our output sees whole lines even if it reads in chunks.
  std::string out;
  size_t start = 0;
  for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
    out += prefix_;
    out.append(pending_, start, nl + 1 - start);
  }
  pending_.erase(0, start);
  if (pending_.size() >= kMaxPendingLine) {
    out += prefix_;
    out += pending_;
    out += '\n';
    pending_.clear();
  }
  if (!out.empty()) WriteAll(out_fd_, out);
}

void LineForwarder::Flush() {
  if (pending_.empty()) return;
  WriteAll(out_fd_, prefix_ + pending_ + "\n");
  pending_.clear();
}

}  // namespace conflux::tools::launcher
