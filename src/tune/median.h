// The median of a few timings, for the calibration's measurements.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace conflux::tune {

// The median of a few batches' times (the upper middle one of an even
// count): a batch the machine interrupted does not count. Not empty.
inline double median_of(std::vector<double> batches) {
  const auto mid = batches.begin() + static_cast<std::ptrdiff_t>(batches.size() / 2);
  std::nth_element(batches.begin(), mid, batches.end());
  return *mid;
}

}  // namespace conflux::tune
