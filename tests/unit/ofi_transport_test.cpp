// libfabric transport pieces that need no second process: the tag layout and
// the provider selection error.
#ifdef CONFLUX_HAVE_OFI
#include "transport/ofi/ofi_api.h"
#include "transport/ofi/ofi_fabric.h"
#include "transport/ofi/ofi_link.h"

#include <gtest/gtest.h>

#include <signal.h>

namespace conflux {
namespace {

void test_handler(int) {}

// Debian's libfabric pulls in libinfinipath, whose constructor installs its
// own SIGSEGV/SIGABRT/SIGBUS/SIGILL handlers: loading libfabric must leave
// the process's handlers as they were. (ctest runs each test in a process of
// its own, so the load happens here.)
TEST(OfiApi, LoadingKeepsTheProcessSignalHandlers) {
  struct sigaction mine = {}, before = {}, after = {};
  mine.sa_handler = test_handler;
  sigaction(SIGSEGV, &mine, &before);
  auto api = ofi_api();
  sigaction(SIGSEGV, &before, &after);  // put the original back, reading ours
  ASSERT_TRUE(api.ok()) << api.status().message();
  EXPECT_EQ(after.sa_handler, &test_handler);
  EXPECT_NE(api.value()->getinfo, nullptr);
}

TEST(OfiTag, FieldsDoNotOverlap) {
  const uint64_t t = ofi_tag(0x1234567890abcdefull, 7, 0xfffffffe);
  EXPECT_EQ(t & 0xffffffffu, 0xfffffffeu);
  EXPECT_EQ((t >> 32) & 0xffff, 7u);
  EXPECT_EQ(ofi_tag(1, 7, 5) >> 48, ofi_tag(1, 8, 5) >> 48);
  EXPECT_NE(ofi_tag(1, 7, 5), ofi_tag(1, 8, 5));
  EXPECT_NE(ofi_tag(1, 7, 5), ofi_tag(2, 7, 5));
  EXPECT_NE(ofi_tag(1, 7, 5), ofi_tag(1, 7, 6));
}

TEST(OfiFabric, OpensTcpRxmAndShm) {
  setenv("FI_TCP_IFACE", "lo", 0);
  for (const char* prov : {"tcp;ofi_rxm", "shm"}) {
    auto f = OfiFabric::open(prov);
    ASSERT_TRUE(f.ok()) << prov << ": " << f.status().message();
    EXPECT_FALSE((*f)->local_name().empty());
    EXPECT_GT((*f)->max_msg_size(), 0u);
  }
}

TEST(OfiFabric, UnknownProviderNamesTheOffers) {
  auto f = OfiFabric::open("no_such_provider");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("no_such_provider"), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("shm"), std::string::npos) << f.status().message();
}

}  // namespace
}  // namespace conflux
#endif
