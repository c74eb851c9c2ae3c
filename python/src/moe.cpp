// conflux.MoE's C++ half: a cfxMoe and its handles over buffer-protocol
// objects. Every buffer's element size and length is checked against the
// layer's configuration before the library sees a pointer, so a wrong array
// raises conflux.Error instead of reading or writing past its end. The
// Python half (conflux/moe.py) takes numpy arrays and torch tensors and adds
// the autograd functions.
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "bindings.h"
#include "buffers.h"
#include "errors.h"

namespace conflux_py {
namespace {

// Owns the cfxMoe; handles share it, so it is destroyed after the last one.
struct MoeBox {
  CommPtr comm;
  cfxMoe_t moe = nullptr;
  cfxMoeConfig_t cfg{};
  size_t elem = 0;
  std::vector<int> local;
  MoeBox() = default;
  MoeBox(const MoeBox&) = delete;
  MoeBox& operator=(const MoeBox&) = delete;
  ~MoeBox() {
    if (moe != nullptr) cfxMoeDestroy(moe);
  }
  cfxComm_t comm_or_throw() const {
    if (comm->comm == nullptr) throw CfxError(cfxInvalidUsage, "MoE: its communicator was destroyed");
    return comm->comm;
  }
};
using MoePtr = std::shared_ptr<MoeBox>;

void expect_count(const BufferView& v, size_t want, const char* what, const char* shape) {
  if (v.count != want)
    invalid_argument(std::string(what) + " has " + std::to_string(v.count) + " elements, expected " +
                     std::to_string(want) + " (" + shape + ")");
}

// A buffer exported for the length of a call: C-contiguous, of the given
// element type (or the type its format names), `count` elements.
struct Checked {
  py::buffer_info info;
  BufferView view;
};
Checked checked(py::handle obj, bool writable, std::optional<cfxDataType_t> type, const char* what, size_t count,
                const char* shape) {
  Checked c{acquire(obj, writable, what), {}};
  c.view = describe(c.info, type, what);
  expect_count(c.view, count, what, shape);
  return c;
}

// One dispatch's routing, kept for its combine, backward and replays.
class MoeHandle {
 public:
  MoeHandle(MoePtr moe, cfxMoeHandle_t h, size_t ntokens, std::vector<size_t> per_expert)
      : moe_(std::move(moe)), h_(h), ntokens_(ntokens), per_expert_(std::move(per_expert)) {
    void* rows = nullptr;
    check(cfxMoeExpertTokens(h_, &rows, &rows_), moe_->comm->comm, "cfxMoeExpertTokens");
  }
  MoeHandle(const MoeHandle&) = delete;
  MoeHandle& operator=(const MoeHandle&) = delete;
  ~MoeHandle() { free(); }
  void free() {
    if (h_ != nullptr) cfxMoeHandleFree(h_);
    h_ = nullptr;
  }
  cfxMoeHandle_t get() const {
    if (h_ == nullptr) throw CfxError(cfxInvalidUsage, "MoE handle was freed");
    return h_;
  }
  const MoePtr& moe() const { return moe_; }
  size_t ntokens() const { return ntokens_; }
  size_t rows() const { return rows_; }
  const std::vector<size_t>& tokens_per_expert() const { return per_expert_; }

  std::vector<size_t> block_offsets() const {
    std::vector<size_t> off(per_expert_.size());
    if (!off.empty()) check(cfxMoeBlockOffsets(get(), off.data()), nullptr, "cfxMoeBlockOffsets");
    return off;
  }
  py::dict stats() const {
    size_t wire = 0, received = 0, committed = 0;
    check(cfxMoeStats(get(), &wire, &received, &committed), nullptr, "cfxMoeStats");
    py::dict d;
    d["wire_bytes"] = wire;
    d["received_bytes"] = received;
    d["committed_bytes"] = committed;
    size_t network = 0;
    check(cfxMoeNetworkBytes(get(), &network), nullptr, "cfxMoeNetworkBytes");
    d["network_bytes"] = network;
    return d;
  }
  size_t dropped() const {
    size_t n = 0;
    check(cfxMoeDropped(get(), &n), nullptr, "cfxMoeDropped");
    return n;
  }
  // The rows dispatch delivered, copied into `out` (rows x hidden elements).
  void copy_rows(py::handle out) const {
    Checked o = checked(out, true, moe_->cfg.datatype, "out", rows_ * moe_->cfg.hidden, "rows x hidden");
    void* rows = nullptr;
    size_t n = 0;
    check(cfxMoeExpertTokens(get(), &rows, &n), nullptr, "cfxMoeExpertTokens");
    if (n > 0) std::memcpy(o.view.ptr, rows, n * moe_->cfg.hidden * moe_->elem);
  }

 private:
  MoePtr moe_;
  cfxMoeHandle_t h_ = nullptr;
  size_t ntokens_ = 0, rows_ = 0;
  std::vector<size_t> per_expert_;
};

// Optional float32 weights of `count` elements (ntokens x top_k): nullptr
// for None; the buffer stays exported in *keep while the call runs.
const float* float_weights(py::handle obj, size_t count, const char* what, std::optional<py::buffer_info>* keep) {
  if (obj.is_none()) return nullptr;
  keep->emplace(acquire(obj, false, what));
  BufferView v = describe(**keep, std::nullopt, what);
  if (v.dtype != cfxFloat32) invalid_argument(std::string(what) + " must be float32");
  expect_count(v, count, what, "ntokens x top_k");
  return static_cast<const float*>(v.ptr);
}

MoePtr create(PyComm& comm, int num_experts, int top_k, size_t hidden, cfxDataType_t dtype,
              size_t max_tokens_per_rank, std::optional<std::vector<int>> expert_to_rank, double capacity_factor,
              size_t expert_alignment, double timeout_s, int host_partial_sums) {
  auto box = std::make_shared<MoeBox>();
  box->comm = comm.handle();
  cfxComm_t c = box->comm_or_throw();
  if (expert_to_rank && static_cast<int>(expert_to_rank->size()) != num_experts)
    invalid_argument("MoE: expert_to_rank has " + std::to_string(expert_to_rank->size()) + " entries for " +
                     std::to_string(num_experts) + " experts");
  std::vector<int> placement = expert_to_rank.value_or(std::vector<int>{});
  box->cfg.size = sizeof box->cfg;
  box->cfg.num_experts = num_experts;
  box->cfg.top_k = top_k;
  box->cfg.hidden = hidden;
  box->cfg.datatype = dtype;
  box->cfg.max_tokens_per_rank = max_tokens_per_rank;
  box->cfg.expert_to_rank = placement.empty() ? nullptr : placement.data();
  box->cfg.capacity_factor = capacity_factor;
  box->cfg.expert_alignment = expert_alignment;
  box->cfg.timeout_ms = static_cast<int64_t>(timeout_s * 1000.0);
  box->cfg.host_partial_sums = host_partial_sums;
  box->elem = cfxTypeSize(dtype);
  cfxResult_t rc;
  {
    py::gil_scoped_release nogil;  // collective: waits for every rank
    rc = cfxMoeCreate(&box->moe, &box->cfg, c);
  }
  box->cfg.expert_to_rank = nullptr;  // the library keeps its own copy
  check(rc, c, "cfxMoeCreate");
  box->local.resize(static_cast<size_t>(num_experts));
  int count = 0;
  check(cfxMoeLocalExperts(box->moe, box->local.data(), &count), c, "cfxMoeLocalExperts");
  box->local.resize(static_cast<size_t>(count));
  return box;
}

std::unique_ptr<MoeHandle> dispatch(const MoePtr& m, py::handle tokens, size_t ntokens, py::handle topk_idx,
                                    py::handle topk_weights) {
  cfxComm_t c = m->comm_or_throw();
  const size_t k = static_cast<size_t>(m->cfg.top_k);
  Checked t = checked(tokens, false, m->cfg.datatype, "tokens", ntokens * m->cfg.hidden, "ntokens x hidden");
  py::buffer_info ii = acquire(topk_idx, false, "topk_idx");
  BufferView iv = describe(ii, std::nullopt, "topk_idx");
  if (iv.dtype != cfxInt32) invalid_argument("topk_idx must hold int32 expert ids");
  expect_count(iv, ntokens * k, "topk_idx", "ntokens x top_k");
  std::optional<py::buffer_info> wi;
  const float* weights = float_weights(topk_weights, ntokens * k, "topk_weights", &wi);
  std::vector<size_t> per_expert(m->local.size());
  cfxMoeHandle_t h = nullptr;
  cfxResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = cfxMoeDispatch(m->moe, t.view.ptr, ntokens, static_cast<const int32_t*>(iv.ptr), weights, nullptr, 0,
                        per_expert.data(), &h);
  }
  check(rc, c, "cfxMoeDispatch");
  return std::make_unique<MoeHandle>(m, h, ntokens, std::move(per_expert));
}

// The communicator a call on handle h runs on, once h is known to be this layer's.
cfxComm_t layer_comm(const MoePtr& m, const MoeHandle& h) {
  if (h.moe() != m) invalid_argument("MoE handle comes from another MoE layer");
  return m->comm_or_throw();
}

// Each collective of the handle checks the handle and the buffers' lengths,
// then runs without the GIL.
void combine(const MoePtr& m, const MoeHandle& h, py::handle expert_out, py::handle out, py::handle weights,
             bool ones) {
  cfxComm_t c = layer_comm(m, h);
  const size_t hidden = m->cfg.hidden;
  Checked e = checked(expert_out, false, m->cfg.datatype, "expert_out", h.rows() * hidden, "rows x hidden");
  Checked o = checked(out, true, m->cfg.datatype, "out", h.ntokens() * hidden, "ntokens x hidden");
  std::optional<py::buffer_info> wi;
  const float* w = float_weights(weights, h.ntokens() * static_cast<size_t>(m->cfg.top_k), "weights", &wi);
  cfxMoeHandle_t hh = h.get();
  cfxResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = (w == nullptr && !ones) ? cfxMoeCombine(m->moe, hh, e.view.ptr, o.view.ptr)
                                 : cfxMoeCombineWeighted(m->moe, hh, e.view.ptr, w, o.view.ptr);
  }
  check(rc, c, "cfxMoeCombine");
}

void replay(const MoePtr& m, const MoeHandle& h, py::handle tokens, py::handle out, bool scale) {
  cfxComm_t c = layer_comm(m, h);
  const size_t hidden = m->cfg.hidden;
  Checked t = checked(tokens, false, m->cfg.datatype, "tokens", h.ntokens() * hidden, "ntokens x hidden");
  Checked o = checked(out, true, m->cfg.datatype, "out", h.rows() * hidden, "rows x hidden");
  cfxMoeHandle_t hh = h.get();
  cfxResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = cfxMoeDispatchReplay(m->moe, hh, t.view.ptr, o.view.ptr, scale ? 1 : 0);
  }
  check(rc, c, "cfxMoeDispatchReplay");
}

void gather_rows(const MoePtr& m, const MoeHandle& h, py::handle expert_out, py::handle out) {
  cfxComm_t c = layer_comm(m, h);
  const size_t hidden = m->cfg.hidden, k = static_cast<size_t>(m->cfg.top_k);
  Checked e = checked(expert_out, false, m->cfg.datatype, "expert_out", h.rows() * hidden, "rows x hidden");
  Checked o = checked(out, true, m->cfg.datatype, "out", h.ntokens() * k * hidden, "ntokens x top_k x hidden");
  cfxMoeHandle_t hh = h.get();
  cfxResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = cfxMoeGatherRows(m->moe, hh, e.view.ptr, o.view.ptr);
  }
  check(rc, c, "cfxMoeGatherRows");
}

}  // namespace

void bind_moe(py::module_& m) {
  py::class_<MoeHandle>(m, "_MoeHandle", "One dispatch's routing (conflux.MoE.dispatch returns it inside a Dispatched).")
      .def_property_readonly("rows", &MoeHandle::rows, "Rows this rank's experts received (with alignment padding).")
      .def_property_readonly("ntokens", &MoeHandle::ntokens, "Tokens this rank dispatched.")
      .def_property_readonly("tokens_per_expert", &MoeHandle::tokens_per_expert,
                             "Rows per local expert, in ascending expert id.")
      .def("block_offsets", &MoeHandle::block_offsets, "Where each local expert's block starts, in rows.")
      .def("stats", &MoeHandle::stats, "Bytes sent, received and committed by this handle's calls.")
      .def("dropped", &MoeHandle::dropped, "Token-expert pairs the capacity policy dropped.")
      .def("copy_rows", &MoeHandle::copy_rows, "Copy the dispatched rows into out (rows x hidden).", py::arg("out"))
      .def("free", &MoeHandle::free, "Release the routing now (also done when garbage collected).");

  py::class_<MoeBox, MoePtr>(m, "_Moe", "A MoE layer's communication (use conflux.MoE).")
      .def(py::init(&create), py::arg("comm"), py::arg("num_experts"), py::arg("top_k"), py::arg("hidden"),
           py::arg("dtype"), py::arg("max_tokens_per_rank"), py::arg("expert_to_rank") = py::none(),
           py::arg("capacity_factor") = 0.0, py::arg("expert_alignment") = 0, py::arg("timeout") = 0.0,
           py::arg("host_partial_sums") = 0)
      .def_property_readonly("local_experts", [](const MoeBox& b) { return b.local; },
                             "This rank's experts, ascending.")
      .def("dispatch", &dispatch, py::arg("tokens"), py::arg("ntokens"), py::arg("topk_idx"),
           py::arg("topk_weights") = py::none())
      .def("combine", &combine, py::arg("handle"), py::arg("expert_out"), py::arg("out"),
           py::arg("weights") = py::none(), py::arg("ones") = false)
      .def("dispatch_replay", &replay, py::arg("handle"), py::arg("tokens"), py::arg("out"),
           py::arg("scale_by_weights") = false)
      .def("gather_rows", &gather_rows, py::arg("handle"), py::arg("expert_out"), py::arg("out"));
}

}  // namespace conflux_py
