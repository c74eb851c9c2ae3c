// One libfabric endpoint per communicator: fabric, domain, address vector,
// completion queue and an RDM endpoint, shared by the OfiLinks to every peer.
// Progress is ours (FI_PROGRESS_MANUAL): links call poll(), which reads the
// CQ and marks the finished requests; a completion can belong to any link.
#pragma once

#include "core/status.h"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace conflux {

// Payloads up to this size travel inside their header message (OfiLink).
constexpr size_t kOfiInlineBytes = 32 * 1024;

// One posted send or receive. The provider's context must come first: the CQ
// hands back its address as op_context. Requests live as long as the fabric
// (not the link), so a completion that arrives after a link is gone still
// lands in valid memory.
struct OfiReq {
  fi_context2 ctx{};
  bool posted = false;  // handed to the provider, completion pending
  bool done = false;    // completed (check error)
  size_t len = 0;       // bytes the completion reports
  bool standing = false; // a long-lived post (failure notices): not "in flight" for the MR cache
  std::string error;    // provider's message when the completion failed
};

class OfiFabric {
 public:
  // provider: FI_PROVIDER style ("tcp;ofi_rxm", "shm", "efa"), "" = libfabric's first choice.
  // preferred: domain names in order of preference (an interface, a NIC
  // device); the first one offered wins, else the provider's first offer.
  static Result<std::shared_ptr<OfiFabric>> open(const std::string& provider,
                                                 const std::vector<std::string>& preferred = {});
  ~OfiFabric();
  OfiFabric(const OfiFabric&) = delete;
  OfiFabric& operator=(const OfiFabric&) = delete;

  const std::string& provider() const { return provider_; }
  const std::string& local_name() const { return name_; }  // this endpoint's address, raw bytes
  size_t max_msg_size() const { return max_msg_size_; }
  bool registers_memory() const { return register_; }

  Result<fi_addr_t> insert_peer(const std::string& name, int peer);

  // Post a tagged send/receive. Returns Ok with req->posted == false when the
  // provider is out of resources (-FI_EAGAIN): try again after poll().
  Status post_send(const void* buf, size_t len, fi_addr_t dest, uint64_t tag, OfiReq* req);
  Status post_recv(void* buf, size_t len, uint64_t tag, OfiReq* req);
  // A send of at most inject_size() bytes that completes on return, with no
  // completion to read (fi_tinject). *posted == false: out of resources.
  Status inject(const void* buf, size_t len, fi_addr_t dest, uint64_t tag, bool* posted);
  size_t inject_size() const { return inject_size_; }
  // Reads the CQ (drives the provider); sets *progressed when anything completed.
  Status poll(bool* progressed);
  // The CQ's wait descriptor (FI_WAIT_FD) when it is safe to sleep on it now,
  // i.e. fi_trywait said nothing is pending; -1 when the CQ has no descriptor
  // or must be read first (the caller then polls again instead of sleeping).
  // Readable when a completion may be there; reading happens in poll().
  int wait_fd();

  // Asks the provider to drop a posted receive (fi_cancel); it completes
  // with an error when dropped, or normally if it was already filling.
  void cancel(OfiReq* req);
  // Closes the endpoint for good: the last resort when posted operations
  // will not finish (OfiLink::quiesce). Afterwards posting fails and poll()
  // reads nothing.
  void shutdown();

  // Request slots and buffers owned by the fabric: memory a posted
  // operation refers to must outlive the link that posted it (see OfiReq).
  OfiReq* new_requests(size_t n);
  uint8_t* new_buffer(size_t bytes);

 private:
  OfiFabric() = default;
  Status init(fi_info* info);
  // Posting after shutdown() fails with this.
  Status require_open() const;
  // MR desc, nullptr when not needed. A standing request's buffer is
  // registered apart and kept: the cache may be dropped while it is posted.
  Result<void*> descriptor(const void* buf, size_t len, bool standing);
  Result<fid_mr*> register_buffer(const void* buf, size_t len);

  std::string provider_;
  std::string name_;
  size_t max_msg_size_ = 0;
  size_t inject_size_ = 0;  // tx_attr->inject_size; 0: no inject
  bool register_ = false;     // FI_MR_LOCAL (or CONFLUX_OFI_MR=always): pass MR descriptors
  bool mr_endpoint_ = false;  // FI_MR_ENDPOINT: bind each MR to the endpoint
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  int cq_fd_ = -1;  // FI_GETWAIT of the CQ, -1 without a wait object
  // Registration cache by (address, length): user buffers of a training loop
  // repeat, so each is registered once.
  std::map<std::pair<uintptr_t, size_t>, fid_mr*> mr_cache_;
  std::vector<fid_mr*> standing_mrs_;
  uint64_t mr_keys_ = 0;
  size_t in_flight_ = 0;  // posted requests not yet completed
  std::deque<std::unique_ptr<OfiReq[]>> requests_;
  std::deque<std::unique_ptr<uint8_t[]>> buffers_;
};

// "fi_xxx failed: <fi_strerror>" as a conflux error.
Status ofi_error(const std::string& what, int ret);

}  // namespace conflux
