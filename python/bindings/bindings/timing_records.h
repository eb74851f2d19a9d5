// Timing records (one micro-batch's sequence lengths and seconds) from the
// two lists seqflow.balance.timing_columns makes of the user's records.
#pragma once

#include <vector>

#include "bindings/arrays.h"
#include "seqflow/calibration.h"

namespace seqflow::bindings {

inline std::vector<TimingRecord> timing_records(const std::vector<Int64Input>& lengths,
                                                const std::vector<double>& seconds) {
  std::vector<TimingRecord> records(lengths.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const auto span = as_span(lengths[i]);
    records[i] = {{span.begin(), span.end()}, seconds.at(i)};
  }
  return records;
}

}  // namespace seqflow::bindings
