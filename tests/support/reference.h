// Reference results for every collective: deterministic inputs per
// (rank, index), expected outputs computed independently of conflux in
// double precision. Inputs are small integers so every datatype represents
// every partial result exactly, whatever order the algorithm reduces in.
#pragma once

#include "core/check_data.h"
#include "core/coll.h"

#include <conflux/conflux.h>

#include <cstdint>
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

// Runs one case on this rank and returns "" or a description of the first
// wrong elements (and the library's error, if the call failed).
std::string run_and_check(cfxComm_t comm, int rank, int nranks, const CollCase& c);

}  // namespace conflux::test
