// Reference results for every collective: deterministic inputs per
// (rank, index), expected outputs computed independently of conflux in
// double precision. Inputs are small integers so every datatype represents
// every partial result exactly, whatever order the algorithm reduces in.
#pragma once

#include "core/check_data.h"
#include "core/coll.h"

#include <conflux/conflux.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace conflux::test {

// The pattern and typed access live in core/check_data.h (shared with
// `conflux perf -c 1`).
using check::input_value;
using check::load;
using check::reduced_value;
using check::store;

struct CollCase {
  Coll coll = Coll::kAllReduce;
  cfxDataType_t dtype = cfxFloat32;
  cfxRedOp_t op = cfxSum;
  size_t count = 0;
  int root = 0;
  bool in_place = false;
  std::string str() const;
};

// When on, run_and_check puts its buffers in cfxMemAlloc memory (the
// intra-host path then maps peers' buffers instead of process_vm_readv).
void use_shared_buffers(bool on);
// When on (with shared buffers), run_and_check also registers its buffers
// with the communicator (cfxCommRegister) for the call.
void use_registered_buffers(bool on);
// Called before each case run_and_check runs (tests force an algorithm per
// case with it); none by default.
void set_before_each_case(std::function<void(cfxComm_t, int nranks, const CollCase&)> hook);

// Runs one case on this rank and returns "" or a description of the first
// wrong elements (and the library's error, if the call failed).
std::string run_and_check(cfxComm_t comm, int rank, int nranks, const CollCase& c);

// The small-count part of the correctness matrix: every reducing collective
// x reduce_types x ops, every data-moving one x move_types, counts 0, 1, 7,
// 13, 1031 and 5n+3, in and out of place, roots varying. "" or the failures.
std::string run_small_matrix(cfxComm_t comm, int rank, int nranks, std::span<const cfxDataType_t> reduce_types,
                             std::span<const cfxRedOp_t> ops, std::span<const cfxDataType_t> move_types);

}  // namespace conflux::test
