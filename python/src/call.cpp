#include "call.h"

#include "errors.h"

namespace conflux_py {

cfxResult_t launch(const Call& c, cfxComm_t comm, cfxRequest_t* rq) {
  const bool nb = rq != nullptr;
  switch (c.kind) {
    case Kind::kAllReduce:
      return nb ? cfxIallReduce(c.send, c.recv, c.count, c.dtype, c.op, comm, rq)
                : cfxAllReduce(c.send, c.recv, c.count, c.dtype, c.op, comm);
    case Kind::kBroadcast:
      return nb ? cfxIbroadcast(c.send, c.recv, c.count, c.dtype, c.root, comm, rq)
                : cfxBroadcast(c.send, c.recv, c.count, c.dtype, c.root, comm);
    case Kind::kReduce:
      return nb ? cfxIreduce(c.send, c.recv, c.count, c.dtype, c.op, c.root, comm, rq)
                : cfxReduce(c.send, c.recv, c.count, c.dtype, c.op, c.root, comm);
    case Kind::kAllGather:
      return nb ? cfxIallGather(c.send, c.recv, c.count, c.dtype, comm, rq)
                : cfxAllGather(c.send, c.recv, c.count, c.dtype, comm);
    case Kind::kReduceScatter:
      return nb ? cfxIreduceScatter(c.send, c.recv, c.count, c.dtype, c.op, comm, rq)
                : cfxReduceScatter(c.send, c.recv, c.count, c.dtype, c.op, comm);
    case Kind::kAlltoAll:
      return nb ? cfxIalltoAll(c.send, c.recv, c.count, c.dtype, comm, rq)
                : cfxAlltoAll(c.send, c.recv, c.count, c.dtype, comm);
    case Kind::kAlltoAllv:
      return nb ? cfxIalltoAllv(c.send, c.sendcounts.data(), c.sdispls.data(), c.recv, c.recvcounts.data(),
                                c.rdispls.data(), c.dtype, comm, rq)
                : cfxAlltoAllv(c.send, c.sendcounts.data(), c.sdispls.data(), c.recv, c.recvcounts.data(),
                               c.rdispls.data(), c.dtype, comm);
    case Kind::kGather:
      return nb ? cfxIgather(c.send, c.recv, c.count, c.dtype, c.root, comm, rq)
                : cfxGather(c.send, c.recv, c.count, c.dtype, c.root, comm);
    case Kind::kScatter:
      return nb ? cfxIscatter(c.send, c.recv, c.count, c.dtype, c.root, comm, rq)
                : cfxScatter(c.send, c.recv, c.count, c.dtype, c.root, comm);
    case Kind::kSend:
      return nb ? cfxIsend(c.send, c.count, c.dtype, c.root, comm, rq) : cfxSend(c.send, c.count, c.dtype, c.root, comm);
    case Kind::kRecv:
      return nb ? cfxIrecv(c.recv, c.count, c.dtype, c.root, comm, rq) : cfxRecv(c.recv, c.count, c.dtype, c.root, comm);
    case Kind::kBarrier:
      return nb ? cfxIbarrier(comm, rq) : cfxBarrier(comm);
  }
  return cfxInternalError;
}

const char* call_name(Kind k) {
  static const char* names[] = {"allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "alltoall",
                                "alltoallv", "gather",    "scatter", "send",     "recv",           "barrier"};
  return names[static_cast<int>(k)];
}

CommHandle::CommHandle(cfxComm_t c) : comm(c) {
  cfxCommUserRank(c, &rank);
  cfxCommCount(c, &nranks);
}

CommHandle::~CommHandle() {
  if (comm == nullptr) return;
  // Destroy waits for the peers; never hold the GIL while doing it.
  py::gil_scoped_release nogil;
  cfxCommDestroy(comm);
}

py::object run_blocking(const CommPtr& comm, Prepared p) {
  if (comm->comm == nullptr) throw CfxError(cfxInvalidUsage, "communicator was destroyed");
  cfxResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = launch(p.call, comm->comm, nullptr);
  }
  check(rc, comm->comm, call_name(p.call.kind));
  return p.result;
}

std::unique_ptr<Request> run_async(const CommPtr& comm, Prepared p) {
  if (comm->comm == nullptr) throw CfxError(cfxInvalidUsage, "communicator was destroyed");
  cfxRequest_t req = nullptr;
  cfxResult_t rc = launch(p.call, comm->comm, &req);  // only enqueues: no need to drop the GIL
  const char* base = call_name(p.call.kind);
  check(rc, comm->comm, (std::string("i") + base).c_str());
  return std::make_unique<Request>(comm, req, std::move(p), base);
}

Request::Request(CommPtr comm, cfxRequest_t req, Prepared prepared, const char* name)
    : comm_(std::move(comm)), req_(req), buffers_(std::move(prepared.buffers)),
      result_(std::move(prepared.result)), name_(name) {}

Request::~Request() {
  if (req_ != nullptr) {
    // Freeing an unfinished request waits for it: the buffers must outlive it.
    py::gil_scoped_release nogil;
    cfxRequestFree(req_);
  }
}

void Request::finish(cfxResult_t rc) {
  if (!done_) {
    done_ = true;
    rc_ = rc;
    if (rc != cfxSuccess) {
      error_ = cfxGetLastError(comm_->comm);
      if (error_.empty()) error_ = cfxGetErrorString(rc);
    }
    {
      py::gil_scoped_release nogil;
      cfxRequestFree(req_);
    }
    req_ = nullptr;
    buffers_.clear();
  }
  if (rc_ != cfxSuccess) throw CfxError(rc_, std::string(name_) + ": " + error_);
}

py::object Request::wait() {
  if (!done_) {
    cfxResult_t rc;
    {
      py::gil_scoped_release nogil;
      rc = cfxWait(req_);
    }
    finish(rc);
  }
  finish(rc_);
  return result_;
}

bool Request::test() {
  if (done_) {
    finish(rc_);
    return true;
  }
  int flag = 0;
  cfxResult_t rc = cfxTest(req_, &flag);
  if (!flag) {
    if (rc != cfxSuccess) finish(rc);  // cfxTest itself failed
    return false;
  }
  finish(rc);
  return true;
}

}  // namespace conflux_py
