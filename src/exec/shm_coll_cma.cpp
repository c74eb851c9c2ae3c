// Operations without a staging copy: large ones, and slot-sized ones when
// every buffer is cfxMemAlloc memory. Every rank has published its buffer
// addresses; peers read them directly with process_vm_readv (one kernel copy
// per byte), or with plain loads and stores through a mapping when the
// buffer is cfxMemAlloc memory (then reductions read the peers' inputs in
// place). Reductions are split: each rank reduces one slice, reading the
// peers' inputs chunk by chunk into a cache-sized scratch area, and (for
// AllReduce) pushes each reduced chunk into every peer's output. A rank
// returns only once every peer that reads or writes its buffers has said it
// is done with them.
#include "core/config.h"
#include "exec/reduce.h"
#include "exec/shm_coll_impl.h"

#include <cstring>

namespace conflux {

namespace {

constexpr size_t kCmaChunkBytes = size_t{128} * 1024;  // per peer; a few of them stay in L2

size_t slice_begin(size_t count, int n, int r) { return count * static_cast<size_t>(r) / static_cast<size_t>(n); }

}  // namespace

struct CollRun {
  ShmCollImpl& s;
  const OpDesc& op;
  int parity;
  size_t elem;

  uint64_t peer_send(int p) const { return s.control(p, parity).sendbuf; }
  uint64_t peer_recv(int p) const { return s.control(p, parity).recvbuf; }
  bool root_in_place() const { return peer_send(op.root) == peer_recv(op.root); }
  // Bytes moved per step: cache-sized, bounded by CONFLUX_CHUNK_SIZE (so the
  // tests' tiny chunks run many steps), whole elements.
  size_t piece_bytes() const {
    const size_t chunk = std::min(kCmaChunkBytes, config().chunk_bytes);
    return std::max(elem, chunk / elem * elem);
  }

  // dst[0, bytes) = reduction over ranks of (own + offset) and each peer's
  // (remote_base(p) + offset); own input first, so dst may alias it. Avg is
  // finalised here. `sink` sees each finished chunk; with dst == nullptr
  // chunks are reduced into scratch and only the sink keeps them (Reduce
  // towards a remote root).
  template <typename RemoteBase, typename Sink>
  Status reduce_slice(uint8_t* dst, const uint8_t* own, size_t offset, size_t bytes, RemoteBase remote_base,
                      Sink sink) {
    const int n = s.nranks_;
    const size_t chunk = piece_bytes();
    uint8_t* scratch = s.tmp(chunk * static_cast<size_t>(n));
    std::vector<const void*> srcs(n);
    for (size_t done = 0; done < bytes; done += chunk) {
      size_t len = std::min(chunk, bytes - done);
      srcs[0] = own + done;
      int k = 1;
      for (int p = 0; p < n; ++p) {
        if (p == s.rank_) continue;
        const uint64_t remote = remote_base(p) + offset + done;
        if (const uint8_t* mapped = s.view(p, remote, len)) {  // cfxMemAlloc: reduce from it directly
          srcs[k++] = mapped;
          continue;
        }
        uint8_t* buf = scratch + chunk * static_cast<size_t>(k);
        CFX_RETURN_IF_ERROR(s.cma_read(p, remote, buf, len));
        srcs[k++] = buf;
      }
      uint8_t* out = dst ? dst + done : scratch;  // scratch's first chunk is free: own input needs none
      reduce_many(out, srcs.data(), n, len / elem, op.dtype, op.op);
      if (op.op == cfxAvg) finalize_avg(out, len / elem, op.dtype, n);
      CFX_RETURN_IF_ERROR(sink(out, done, len));
    }
    return Status::Ok();
  }

  // Broadcast when every buffer is mapped: each rank copies its 1/n of the
  // root's input into every rank's output, a cache-sized chunk at a time,
  // so each byte is read from memory once and all cores share the stores.
  // (Against the root copying its whole input and peers reading the rest:
  // 3 instead of 4 bytes of memory traffic per byte at 2 ranks.)
  Status broadcast_slice_to_all() {
    const int n = s.nranks_, me = s.rank_, root = op.root;
    const uint64_t root_send = peer_send(root);
    const int skip = root_in_place() ? root : -1;
    const size_t lo = slice_begin(op.count, n, me) * elem, hi = slice_begin(op.count, n, me + 1) * elem;
    const size_t chunk = piece_bytes();
    uint8_t* scratch = nullptr;
    for (size_t off = lo; off < hi; off += chunk) {
      const size_t len = std::min(chunk, hi - off);
      const uint8_t* from = me == root ? static_cast<const uint8_t*>(op.sendbuf) + off : s.view(root, root_send + off, len);
      if (from == nullptr) {  // the mapping failed: read the chunk once
        if (scratch == nullptr) scratch = s.tmp(chunk);
        CFX_RETURN_IF_ERROR(s.cma_read(root, root_send + off, scratch, len));
        from = scratch;
      }
      CFX_RETURN_IF_ERROR(store_to_all(from, off, len, skip));
    }
    return Status::Ok();
  }

  // AllGather when every buffer is mapped: each rank writes its own block
  // into every output, so each input byte is read from memory once (pulling,
  // every rank reads every block).
  Status allgather_push_to_all() {
    const size_t block = op.count * elem;
    const size_t at = block * static_cast<size_t>(s.rank_);
    auto* send = static_cast<const uint8_t*>(op.sendbuf);
    const bool in_place = send == static_cast<uint8_t*>(op.recvbuf) + at;
    const size_t chunk = piece_bytes();
    for (size_t off = 0; off < block; off += chunk)
      CFX_RETURN_IF_ERROR(store_to_all(send + off, at + off, std::min(chunk, block - off), in_place ? s.rank_ : -1));
    return Status::Ok();
  }

  // [from, from + len) to byte offset `at` of every rank's output but `skip`'s.
  Status store_to_all(const uint8_t* from, size_t at, size_t len, int skip) {
    for (int q = 0; q < s.nranks_; ++q) {
      if (q == skip) continue;
      if (q == s.rank_) std::memcpy(static_cast<uint8_t*>(op.recvbuf) + at, from, len);
      else CFX_RETURN_IF_ERROR(s.cma_write(q, peer_recv(q) + at, from, len));
    }
    return Status::Ok();
  }
};

Status ShmCollImpl::run_cma(const OpDesc& op, int parity) {
  const size_t elem = datatype_size(op.dtype);
  const size_t block = op.count * elem;
  const int n = nranks_, me = rank_;
  const uint64_t k = op_;
  auto* recv = static_cast<uint8_t*>(op.recvbuf);
  auto* send = static_cast<const uint8_t*>(op.sendbuf);
  CollRun cr{*this, op, parity, elem};
  auto no_sink = [](uint8_t*, size_t, size_t) { return Status::Ok(); };
  auto send_of = [&](int p) { return cr.peer_send(p); };
  auto at = [&](size_t b, int r) { return b * static_cast<size_t>(r); };
  int waits_on = -1;  // whose "finished" this rank must see before returning (-1: everyone)

  switch (op.coll) {
    case Coll::kAllReduce: {
      // Reduce-scatter, then push: each reduced chunk, still in cache, is
      // written into every peer's output at once. Against reading the
      // peers' reduced slices afterwards this saves a pass over memory and
      // the barrier between the phases. Safe in place too: only this rank
      // reads (any rank's) input at this slice, and it has read each chunk
      // before it writes it.
      size_t lo = slice_begin(op.count, n, me) * elem, hi = slice_begin(op.count, n, me + 1) * elem;
      auto to_peers = [&](uint8_t* reduced, size_t off, size_t len) {
        for (int p = 0; p < n; ++p)
          if (p != me) CFX_RETURN_IF_ERROR(cma_write(p, cr.peer_recv(p) + lo + off, reduced, len));
        return Status::Ok();
      };
      CFX_RETURN_IF_ERROR(cr.reduce_slice(recv + lo, send + lo, lo, hi - lo, send_of, to_peers));
      break;
    }
    case Coll::kReduce: {
      size_t lo = slice_begin(op.count, n, me) * elem, hi = slice_begin(op.count, n, me + 1) * elem;
      if (me == op.root) {
        CFX_RETURN_IF_ERROR(cr.reduce_slice(recv + lo, send + lo, lo, hi - lo, send_of, no_sink));
      } else {
        // Reduce into scratch, then write each finished chunk into the
        // root's output (a non-root's recvbuf is not its to use).
        uint64_t root_out = cr.peer_recv(op.root) + lo;
        auto to_root = [&](uint8_t* d, size_t off, size_t l) { return cma_write(op.root, root_out + off, d, l); };
        CFX_RETURN_IF_ERROR(cr.reduce_slice(nullptr, send + lo, lo, hi - lo, send_of, to_root));
      }
      break;
    }
    case Coll::kReduceScatter: {
      size_t off = at(block, me);
      CFX_RETURN_IF_ERROR(cr.reduce_slice(recv, send + off, off, block, send_of, no_sink));
      break;
    }
    case Coll::kAllGather:
      if (all_buffers_mapped(parity)) {
        CFX_RETURN_IF_ERROR(cr.allgather_push_to_all());
        waits_on = -1;  // this rank writes into every output
        break;
      }
      if (send != recv + at(block, me)) std::memcpy(recv + at(block, me), send, block);
      for (int p = 0; p < n; ++p)
        if (p != me) CFX_RETURN_IF_ERROR(cma_read(p, cr.peer_send(p), recv + at(block, p), block));
      break;
    case Coll::kGather:
      if (me == op.root) {
        if (send != recv + at(block, me)) std::memcpy(recv + at(block, me), send, block);
        for (int p = 0; p < n; ++p)
          if (p != me) CFX_RETURN_IF_ERROR(cma_read(p, cr.peer_send(p), recv + at(block, p), block));
      }
      waits_on = me == op.root ? n : op.root;  // the root reads; nobody reads the root
      break;
    case Coll::kBroadcast: {
      if (all_buffers_mapped(parity)) {
        CFX_RETURN_IF_ERROR(cr.broadcast_slice_to_all());
        waits_on = -1;  // this rank writes into every output, and reads the root's input
        break;
      }
      // The root would idle while the others copy: it writes the tail of
      // every peer's output itself, and each peer reads the rest, so n
      // cores share the copies. A kernel copy costs about two memcpys per
      // byte (the copy and pinning the peer's pages), and an out-of-place
      // root also copies its whole input: then a tail of 1/(2n) balances
      // the cores, else 1/n.
      const size_t share = static_cast<size_t>(n) * (cr.root_in_place() ? 1 : 2);
      const size_t pushed = block / elem / share * elem;
      const size_t pulled = block - pushed;
      if (me != op.root) {
        CFX_RETURN_IF_ERROR(cma_read(op.root, cr.peer_send(op.root), recv, pulled));
      } else {
        if (send != recv) std::memcpy(recv, send, block);
        for (int p = 0; p < n; ++p)
          if (p != me) CFX_RETURN_IF_ERROR(cma_write(p, cr.peer_recv(p) + pulled, send + pulled, pushed));
      }
      waits_on = me == op.root ? -1 : op.root;  // peers wait for the root's writes; the root, for their reads
      break;
    }
    case Coll::kScatter:
      if (me != op.root) CFX_RETURN_IF_ERROR(cma_read(op.root, cr.peer_send(op.root) + at(block, me), recv, block));
      else if (send + at(block, me) != recv) std::memcpy(recv, send + at(block, me), block);
      waits_on = me == op.root ? -1 : n;
      break;
    case Coll::kAlltoAll: {
      // In place, peers read this rank's blocks out of recvbuf: gather into
      // scratch and copy over only once everyone has read.
      const bool in_place = send == recv;
      uint8_t* dst = in_place ? tmp(at(block, n)) : recv;
      for (int p = 0; p < n; ++p) {
        if (p == me) std::memcpy(dst + at(block, p), send + at(block, me), block);
        else CFX_RETURN_IF_ERROR(cma_read(p, cr.peer_send(p) + at(block, me), dst + at(block, p), block));
      }
      if (in_place) {
        publish(k * 4 + kMidway);
        CFX_RETURN_IF_ERROR(wait_for(k * 4 + kMidway, -1, "finish reading its blocks"));
        std::memcpy(recv, dst, at(block, n));
      }
      break;
    }
    default: return internal_error("shared collectives: unexpected collective on the single-copy path");
  }
  publish(k * 4 + kFinished);
  if (waits_on == n) return Status::Ok();  // nobody reads this rank's buffers
  return wait_for(k * 4 + kFinished, waits_on, "finish reading this rank's buffers");
}

}  // namespace conflux
