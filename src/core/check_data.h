// The deterministic data pattern behind result checking, shared by
// `conflux perf -c 1` and the test suite: each rank's input element i is a
// small integer derived from (rank, i), so every datatype represents every
// partial reduction exactly, whatever order an algorithm reduces in, and the
// expected output can be computed directly.
#pragma once

#include <conflux/conflux.h>

#include <cstddef>

namespace conflux::check {

// Input element `index` of `rank` (1..11; 1 or 2 for Prod, so products stay exact).
double input_value(int rank, size_t index, cfxRedOp_t op);
// Element i of a typed buffer, written from / read as a double.
void store(void* buf, size_t i, cfxDataType_t t, double value);
double load(const void* buf, size_t i, cfxDataType_t t);
// `value` rounded as type t would store it.
double as_type(double value, cfxDataType_t t);
// The reduction of all ranks' inputs at `index`, as the library defines it
// (Avg: truncating for integers, divided in float for 16/32-bit floats).
double reduced_value(int nranks, size_t index, cfxRedOp_t op, cfxDataType_t t);

}  // namespace conflux::check
