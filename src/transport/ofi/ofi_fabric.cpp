#include "transport/ofi/ofi_fabric.h"

#include "core/config.h"
#include "core/log.h"
#include "transport/ofi/ofi_api.h"
#include "transport/shm/stale_files.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

namespace conflux {
namespace {

constexpr uint32_t kApiVersion = FI_VERSION(1, 9);
// Modes of memory registration we can honour for tagged send/receive:
// descriptors on every local buffer (LOCAL), registrations bound to the
// endpoint (ENDPOINT); VIRT_ADDR, ALLOCATED and PROV_KEY only matter for RMA,
// which we do not use, and cost nothing to accept.
constexpr uint64_t kMrModes = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
constexpr size_t kMrCacheLimit = 4096;

// The loaded library (OfiFabric::open loads it before anything else runs).
const OfiApi& lib() { return *ofi_api().value(); }

fi_info* make_hints(const std::string& provider, bool manual_progress, bool delivery_complete = false) {
  fi_info* hints = lib().dupinfo(nullptr);
  hints->caps = FI_TAGGED | FI_MSG;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = static_cast<int>(kMrModes);
  hints->domain_attr->threading = FI_THREAD_DOMAIN;  // the executor serialises all calls
  if (manual_progress) {
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
  }
  // A send completes only once the peer's provider has the data: a rank may
  // then close its endpoint right after its last operation without the
  // peer losing bytes still buffered here (seen with tcp;ofi_rxm).
  if (delivery_complete) hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());
  return hints;
}

// Providers fi_getinfo offers here for our needs (or at all, if none does).
std::string offered_providers() {
  std::set<std::string> names;
  for (bool requirements : {true, false}) {
    fi_info* hints = requirements ? make_hints("", false) : nullptr;
    fi_info* list = nullptr;
    if (lib().getinfo(kApiVersion, nullptr, nullptr, 0, hints, &list) == 0) {
      for (fi_info* i = list; i != nullptr; i = i->next)
        if (i->fabric_attr && i->fabric_attr->prov_name) names.insert(i->fabric_attr->prov_name);
      lib().freeinfo(list);
    }
    if (hints) lib().freeinfo(hints);
    if (!names.empty()) {
      std::string s = requirements ? "offered for FI_EP_RDM + FI_TAGGED: " : "none with FI_EP_RDM + FI_TAGGED; present: ";
      bool first = true;
      for (const auto& n : names) {
        s += (first ? "\"" : ", \"") + n + "\"";
        first = false;
      }
      return s;
    }
  }
  return "fi_getinfo offers no provider at all";
}

}  // namespace

Status ofi_error(const std::string& what, int ret) {
  return remote_error(what + " failed: " + lib().strerror(-ret) + " (" + std::to_string(ret) + ")");
}

namespace {
// The offer whose domain is the nearest NIC (tcp names domains after
// interfaces, efa and verbs after devices: "rdmap16s27-rdm", "mlx5_0"), else
// the provider's first choice. Returns a copy; the list is freed.
fi_info* pick_domain(fi_info* list, const std::vector<std::string>& preferred) {
  fi_info* pick = nullptr;
  for (const std::string& want : preferred) {
    for (fi_info* i = list; i != nullptr && pick == nullptr && !want.empty(); i = i->next) {
      const char* d = i->domain_attr != nullptr ? i->domain_attr->name : nullptr;
      if (d != nullptr && std::strncmp(d, want.c_str(), want.size()) == 0) pick = i;
    }
  }
  const bool found = pick != nullptr;
  if (pick == nullptr) pick = list;
  CFX_INFO(kNet, "libfabric: domain %s (%s)", pick->domain_attr->name ? pick->domain_attr->name : "?",
           found ? "the data interface or nearest NIC" : "the provider's first offer; none is preferred");
  fi_info* chosen = lib().dupinfo(pick);
  lib().freeinfo(list);
  return chosen;
}
}  // namespace

Result<std::shared_ptr<OfiFabric>> OfiFabric::open(const std::string& provider,
                                                   const std::vector<std::string>& preferred) {
  CFX_RETURN_IF_ERROR(ofi_api().status());
  fi_info* info = nullptr;
  int ret = -FI_ENODATA;
  // Manual progress first (we drive it anyway); a provider that only
  // offers automatic progress is still fine to use.
  // shm's transmit completion already means "in the peer's shared memory";
  // asking it for delivery completion stalled sends here (libfabric 1.17).
  const int first = provider == "shm" ? 2 : 0;
  // ofi_rxm sends a message eagerly (one transfer) only below its buffer
  // size, 16 KiB by default; our inlined messages (header + up to 32 KiB)
  // then went through its slower segmented protocol: 64 KiB AllReduce took
  // 110-180 us instead of 62-64 us here. Raise it unless the user chose.
  // libfabric reads it when the provider loads, i.e. at the first fi_getinfo.
  setenv("FI_OFI_RXM_BUFFER_SIZE", std::to_string(kOfiInlineBytes + 1024).c_str(), /*overwrite=*/0);
  // ofi_rxm's pass-through hands tagged sends and receives straight to the
  // tcp provider's own reliable-datagram endpoint, skipping rxm's protocol
  // layer (its bounce buffers, segmentation and rendezvous). Best of 4
  // interleaved launches, 2-rank AllReduce over tcp;ofi_rxm: 64 B 13.3 ->
  // 9.9 us, 64 KiB 63.5 -> 39.5 us, 256 KiB 157 -> 106 us (bench/README.md,
  // libfabric). rxm falls back to its own protocol where the tcp provider
  // cannot serve what we ask; the user's setting wins.
  setenv("FI_OFI_RXM_ENABLE_PASSTHRU", "1", /*overwrite=*/0);
  for (int attempt = first; attempt < 4 && ret != 0; ++attempt) {
    fi_info* hints = make_hints(provider, (attempt & 1) == 0, attempt < 2);
    ret = lib().getinfo(kApiVersion, nullptr, nullptr, 0, hints, &info);
    lib().freeinfo(hints);
    if (ret == 0 && attempt >= 2 && first == 0)
      CFX_WARN(kNet, "libfabric %s: no FI_DELIVERY_COMPLETE; a rank that exits right after its last send may cut it off",
               info->fabric_attr->prov_name);
  }
  if (ret != 0) {
    return invalid_usage("libfabric: no provider " + (provider.empty() ? std::string("") : "\"" + provider + "\" ") +
                         "offers FI_EP_RDM with FI_TAGGED|FI_MSG and MR modes we can honour (fi_getinfo: " +
                         lib().strerror(-ret) + "); " + offered_providers() +
                         ". Set CONFLUX_OFI_PROVIDER to one of them");
  }
  info = pick_domain(info, preferred);
  if (info == nullptr) return internal_error("libfabric: fi_dupinfo failed");
  std::shared_ptr<OfiFabric> f(new OfiFabric());
  Status st = f->init(info);  // takes ownership of info
  if (!st.ok()) return st.prepend("libfabric provider \"" + f->provider_ + "\": ");
  return f;
}

Status OfiFabric::init(fi_info* info) {
  info_ = info;
  provider_ = info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "?";
  max_msg_size_ = info->ep_attr->max_msg_size;
  inject_size_ = info->tx_attr != nullptr ? info->tx_attr->inject_size : 0;
  const uint64_t mr_mode = static_cast<uint64_t>(info->domain_attr->mr_mode);
  register_ = (mr_mode & FI_MR_LOCAL) != 0 || config().ofi_mr_always;
  mr_endpoint_ = (mr_mode & FI_MR_ENDPOINT) != 0;

  int ret = lib().fabric(info->fabric_attr, &fabric_, nullptr);
  if (ret) return ofi_error("fi_fabric", ret);
  ret = fi_domain(fabric_, info, &domain_, nullptr);
  if (ret) return ofi_error("fi_domain", ret);
  // A descriptor to sleep on (FI_WAIT_FD) lets a waiting rank leave the CPU
  // to its peer (and to the kernel moving its bytes) instead of spinning on
  // fi_cq_read; a provider without one still works, polled.
  // Opt-in (CONFLUX_OFI_WAIT=1): with tcp;ofi_rxm (libfabric 1.17) the
  // descriptor measured slower than the polled CQ (bench/README.md, libfabric):
  // it seems not to signal every event manual progress needs, so waits run
  // into the executor's 50 ms poll cap.
  const bool want_fd = config().ofi_wait_fd;
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = want_fd ? FI_WAIT_FD : FI_WAIT_NONE;
  ret = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
  if (ret && want_fd) {
    CFX_INFO(kNet, "libfabric %s: no CQ with FI_WAIT_FD (%s); polling", provider_.c_str(), lib().strerror(-ret));
    cq_attr.wait_obj = FI_WAIT_NONE;
    ret = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
  }
  if (ret) return ofi_error("fi_cq_open", ret);
  if (cq_attr.wait_obj == FI_WAIT_FD) {
    int fd = -1;
    ret = fi_control(&cq_->fid, FI_GETWAIT, &fd);
    if (ret == 0 && fd >= 0) {
      cq_fd_ = fd;
    } else {
      CFX_INFO(kNet, "libfabric %s: FI_GETWAIT on the CQ failed (%s); polling", provider_.c_str(),
               lib().strerror(-ret));
    }
  }
  fi_av_attr av_attr{};
  av_attr.type = info->domain_attr->av_type != FI_AV_UNSPEC ? info->domain_attr->av_type : FI_AV_TABLE;
  ret = fi_av_open(domain_, &av_attr, &av_, nullptr);
  if (ret) return ofi_error("fi_av_open", ret);
  ret = fi_endpoint(domain_, info, &ep_, nullptr);
  if (ret) return ofi_error("fi_endpoint", ret);
  ret = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV);
  if (ret) return ofi_error("fi_ep_bind(cq)", ret);
  ret = fi_ep_bind(ep_, &av_->fid, 0);
  if (ret) return ofi_error("fi_ep_bind(av)", ret);
  if (provider_ == "shm") {
    // The shm provider names its shared-memory region after the process id
    // unless told otherwise, and a rank killed before closing leaves that
    // region behind; once pids wrap (32768 by default) a new rank with the
    // same pid fails fi_enable with EBUSY. A name with a random tag cannot
    // collide, and the stamp in it lets a later process remove the region
    // once this one is gone (stale_files.h).
    sweep_stale_files_once();
    std::string shm_name = libfabric_region_name();
    ret = fi_setname(&ep_->fid, shm_name.data(), shm_name.size() + 1);
    if (ret) return ofi_error("fi_setname", ret);
  }
  ret = fi_enable(ep_);
  if (ret) return ofi_error("fi_enable", ret);
  size_t len = 64;
  name_.resize(len);
  ret = fi_getname(&ep_->fid, name_.data(), &len);
  if (ret == -FI_ETOOSMALL) {
    name_.resize(len);
    ret = fi_getname(&ep_->fid, name_.data(), &len);
  }
  if (ret) return ofi_error("fi_getname", ret);
  name_.resize(len);
  if (provider_ == "shm")
    CFX_WARN(kNet, "libfabric shm provider: a peer killed mid-send can leave a lock held in shared memory and hang "
                   "survivors inside fi_tsend (libfabric 1.17); CONFLUX_TRANSPORT=auto (conflux's own shared "
                   "memory) has no such lock");
  CFX_INFO(kNet, "libfabric %s: max_msg_size %zu, inject_size %zu, mr_mode 0x%llx%s, %s", provider_.c_str(),
           max_msg_size_, inject_size_, static_cast<unsigned long long>(mr_mode), register_ ? " (registering buffers)" : "",
           cq_fd_ >= 0 ? "CQ wait fd" : "polled CQ");
  return Status::Ok();
}

Status OfiFabric::require_open() const {
  if (ep_ != nullptr) return Status::Ok();
  return remote_error("libfabric " + provider_ + ": endpoint closed after an earlier error");
}

void OfiFabric::cancel(OfiReq* req) {
  if (ep_ != nullptr && req->posted) (void)fi_cancel(&ep_->fid, &req->ctx);
}

void OfiFabric::shutdown() {
  if (ep_ == nullptr) return;
  fi_close(&ep_->fid);
  ep_ = nullptr;
}

OfiFabric::~OfiFabric() {
  // Endpoint first: nothing completes into our requests after this.
  shutdown();
  for (auto& [key, mr] : mr_cache_) fi_close(&mr->fid);
  for (fid_mr* mr : standing_mrs_) fi_close(&mr->fid);
  if (av_) fi_close(&av_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  if (info_) lib().freeinfo(info_);
}

Result<fi_addr_t> OfiFabric::insert_peer(const std::string& name, int peer) {
  fi_addr_t addr = FI_ADDR_UNSPEC;
  int ret = fi_av_insert(av_, name.data(), 1, &addr, 0, nullptr);
  if (ret != 1) return ofi_error("fi_av_insert for rank " + std::to_string(peer), ret < 0 ? ret : -FI_EINVAL);
  return addr;
}

OfiReq* OfiFabric::new_requests(size_t n) {
  requests_.push_back(std::make_unique<OfiReq[]>(n));
  return requests_.back().get();
}

uint8_t* OfiFabric::new_buffer(size_t bytes) {
  buffers_.push_back(std::make_unique<uint8_t[]>(bytes));
  return buffers_.back().get();
}

Result<void*> OfiFabric::descriptor(const void* buf, size_t len, bool standing) {
  if (!register_ || len == 0) return static_cast<void*>(nullptr);
  const auto b = reinterpret_cast<uintptr_t>(buf);
  if (standing) {
    CFX_ASSIGN_OR_RETURN(fid_mr * mr, register_buffer(buf, len));
    standing_mrs_.push_back(mr);
    return fi_mr_desc(mr);
  }
  // Executors send slices of one user buffer: a registration that contains
  // the slice serves it. Look at the few regions starting at or below b.
  auto it = mr_cache_.upper_bound({b, SIZE_MAX});
  for (int k = 0; k < 8 && it != mr_cache_.begin(); ++k) {
    --it;
    if (it->first.first <= b && b + len <= it->first.first + it->first.second) return fi_mr_desc(it->second);
  }
  if (mr_cache_.size() >= kMrCacheLimit && in_flight_ == 0) {
    // Nothing posted refers to a registration now: start over rather than
    // grow without bound (slices of many buffers, or freed buffers).
    CFX_INFO(kNet, "libfabric: dropping %zu cached registrations", mr_cache_.size());
    for (auto& [k, m] : mr_cache_) fi_close(&m->fid);
    mr_cache_.clear();
  }
  CFX_ASSIGN_OR_RETURN(fid_mr * mr, register_buffer(buf, len));
  mr_cache_[{b, len}] = mr;
  return fi_mr_desc(mr);
}

Result<fid_mr*> OfiFabric::register_buffer(const void* buf, size_t len) {
  fid_mr* mr = nullptr;
  const uint64_t key = ++mr_keys_;  // unique when the provider does not choose keys
  int ret = fi_mr_reg(domain_, buf, len, FI_SEND | FI_RECV, 0, key, 0, &mr, nullptr);
  if (ret) return ofi_error("fi_mr_reg of " + std::to_string(len) + " bytes", ret);
  if (mr_endpoint_) {
    ret = fi_mr_bind(mr, &ep_->fid, 0);
    if (!ret) ret = fi_mr_enable(mr);
    if (ret) {
      fi_close(&mr->fid);
      return ofi_error("fi_mr_bind/enable", ret);
    }
  }
  return mr;
}

Status OfiFabric::post_send(const void* buf, size_t len, fi_addr_t dest, uint64_t tag, OfiReq* req) {
  CFX_RETURN_IF_ERROR(require_open());
  CFX_ASSIGN_OR_RETURN(void* desc, descriptor(buf, len, req->standing));
  req->done = false;
  req->error.clear();
  ssize_t ret = fi_tsend(ep_, buf, len, desc, dest, tag, &req->ctx);
  if (ret == -FI_EAGAIN) return Status::Ok();
  if (ret) return ofi_error("fi_tsend", static_cast<int>(ret));
  req->posted = true;
  if (!req->standing) ++in_flight_;
  return Status::Ok();
}

Status OfiFabric::inject(const void* buf, size_t len, fi_addr_t dest, uint64_t tag, bool* posted) {
  *posted = false;
  CFX_RETURN_IF_ERROR(require_open());
  ssize_t ret = fi_tinject(ep_, buf, len, dest, tag);
  if (ret == -FI_EAGAIN) return Status::Ok();
  if (ret) return ofi_error("fi_tinject", static_cast<int>(ret));
  *posted = true;
  return Status::Ok();
}

Status OfiFabric::post_recv(void* buf, size_t len, uint64_t tag, OfiReq* req) {
  CFX_RETURN_IF_ERROR(require_open());
  CFX_ASSIGN_OR_RETURN(void* desc, descriptor(buf, len, req->standing));
  req->done = false;
  req->error.clear();
  // The source rank is in the tag, so no directed receive is needed.
  ssize_t ret = fi_trecv(ep_, buf, len, desc, FI_ADDR_UNSPEC, tag, 0, &req->ctx);
  // shm answers -FI_ENOMEM while its receive pool is full: retry like EAGAIN.
  if (ret == -FI_EAGAIN || ret == -FI_ENOMEM) return Status::Ok();
  if (ret) return ofi_error("fi_trecv", static_cast<int>(ret));
  req->posted = true;
  if (!req->standing) ++in_flight_;
  return Status::Ok();
}

Status OfiFabric::poll(bool* progressed) {
  if (ep_ == nullptr) return Status::Ok();  // closed: nothing moves any more
  fi_cq_tagged_entry entries[16];
  for (int round = 0; round < 8; ++round) {
    ssize_t n = fi_cq_read(cq_, entries, 16);
    if (n == -FI_EAGAIN) return Status::Ok();
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      ssize_t r = fi_cq_readerr(cq_, &err, 0);
      if (r < 0) return ofi_error("fi_cq_readerr", static_cast<int>(r));
      char buf[256] = {};
      const char* prov_msg = fi_cq_strerror(cq_, err.prov_errno, err.err_data, buf, sizeof buf);
      std::string msg = std::string(lib().strerror(err.err)) + " (provider: " + (prov_msg ? prov_msg : "?") + ")";
      auto* req = static_cast<OfiReq*>(err.op_context);
      if (req == nullptr) return remote_error("libfabric " + provider_ + " completion error: " + msg);
      req->posted = false;
      if (!req->standing) --in_flight_;
      req->done = true;
      req->len = err.len;
      req->error = msg;
      *progressed = true;
      continue;
    }
    if (n < 0) return ofi_error("fi_cq_read", static_cast<int>(n));
    for (ssize_t i = 0; i < n; ++i) {
      auto* req = static_cast<OfiReq*>(entries[i].op_context);
      req->posted = false;
      if (!req->standing) --in_flight_;
      req->done = true;
      req->len = entries[i].len;
    }
    *progressed = true;
    if (n < 16) return Status::Ok();
  }
  return Status::Ok();
}

int OfiFabric::wait_fd() {
  if (cq_fd_ < 0 || ep_ == nullptr) return -1;
  // fi_trywait: FI_SUCCESS means the descriptor will signal the next
  // completion; -FI_EAGAIN means something is pending and must be read
  // (sleeping now could miss it).
  fid* fids[] = {&cq_->fid};
  return fi_trywait(fabric_, fids, 1) == FI_SUCCESS ? cq_fd_ : -1;
}

}  // namespace conflux
