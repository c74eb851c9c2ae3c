// Bootstrap pieces that need no second process: launcher environments,
// interface selection grammar, unique id encoding.
#include "bootstrap/interfaces.h"
#include "bootstrap/launch_env.h"
#include "bootstrap/rank_info.h"
#include "bootstrap/unique_id.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

namespace conflux {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(LaunchEnv, Torchrun) {
  auto env = read_launch_env(env_of({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                                     {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->launcher, "torchrun");
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->nranks, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->root, "127.0.0.1:29500");
}

TEST(LaunchEnv, TorchElasticUsesTheNextPortAfterTheStore) {
  auto env = read_launch_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                                     {"MASTER_PORT", "29500"}, {"TORCHELASTIC_RUN_ID", "x"}}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->root, "127.0.0.1:29501");
}

TEST(LaunchEnv, OpenMpi) {
  auto env = read_launch_env(env_of({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                     {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"CONFLUX_ROOT", "127.0.0.1:4000"}}));
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->launcher, "openmpi");
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->nranks, 4);
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->root, "127.0.0.1:4000");
}

TEST(LaunchEnv, MpichHydra) {
  auto env = read_launch_env(
      env_of({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}, {"MASTER_ADDR", "localhost"}, {"MASTER_PORT", "1234"}}));
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->launcher, "mpich");
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->nranks, 3);
}

TEST(LaunchEnv, Slurm) {
  auto env = read_launch_env(env_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "1"},
                                     {"CONFLUX_ROOT", "[::1]:5000"}}));
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->launcher, "slurm");
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->local_rank, 1);
}

TEST(LaunchEnv, ErrorsSayWhatIsMissing) {
  auto none = read_launch_env(env_of({}));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("RANK and WORLD_SIZE"), std::string::npos);
  auto no_root = read_launch_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  ASSERT_FALSE(no_root.ok());
  EXPECT_NE(no_root.status().message().find("MASTER_ADDR"), std::string::npos);
  auto bad = read_launch_env(env_of({{"RANK", "4"}, {"WORLD_SIZE", "2"}, {"CONFLUX_ROOT", "127.0.0.1:1"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), cfxInvalidArgument);
  auto junk = read_launch_env(env_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}));
  EXPECT_FALSE(junk.ok());
}

TEST(LaunchEnv, RanksOfOneJobDeriveTheSameIdAndOtherJobsDoNot) {
  auto vars = std::map<std::string, std::string>{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"CONFLUX_ROOT", "127.0.0.1:4000"},
                                                 {"CONFLUX_JOB_ID", "a"}};
  auto e0 = read_launch_env(env_of(vars));
  vars["RANK"] = "1";
  auto e1 = read_launch_env(env_of(vars));
  vars["CONFLUX_JOB_ID"] = "b";
  auto e2 = read_launch_env(env_of(vars));
  auto id0 = unique_id_from_env(e0.value(), env_of({{"CONFLUX_JOB_ID", "a"}}));
  auto id1 = unique_id_from_env(e1.value(), env_of({{"CONFLUX_JOB_ID", "a"}}));
  auto id2 = unique_id_from_env(e2.value(), env_of({{"CONFLUX_JOB_ID", "b"}}));
  ASSERT_TRUE(id0.ok() && id1.ok() && id2.ok());
  EXPECT_EQ(id0->secret, id1->secret);
  EXPECT_EQ(id0->comm_id, id1->comm_id);
  EXPECT_NE(id0->secret, id2->secret);
}

TEST(Interfaces, NcclGrammar) {
  EXPECT_TRUE(ifname_matches("eth", "eth0"));
  EXPECT_TRUE(ifname_matches("ib,eth", "eth1"));
  EXPECT_FALSE(ifname_matches("ib", "eth0"));
  EXPECT_TRUE(ifname_matches("=eth0", "eth0"));
  EXPECT_FALSE(ifname_matches("=eth0", "eth01"));
  EXPECT_FALSE(ifname_matches("^lo,docker", "lo"));
  EXPECT_FALSE(ifname_matches("^lo,docker", "docker0"));
  EXPECT_TRUE(ifname_matches("^lo,docker", "eth0"));
  EXPECT_FALSE(ifname_matches("^=eth0", "eth0"));
  EXPECT_TRUE(ifname_matches("^=eth0", "eth01"));
}

TEST(Interfaces, NoMatchListsWhatExists) {
  auto r = choose_interface("nosuchif", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("lo ("), std::string::npos) << r.status().message();
}

TEST(Interfaces, DefaultFollowsTheRendezvousAddress) {
  auto root = SockAddr::parse("127.0.0.1:1234");
  ASSERT_TRUE(root.ok());
  auto r = choose_interface("", &root.value());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->name, "lo");
}

NetInterface iface(const std::string& name, const std::string& ip) {
  return NetInterface{name, SockAddr::parse(ip + ":0").value()};
}

TEST(Interfaces, DataGoesOverTheNearestNicWithTheRouteAsFallback) {
  const std::vector<NetInterface> ifs = {iface("lo", "127.0.0.1"), iface("mgmt0", "10.0.0.5"),
                                         iface("eth1", "10.1.0.5")};
  DataInterfaces d = choose_data_interfaces("", ifs[1], "eth1", ifs);
  EXPECT_EQ(d.preferred.name, "eth1");
  ASSERT_TRUE(d.has_fallback);
  EXPECT_EQ(d.fallback.name, "mgmt0");
  EXPECT_NE(d.why.find("nearest NIC"), std::string::npos) << d.why;
}

TEST(Interfaces, DataStaysOnTheRouteWhenTheNearestNicCannotServeTcp) {
  const std::vector<NetInterface> ifs = {iface("lo", "127.0.0.1"), iface("mgmt0", "10.0.0.5"),
                                         iface("eth1", "10.1.0.5")};
  struct Case {
    std::string spec, route, nearest, why_has;
  } cases[] = {
      {"=mgmt0", "mgmt0", "eth1", "CONFLUX_SOCKET_IFNAME"},  // the user's choice wins
      {"", "lo", "eth1", "loopback"},                        // 127.0.0.1 rendezvous: one host
      {"", "mgmt0", "", "no NIC"},                           // no topology NIC
      {"", "mgmt0", "mlx5_0", "no IPv4 address"},            // RDMA-only device, no netdev address
      {"", "mgmt0", "mgmt0", "also the route"},
  };
  for (const Case& c : cases) {
    auto route = std::find_if(ifs.begin(), ifs.end(), [&](const NetInterface& i) { return i.name == c.route; });
    DataInterfaces d = choose_data_interfaces(c.spec, *route, c.nearest, ifs);
    EXPECT_EQ(d.preferred.name, c.route) << c.nearest;
    EXPECT_FALSE(d.has_fallback) << c.nearest;
    EXPECT_NE(d.why.find(c.why_has), std::string::npos) << d.why;
  }
  EXPECT_TRUE(is_loopback(iface("x", "127.0.0.2").addr));
  EXPECT_FALSE(is_loopback(iface("x", "10.0.0.1").addr));
}

// Which ranks may yield their core while they wait: only where another
// rank of the job could be queued on it.
namespace {
std::vector<RankInfo> ranks_on(std::vector<std::pair<uint64_t, int>> sets) {
  std::vector<RankInfo> t(sets.size());
  for (size_t r = 0; r < sets.size(); ++r) {
    t[r].rank = static_cast<int>(r);
    t[r].cpu_set_hash = sets[r].first;
    t[r].cpu_set_size = sets[r].second;
  }
  return t;
}
}  // namespace

TEST(CoreSharing, RanksBoundToACoreEachHaveTheirOwn) {
  const auto t = ranks_on({{10, 1}, {11, 1}, {12, 1}});
  for (const RankInfo& me : t) {
    const CoreSharing c = core_sharing(t, me, 2);
    EXPECT_TRUE(c.own_core);
    EXPECT_FALSE(c.oversubscribed());
    EXPECT_EQ(c.sharing, 1);
    EXPECT_EQ(c.cores, 1);
  }
}

TEST(CoreSharing, UnboundRanksShareTheirCoresAndMayBeQueuedOnOurs) {
  const auto t = ranks_on({{7, 2}, {7, 2}});
  const CoreSharing c = core_sharing(t, t[0], 2);
  EXPECT_FALSE(c.own_core);
  EXPECT_FALSE(c.oversubscribed());
  EXPECT_EQ(c.sharing, 2);
  EXPECT_EQ(c.cores, 2);
  const auto four = ranks_on({{7, 2}, {7, 2}, {7, 2}, {7, 2}});
  EXPECT_TRUE(core_sharing(four, four[0], 2).oversubscribed());
}

TEST(CoreSharing, OneWideOrUnknownSetAnywhereMeansNoRankOwnsItsCore) {
  // Rank 2's two cores may include rank 0's or rank 1's.
  const auto wide = ranks_on({{10, 1}, {11, 1}, {20, 2}});
  EXPECT_FALSE(core_sharing(wide, wide[0], 2).own_core);
  EXPECT_FALSE(core_sharing(wide, wide[2], 2).own_core);
  // A rank that could not read its affinity may run anywhere.
  const auto unknown = ranks_on({{10, 1}, {0, 0}});
  EXPECT_FALSE(core_sharing(unknown, unknown[0], 2).own_core);
  const CoreSharing u = core_sharing(unknown, unknown[1], 3);
  EXPECT_EQ(u.cores, 3);  // unknown size: the machine's
  EXPECT_FALSE(u.own_core);
}

TEST(CoreSharing, TwoRanksBoundToTheSameCoreAreOversubscribed) {
  const auto t = ranks_on({{10, 1}, {10, 1}, {11, 1}});
  const CoreSharing c = core_sharing(t, t[0], 2);
  EXPECT_FALSE(c.own_core);
  EXPECT_TRUE(c.oversubscribed());
  EXPECT_EQ(c.sharing, 2);
  // Rank 2's core is still its own: the pair shares another one.
  EXPECT_TRUE(core_sharing(t, t[2], 2).own_core);
}

TEST(UniqueId, RoundTripsAndRejectsCorruption) {
  UniqueIdData d;
  d.root = SockAddr::parse("127.0.0.1:4567").value();
  d.secret = random_secret();
  d.comm_id = 0x1234567890abcdefull;
  cfxUniqueId id = encode_unique_id(d);
  auto back = decode_unique_id(id);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->root.str(), "127.0.0.1:4567");
  EXPECT_EQ(back->secret, d.secret);
  EXPECT_EQ(back->comm_id, d.comm_id);
  for (int byte : {0, 5, 20, 40, 60, 68}) {  // every field, the checksum included
    cfxUniqueId bad = id;
    bad.internal[byte] ^= 0x40;
    auto r = decode_unique_id(bad);
    EXPECT_FALSE(r.ok()) << "byte " << byte;
    EXPECT_EQ(r.status().code(), cfxInvalidArgument);
  }
  cfxUniqueId zero{};
  EXPECT_FALSE(decode_unique_id(zero).ok());
}

}  // namespace
}  // namespace conflux
