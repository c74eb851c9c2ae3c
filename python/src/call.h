// One collective or point-to-point call, described as data, so each Python
// method is written once and runs either blocking (cfxAllReduce) or
// nonblocking (cfxIallReduce) from the same description.
#pragma once

#include <conflux/conflux.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

namespace conflux_py {

namespace py = pybind11;

enum class Kind { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAlltoAll, kAlltoAllv,
                  kGather, kScatter, kSend, kRecv, kBarrier };

struct Call {
  Kind kind = Kind::kBarrier;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  cfxDataType_t dtype = cfxUint8;
  cfxRedOp_t op = cfxSum;
  int root = 0;  // root for rooted collectives, peer for send/recv
  std::vector<size_t> sendcounts, sdispls, recvcounts, rdispls;  // alltoallv only
};

// Issues the call; request == nullptr means the blocking form.
cfxResult_t launch(const Call& c, cfxComm_t comm, cfxRequest_t* request);
const char* call_name(Kind k);

// Owns a communicator; shared by the Python Comm and any Request still in
// flight, so destroying the Python object never frees a busy communicator.
struct CommHandle {
  explicit CommHandle(cfxComm_t c);
  ~CommHandle();
  cfxComm_t comm = nullptr;
  int rank = 0;
  int nranks = 0;
};
using CommPtr = std::shared_ptr<CommHandle>;

// A call ready to run: the description plus the Python buffers it touches
// (held, exported, until the call completes) and the object to return.
struct Prepared {
  Call call;
  std::vector<py::buffer_info> buffers;
  py::object result = py::none();
};

// Result of a nonblocking call. wait()/test() raise conflux.Error on failure.
class Request {
 public:
  Request(CommPtr comm, cfxRequest_t req, Prepared prepared, const char* name);
  ~Request();
  py::object wait();
  bool test();
  bool done() const { return done_; }

 private:
  void finish(cfxResult_t rc);  // frees the request, drops buffers, throws on error
  CommPtr comm_;
  cfxRequest_t req_;
  std::vector<py::buffer_info> buffers_;
  py::object result_;
  const char* name_;
  bool done_ = false;
  cfxResult_t rc_ = cfxSuccess;
  std::string error_;
};

py::object run_blocking(const CommPtr& comm, Prepared p);
std::unique_ptr<Request> run_async(const CommPtr& comm, Prepared p);

}  // namespace conflux_py
