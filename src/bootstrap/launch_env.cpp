#include "bootstrap/launch_env.h"

#include <openssl/evp.h>

#include <cstdlib>
#include <cstring>

namespace conflux {
namespace {

const char* get(const EnvLookup& lookup, const char* name) {
  const char* v = lookup ? lookup(name) : std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

Result<int> parse_int(const char* name, const char* value) {
  char* end = nullptr;
  long v = std::strtol(value, &end, 10);
  if (*end != '\0' || v < 0 || v > (1 << 24)) return invalid_argument(std::string(name) + "=" + value + " is not a valid number");
  return static_cast<int>(v);
}

struct Scheme {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
};

// Checked in this order: the first scheme whose rank and size are both set wins.
constexpr Scheme kSchemes[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

}  // namespace

Result<LaunchEnv> read_launch_env(const EnvLookup& lookup) {
  LaunchEnv env;
  for (const Scheme& s : kSchemes) {
    const char* r = get(lookup, s.rank);
    const char* n = get(lookup, s.size);
    if (r == nullptr || n == nullptr) continue;
    CFX_ASSIGN_OR_RETURN(env.rank, parse_int(s.rank, r));
    CFX_ASSIGN_OR_RETURN(env.nranks, parse_int(s.size, n));
    if (const char* l = get(lookup, s.local_rank)) {
      CFX_ASSIGN_OR_RETURN(env.local_rank, parse_int(s.local_rank, l));
    }
    env.launcher = s.launcher;
    break;
  }
  if (env.launcher.empty())
    return invalid_usage(
        "no launcher environment found: set RANK and WORLD_SIZE (torchrun), or run under mpirun (Open MPI, "
        "MPICH), srun (Slurm) or `conflux run`");
  if (env.nranks < 1 || env.rank >= env.nranks)
    return invalid_argument("rank " + std::to_string(env.rank) + " out of range for world size " +
                            std::to_string(env.nranks));
  if (const char* root = get(lookup, "CONFLUX_ROOT")) {
    env.root = root;
  } else {
    const char* addr = get(lookup, "MASTER_ADDR");
    const char* port = get(lookup, "MASTER_PORT");
    if (addr == nullptr || port == nullptr)
      return invalid_usage("no rendezvous address: set CONFLUX_ROOT=host:port, or MASTER_ADDR and MASTER_PORT");
    CFX_ASSIGN_OR_RETURN(int p, parse_int("MASTER_PORT", port));
    // Under torchrun MASTER_PORT is the TCPStore's; rendezvous on the next port.
    if (get(lookup, "TORCHELASTIC_RUN_ID") != nullptr) ++p;
    std::string host = addr;
    if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
    env.root = host + ":" + std::to_string(p);
  }
  return env;
}

Result<UniqueIdData> unique_id_from_env(const LaunchEnv& env, const EnvLookup& lookup) {
  UniqueIdData id;
  CFX_ASSIGN_OR_RETURN(id.root, SockAddr::parse(env.root));
  std::string identity = "conflux-env-v1|" + env.root + "|" + std::to_string(env.nranks);
  const char* secret = get(lookup, "CONFLUX_SECRET");
  if (secret != nullptr) identity += "|secret=" + std::string(secret);
  for (const char* job : {"TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "PMI_JOBID", "SLURM_JOB_ID",
                          "SLURM_STEP_ID", "CONFLUX_JOB_ID"}) {
    if (const char* v = get(lookup, job)) identity += std::string("|") + job + "=" + v;
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(identity.data(), identity.size(), digest, &len, EVP_sha256(), nullptr);
  std::memcpy(id.secret.data(), digest, id.secret.size());
  identity += "|comm-id";
  EVP_Digest(identity.data(), identity.size(), digest, &len, EVP_sha256(), nullptr);
  std::memcpy(&id.comm_id, digest, sizeof id.comm_id);
  return id;
}

}  // namespace conflux
