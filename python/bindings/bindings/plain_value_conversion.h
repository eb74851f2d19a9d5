// Plain Python values as MessagePack, so that non-tensor fields (strings,
// numbers, lists and dicts: what verl's non_tensor_batch holds) travel and
// rest without pickle, which would run code from whoever wrote the bytes.
#pragma once

#include <nanobind/nanobind.h>

#include "common/msgpack_writer.h"

namespace seqflow::bindings {

// What is not plain in a value: an object, a container nested too deep, or
// a dict key that is no str (`is_key`). Empty when the value is plain.
struct NotPlain {
  nanobind::handle part;
  bool is_key = false;
  explicit operator bool() const { return part.is_valid(); }
};

// Writes `value` when it is plain: None, bool, int (64-bit), float, str,
// bytes, or a list, tuple or str-keyed dict of plain values nested at most
// kMaxDecodeNesting deep. Otherwise returns the first part that is not
// plain, with `out` partly written. A tuple reads back as a list, a str or
// bytes subclass (numpy's str_, bytes_) as str or bytes, a float subclass
// (numpy's float64) as float.
NotPlain write_plain_value(MsgpackWriter& out, nanobind::handle value);

}  // namespace seqflow::bindings
