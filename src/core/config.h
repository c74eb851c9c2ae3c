// Configuration read once from CONFLUX_* environment variables into one
// typed struct. Every variable is documented in README.md's table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace conflux {

enum class TransportChoice { kAuto, kTcp, kShm, kOfi };
// "auto", "tcp", "shm", "ofi": as CONFLUX_TRANSPORT spells them.
const char* transport_name(TransportChoice t);

constexpr int kMaxTcpChannels = 16;

struct Config {
  int64_t timeout_ms = 0;         // CONFLUX_TIMEOUT (s): per-operation deadline; 0 = none
  int64_t init_timeout_ms = 120000;  // CONFLUX_INIT_TIMEOUT (s): rendezvous and connection setup
  int64_t heartbeat_timeout_ms = 10000;  // CONFLUX_HEARTBEAT_TIMEOUT (s): silent TCP peer is dead; 0 = never
  size_t chunk_bytes = 512 * 1024;   // CONFLUX_CHUNK_SIZE: pipelining unit of ring/chain steps
  TransportChoice transport = TransportChoice::kAuto;  // CONFLUX_TRANSPORT=auto|tcp|shm|ofi
  std::string socket_ifname;      // CONFLUX_SOCKET_IFNAME (NCCL grammar: prefix, ^exclude, =exact)
  std::string hostid;             // CONFLUX_HOSTID: overrides the host identity (tests fake hosts)
  std::string root;               // CONFLUX_ROOT=host:port for cfxCommInitFromEnv
  // MASTER_ADDR (torchrun's rendezvous host): cfxGetUniqueId listens on the
  // interface that reaches it, where CONFLUX_SOCKET_IFNAME does not choose.
  std::string master_addr;
  size_t shm_slot_bytes = 64 * 1024;  // CONFLUX_SHM_SLOT_SIZE: bytes per shared-memory ring slot
  // CONFLUX_SHM_SLOTS: slots per directed shared-memory ring. 16 x 64 KiB
  // holds two default chunks, so a sender fills one while the receiver
  // drains the other (2 ranks, heap AllReduce 4 MiB: 320 against 546 us
  // with 8 slots; 4 ranks unchanged).
  int shm_slots = 16;
  int spin_iterations = 2000;     // CONFLUX_SPIN: polls before a waiting rank sleeps
  size_t tcp_buffer_bytes = 4 << 20;  // CONFLUX_SOCKET_BUFSIZE: SO_SNDBUF/SO_RCVBUF
  int tcp_channels = 1;           // CONFLUX_TCP_CHANNELS: connections per TCP peer (1..16)
  // CONFLUX_CHANNEL_MIN_BYTES: calls of at least this many bytes are split
  // over the channels; -1 (unset): when the network probe finds that
  // several flows outrun one (algo/channels.h).
  int64_t channel_min_bytes = -1;
  std::string ofi_provider;       // CONFLUX_OFI_PROVIDER (e.g. "tcp;ofi_rxm", "shm", "efa")
  size_t ofi_piece_bytes = 1u << 20;  // CONFLUX_OFI_PIECE_SIZE: payload per provider message
  size_t ofi_inline_bytes = 32u << 10;  // CONFLUX_OFI_INLINE: payload sent inside the header message
  bool ofi_mr_always = false;     // CONFLUX_OFI_MR=always: register memory even where the provider needs none (tests)
  bool ofi_wait_fd = false;       // CONFLUX_OFI_WAIT=1: sleep on the completion queue's descriptor
  std::string algo;               // CONFLUX_ALGO (NCCL grammar), parsed by the tuner
  // CONFLUX_SHM_COLL=0 turns the one-sided intra-host algorithms (eager,
  // direct, ...) off: same-host ranks then only exchange messages.
  bool shm_collectives = true;
  // CONFLUX_MOE_PLACED=0: the MoE layer exchanges rows by messages even
  // where one-sided copies reach every rank (for comparing the two paths).
  bool moe_placed = true;
  bool moe_hier = true;  // CONFLUX_MOE_HIER: multi-host dispatch through a proxy per host
  size_t shm_staging_bytes = 64 * 1024;  // CONFLUX_SHM_STAGING_SIZE: each half of a rank's staging area
  // The cost model: CONFLUX_TUNE=0 turns it off (the first usable algorithm).
  bool tune = true;
  bool tune_calibrate = true;     // CONFLUX_TUNE_CALIBRATE=0: built-in constants, no measuring
  std::string tune_cache_dir;     // CONFLUX_TUNE_CACHE, else $XDG_CACHE_HOME/conflux, else ~/.cache/conflux; "" off
  std::string tune_table;         // CONFLUX_TUNE_TABLE: the measured table's file; "" default, "off" none
  std::string tune_net;           // CONFLUX_TUNE_NET="lat_us,GB/s": the network's constants
  double tune_overhead = -1;      // CONFLUX_TUNE_OVERHEAD: sender's share of alpha (0..1; shm and network); -1 the model's
  std::string topo_file;          // CONFLUX_TOPO_FILE: NCCL topology XML fused with discovery
  std::string reduce_isa;         // CONFLUX_REDUCE_ISA=generic|avx2 (empty: best available)
};

// The process-wide configuration, parsed on first use.
const Config& config();
// Re-reads the environment (tests change variables between cases).
void reload_config();

}  // namespace conflux
