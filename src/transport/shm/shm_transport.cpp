#include "transport/shm/shm_transport.h"

#include "bootstrap/rank_info.h"
#include "core/log.h"
#include "transport/shm/shm_link.h"
#include "transport/shm/stale_files.h"

#include <unistd.h>

#include <cstdio>

namespace conflux {

size_t staging_bytes_for(const Config& cfg) { return cfg.shm_collectives ? cfg.shm_staging_bytes : 0; }

ShmTransport::~ShmTransport() {
  peer_memory_.reset();  // it reads the pidfds
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
}

Status ShmTransport::publish(RankInfo* mine) {
  sweep_stale_files_once();
  if (ctx_.nranks < 2) return Status::Ok();
  // Rings for every channel this rank may use: multi-channel schedules
  // cross same-host peers too (hier), and channels sharing one ring would
  // run one after another.
  ShmSegment::Layout layout{ctx_.nranks, cfg_.shm_slots, cfg_.shm_slot_bytes, cfg_.tcp_channels,
                            staging_bytes_for(cfg_)};
  const std::string name = segment_name(ctx_.id.comm_id, ctx_.rank, mine->pid);
  if (name.size() >= sizeof mine->shm_name) return internal_error("shm segment name " + name + " is too long");
  CFX_ASSIGN_OR_RETURN(segment_, ShmSegment::create(name, layout));
  std::snprintf(mine->shm_name, sizeof mine->shm_name, "%s", name.c_str());
  mine->shm_bytes = layout.total_bytes();
  waiter_ = std::make_unique<ShmWaiter>(segment_.doorbell());
  return Status::Ok();
}

bool ShmTransport::reaches(const RankInfo& mine, const RankInfo& peer) const {
  return mine.host_hash == peer.host_hash && peer.shm_bytes > 0 && mine.shm_bytes > 0;
}

Status ShmTransport::connect(const ConnectPlan& plan, LinkTable* links) {
  const int n = static_cast<int>(plan.table.size());
  // Channels matter only where network peers exist (a split needs channel
  // links to one); then same-host peers get a link per channel as well.
  const int channels = plan.any_network_peer ? plan.channels : 1;
  peer_segments_.resize(static_cast<size_t>(n));
  std::vector<const ShmSegment*> reachable(static_cast<size_t>(n), nullptr);
  std::vector<int> pids(static_cast<size_t>(n), 0);
  pidfds_.assign(static_cast<size_t>(n), -1);
  for (int p = 0; p < n; ++p) {
    pids[p] = plan.table[p].pid;
    if (!plan.mine[p]) continue;
    CFX_ASSIGN_OR_RETURN(peer_segments_[p], ShmSegment::open(plan.table[p].shm_name, plan.table[p].shm_bytes));
    peer_segments_[p].touch_as_sender(ctx_.rank);
    pidfds_[p] = open_pidfd(plan.table[p].pid);
    for (int c = 0; c < channels; ++c)
      links->at(c, p) =
          std::make_unique<ShmLink>(segment_, peer_segments_[p], ctx_.rank, p, plan.table[p].pid, pidfds_[p], c);
    reachable[p] = &peer_segments_[p];
    ++peers_;
  }
  if (peers_ > 0)
    peer_memory_ = std::make_unique<ShmPeerMemory>(segment_, std::move(reachable), std::move(pids), pidfds_);
  return Status::Ok();
}

bool ShmTransport::reads_peer_buffers() {
  if (kernel_copy_ < 0) kernel_copy_ = peer_memory_ != nullptr && peer_memory_->kernel_copy_works() ? 1 : 0;
  return kernel_copy_ == 1;
}

}  // namespace conflux
