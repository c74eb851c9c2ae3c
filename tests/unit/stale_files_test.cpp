// The sweep of shared-memory files whose maker is gone: which processes
// count as gone (exited, or a later process that reuses the pid; never one
// of another pid namespace or a stamp with unknown fields), the libfabric
// region names that carry a stamp, and sweeps of a directory holding files
// of gone, live and foreign makers, and of a real segment whose creator was
// killed before it could unlink it.
#include "transport/shm/stale_files.h"

#include "bootstrap/rank_info.h"
#include "transport/shm/shm_segment.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

namespace conflux {
namespace {

namespace fs = std::filesystem;

// The stamp of a child process that has exited and been reaped: its start
// time is read while it still runs.
ProcessStamp stamp_of_an_exited_process() {
  int gate[2];
  EXPECT_EQ(pipe(gate), 0);
  pid_t child = fork();
  if (child == 0) {
    close(gate[1]);
    char c;
    (void)!read(gate[0], &c, 1);  // until the parent closes its end
    _exit(0);
  }
  ProcessStamp s = this_process_stamp();
  s.pid = child;
  s.start_ticks = process_start_time(child);
  close(gate[0]);
  close(gate[1]);
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);
  return s;
}

class TempDir {
 public:
  TempDir() {
    char path[] = "/tmp/cfx-stale-XXXXXX";
    EXPECT_NE(mkdtemp(path), nullptr);
    path_ = path;
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }
  // A file of `size` bytes of `fill`.
  void add(const std::string& name, size_t size = 1, char fill = 'x') const {
    std::ofstream(path_ + "/" + name) << std::string(size, fill);
  }
  bool has(const std::string& name) const { return fs::exists(path_ + "/" + name); }

 private:
  std::string path_;
};

TEST(ProcessGone, ThisProcessIsNotGone) {
  ProcessStamp me = this_process_stamp();
  ASSERT_GT(me.start_ticks, 0u) << "/proc/self/stat unreadable";
  ASSERT_GT(me.pid_namespace, 0u) << "/proc/self/ns/pid unreadable";
  EXPECT_FALSE(process_gone(me));
}

TEST(ProcessGone, AnExitedProcessIsGone) { EXPECT_TRUE(process_gone(stamp_of_an_exited_process())); }

TEST(ProcessGone, ALaterProcessWithTheSamePidMeansTheMakerIsGone) {
  ProcessStamp earlier = this_process_stamp();
  earlier.start_ticks -= 1;
  EXPECT_TRUE(process_gone(earlier));
}

TEST(ProcessGone, AnotherPidNamespaceOrAnUnknownFieldIsNeverJudged) {
  ProcessStamp dead = stamp_of_an_exited_process();
  ProcessStamp other_namespace = dead;
  other_namespace.pid_namespace += 1;
  EXPECT_FALSE(process_gone(other_namespace));
  ProcessStamp unknown_start = dead;
  unknown_start.start_ticks = 0;
  EXPECT_FALSE(process_gone(unknown_start));
  ProcessStamp unknown_namespace = dead;
  unknown_namespace.pid_namespace = 0;
  EXPECT_FALSE(process_gone(unknown_namespace));
  EXPECT_FALSE(process_gone(ProcessStamp{}));
}

TEST(RegionNames, CarryThisProcessesStampAndDifferEachTime) {
  const std::string a = libfabric_region_name(), b = libfabric_region_name();
  EXPECT_NE(a, b);
  EXPECT_LT(a.size(), 96u);
  auto stamp = stamp_of_region_name(a);
  ASSERT_TRUE(stamp.has_value()) << a;
  ProcessStamp me = this_process_stamp();
  EXPECT_EQ(stamp->pid, me.pid);
  EXPECT_EQ(stamp->start_ticks, me.start_ticks);
  EXPECT_EQ(stamp->pid_namespace, me.pid_namespace);
}

TEST(RegionNames, OtherNamesCarryNoStamp) {
  for (const char* name : {"cfx_123_00000000000000ab", "cfx_123_1_2", "cfx_123_1_2_3x", "cfx_x_1_2_3", "cfx_", "",
                           "fi_shm_123", "cfx-0123-0-45"})
    EXPECT_FALSE(stamp_of_region_name(name).has_value()) << name;
}

TEST(Sweep, RemovesFilesOfGoneMakersOnly) {
  TempDir dir;
  const ProcessStamp dead = stamp_of_an_exited_process();
  ProcessStamp foreign = dead;
  foreign.pid_namespace += 1;
  const std::string gone = region_name(dead, 0xab), live = region_name(this_process_stamp(), 0xab),
                    other_ns = region_name(foreign, 0xab), old_format = "cfx_" + std::to_string(dead.pid) + "_00000000000000ab",
                    not_a_segment = "cfx-0000000000000001-0-" + std::to_string(dead.pid), unrelated = "sem.other";
  dir.add(gone, 5000);
  for (const auto& n : {live, other_ns, old_format, not_a_segment, unrelated}) dir.add(n);
  SweptFiles swept = sweep_stale_files(dir.path());
  EXPECT_EQ(swept.files, 1);
  EXPECT_GE(swept.bytes, 5000u);
  EXPECT_FALSE(dir.has(gone));
  for (const auto& n : {live, other_ns, old_format, not_a_segment, unrelated}) EXPECT_TRUE(dir.has(n)) << n;
  EXPECT_EQ(sweep_stale_files(dir.path()).files, 0);
}

// A segment file whose creator was killed before it wrote the header's
// magic is removed once it has been left so for a minute; a younger one
// may belong to a creator still writing it.
TEST(Sweep, RemovesSegmentsLeftUnfinishedForAMinute) {
  TempDir dir;
  const std::string empty_old = "cfx-00000000000000e1-0-1", zeros_old = "cfx-00000000000000e2-1-1",
                    zeros_young = "cfx-00000000000000e3-0-1", not_a_segment_name = "cfx-notes";
  dir.add(empty_old, 0);
  dir.add(zeros_old, 4096, '\0');
  dir.add(zeros_young, 4096, '\0');
  dir.add(not_a_segment_name, 0);
  const timespec minute_and_more_ago[2] = {{time(nullptr) - kUnfinishedSegmentSeconds - 5, 0},
                                           {time(nullptr) - kUnfinishedSegmentSeconds - 5, 0}};
  for (const auto& n : {empty_old, zeros_old, not_a_segment_name})
    ASSERT_EQ(utimensat(AT_FDCWD, (dir.path() + "/" + n).c_str(), minute_and_more_ago, 0), 0);
  EXPECT_EQ(sweep_stale_files(dir.path()).files, 2);
  EXPECT_FALSE(dir.has(empty_old));
  EXPECT_FALSE(dir.has(zeros_old));
  EXPECT_TRUE(dir.has(zeros_young));
  EXPECT_TRUE(dir.has(not_a_segment_name));
}

TEST(Sweep, AMissingDirectorySweepsNothing) { EXPECT_EQ(sweep_stale_files("/nonexistent/cfx-stale").files, 0); }

// A rank killed between creating its segment and unlinking it (its peers
// had not all mapped it yet) leaves it in /dev/shm; the next sweep removes
// it, and leaves a live process's segment where it is.
TEST(Sweep, RemovesTheSegmentOfAKilledCreator) {
  const uint64_t comm_id = 0x57a1e0000000000ull + static_cast<unsigned>(getpid());
  const std::string killed_name = segment_name(comm_id, 0, getpid()), live_name = segment_name(comm_id, 1, getpid());
  ShmSegment::Layout layout{2, 4, 256, 1, 0};
  pid_t child = fork();
  if (child == 0) {
    auto seg = ShmSegment::create(killed_name, layout);
    if (!seg.ok()) _exit(2);
    kill(getpid(), SIGKILL);
    _exit(3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child could not create its segment: exit " << WEXITSTATUS(status);
  auto live = ShmSegment::create(live_name, layout);
  ASSERT_TRUE(live.ok()) << live.status().message();
  ASSERT_TRUE(fs::exists("/dev/shm" + killed_name));

  int fd = shm_open(killed_name.c_str(), O_RDONLY, 0);
  ASSERT_GE(fd, 0);
  auto maker = ShmSegment::maker(fd);
  close(fd);
  ASSERT_TRUE(maker.has_value());
  EXPECT_EQ(maker->pid, child);
  EXPECT_TRUE(process_gone(*maker));

  SweptFiles swept = sweep_stale_files("/dev/shm");
  EXPECT_GE(swept.files, 1);
  EXPECT_FALSE(fs::exists("/dev/shm" + killed_name));
  EXPECT_TRUE(fs::exists("/dev/shm" + live_name));
}

}  // namespace
}  // namespace conflux
