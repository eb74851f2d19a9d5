// Columns: one put's values of one field, sharing one buffer.
#include <string>

#include "seqflow/error.h"
#include "seqflow/tensor.h"
#include "storage/value_check.h"

namespace seqflow {
namespace {

std::string column_name(const Column& column) { return "column \"" + column.field + "\""; }

}  // namespace

SampleView Column::sample(size_t i) const {
  if (i >= sample_count()) {
    throw_invalid(column_name(*this) + ": sample " + std::to_string(i) + " out of range; it holds " +
                  std::to_string(sample_count()) + " samples");
  }
  SampleView view;
  view.buffer = buffer;
  view.offset = offsets[i];
  view.nbytes = offsets[i + 1] - offsets[i];
  view.dtype = dtype;
  view.shape = shape_of(i);
  view.is_object = is_object;
  return view;
}

void Column::validate() const {
  if (field.empty()) throw_invalid("column field name is empty");
  const std::string name = column_name(*this);
  if (offsets.empty()) throw_invalid(name + ": offsets is empty; it needs samples + 1 entries");
  const size_t n = sample_count();
  if (shapes.size() != 1 && shapes.size() != n) {
    throw_invalid(name + ": " + std::to_string(shapes.size()) + " shapes for " + std::to_string(n) +
                  " samples; give 1 (fixed shape) or one per sample");
  }
  if (n == 0) return;
  if (!buffer) throw_invalid(name + ": buffer is null");
  if (offsets[0] > buffer->size) {
    throw_invalid(name + ": offsets[0] = " + std::to_string(offsets[0]) + " lies beyond the buffer of " +
                  std::to_string(buffer->size) + " bytes");
  }
  // Built only on failure: validation runs once per sample of every put.
  auto where = [&name](size_t i) { return name + ", sample " + std::to_string(i); };
  for (size_t i = 0; i < n; ++i) {
    if (offsets[i + 1] < offsets[i]) {
      throw_invalid(where(i) + ": offsets decrease (" + std::to_string(offsets[i]) + " then " +
                    std::to_string(offsets[i + 1]) + ")");
    }
    if (offsets[i + 1] > buffer->size) {
      throw_invalid(where(i) + ": ends at byte " + std::to_string(offsets[i + 1]) + ", beyond the buffer of " +
                    std::to_string(buffer->size) + " bytes");
    }
    if (auto problem = value_problem(dtype, is_object, shape_of(i), offsets[i + 1] - offsets[i])) {
      throw_invalid(where(i) + ": " + *problem);
    }
  }
}

}  // namespace seqflow
