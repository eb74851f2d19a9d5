// What a field of a put may hold, and the rule that turns each kind into a
// native Column (seqflow._convert keeps only what needs torch or tensordict).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "bindings/checks.h"
#include "bindings/submodules.h"
#include "bindings/tensor_conversion.h"
#include "seqflow/error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

// The numpy kinds of the dtypes seqflow stores (not complex, datetime, structured, ...),
// and those a put stores as one non-tensor value per row (objects, str, bytes).
constexpr std::string_view kStorableKinds = "biuf";
constexpr std::string_view kNonTensorKinds = "OUS";

std::string quoted(const std::string& field) { return repr_text(nb::str(field.c_str())); }

char kind_of(nb::handle array) { return nb::cast<std::string>(array.attr("dtype").attr("kind"))[0]; }

bool is_non_tensor_array(nb::handle array) { return kNonTensorKinds.find(kind_of(array)) != std::string_view::npos; }

// A number a list field stores densely: numbers.Number or numpy.bool_, but not complex.
bool is_number(nb::handle item) {
  static CachedAttribute number("numbers", "Number");
  static CachedAttribute numpy_bool("numpy", "bool_");
  return !PyComplex_Check(item.ptr()) &&
         (PyObject_IsInstance(item.ptr(), number.ptr()) == 1 || PyObject_IsInstance(item.ptr(), numpy_bool.ptr()) == 1);
}

// A numpy array, or a tensor the caller made a contiguous CPU one (any DLPack producer).
bool is_array(nb::handle item) { return is_ndarray(item) || nb::hasattr(item, "__dlpack__"); }

// A C-contiguous array in this machine's byte order (DLPack carries no other),
// refusing dtypes seqflow does not store.
nb::object native_order(nb::handle array, const std::string& field) {
  static CachedAttribute ascontiguousarray("numpy", "ascontiguousarray");
  nb::object dtype = array.attr("dtype");
  if (kStorableKinds.find(kind_of(array)) == std::string_view::npos) {
    throw_unstorable_dtype(field, str_text(dtype));
  }
  nb::object out = nb::borrow(array);
  if (!nb::cast<bool>(dtype.attr("isnative"))) out = out.attr("astype")(dtype.attr("newbyteorder")("="));
  return ascontiguousarray(out);
}

// One value per row of a numpy array of objects, strings or bytes.
nb::object array_rows(nb::handle array) {
  if (nb::cast<int>(array.attr("ndim")) == 1) return nb::steal(PySequence_List(array.ptr()));
  return array.attr("tolist")();
}

// A plain list: arrays (a tensor field of varying shapes), numbers (dense), or non-tensor values.
Column list_column(const std::string& field, nb::handle value, bool allow_pickle) {
  nb::list items = nb::steal<nb::list>(PySequence_List(value.ptr()));
  if (!items.is_valid()) throw nb::python_error();
  if (items.size() == 0) {
    throw_invalid("field " + quoted(field) + " is an empty list; a field needs one value per sample");
  }
  const auto all_of = [&items](bool (*test)(nb::handle)) {
    for (nb::handle item : items) {
      if (!test(item)) return false;
    }
    return true;
  };
  if (all_of(is_array)) {
    nb::list plain;
    for (nb::handle item : items) plain.append(is_ndarray(item) ? native_order(item, field) : nb::borrow(item));
    return ragged_column(field, plain);
  }
  if (!all_of(is_number)) return object_column(field, items, allow_pickle);
  static CachedAttribute asarray("numpy", "asarray");
  nb::object array = asarray(items);
  if (kind_of(array) == 'O') {  // an int beyond 64 bits
    throw_invalid("field " + quoted(field) + " holds numbers that fit no 64-bit dtype, got " +
                  repr_text(nb::steal(PyList_GetSlice(items.ptr(), 0, 8))));
  }
  return dense_column(field, nb::cast<AnyArray>(native_order(array, field)), false);
}

Column column(const std::string& field, nb::handle value, bool borrow, bool allow_pickle) {
  if (is_ndarray(value)) {
    if (nb::cast<int>(value.attr("ndim")) == 0) {
      throw_invalid("field " + quoted(field) + " is a 0-d array; the first dimension must be the batch");
    }
    if (is_non_tensor_array(value)) return object_column(field, array_rows(value), allow_pickle);
    return dense_column(field, nb::cast<AnyArray>(native_order(value, field)), borrow);
  }
  if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) return list_column(field, value, allow_pickle);
  throw_invalid("field " + quoted(field) + " is a " + type_name_of(value) +
                "; give a tensor, an array or a list with one value per sample");
}

// One value per row of what a tensordict NonTensorData holds (`data`, for a
// batch of `rows`, None without a batch size).
nb::object non_tensor_rows(const std::string& field, nb::handle data, std::optional<int64_t> rows) {
  if (is_ndarray(data) || PyList_Check(data.ptr()) || PyTuple_Check(data.ptr())) {
    const auto size = static_cast<int64_t>(nb::len(data));
    if (rows && size != *rows) {
      throw_invalid("field " + quoted(field) + ": NonTensorData holds " + std::to_string(size) +
                    " values for a batch of " + std::to_string(*rows) +
                    " rows; give one value per row (for the same list in every row, use a NonTensorStack of it)");
    }
    return is_ndarray(data) ? array_rows(data) : nb::steal(PySequence_List(data.ptr()));
  }
  if (!rows) {
    throw_invalid("field " + quoted(field) +
                  ": NonTensorData without a batch size holds one value; give one value per row (a list, or a "
                  "NonTensorStack)");
  }
  nb::list out;
  for (int64_t i = 0; i < *rows; ++i) out.append(data);
  return out;
}

// Refuses tensors that hold no plain strided data, before torch's own message
// would name neither the field nor the cause. `layout`, `dtype`: torch's names.
void check_tensor(const std::string& field, const std::string& device, const std::string& layout,
                  const std::string& dtype, bool quantized, bool nested) {
  if (device == "meta")
    throw_invalid("field " + quoted(field) + " is a tensor on the meta device, which holds no data");
  if (layout != "torch.strided" && !nested) {
    throw_invalid("field " + quoted(field) + " is a tensor of layout " + layout + "; give a dense (strided) tensor");
  }
  const std::string name = dtype.starts_with("torch.") ? dtype.substr(6) : dtype;
  const bool storable = [&name] {
    try {
      parse_dtype(name);
      return true;
    } catch (const Error&) {
      return false;
    }
  }();
  if (quantized || !storable) throw_unstorable_dtype(field, name);
}

nb::list fields_of(nb::handle data, const std::string& parameter) {
  if (!is_mapping(data)) throw_wrong_type(data, parameter, "a TensorDict or a dict of fields");
  nb::list pairs = nb::steal<nb::list>(PySequence_List(nb::object(data.attr("items")()).ptr()));
  if (!pairs.is_valid()) throw nb::python_error();
  for (nb::handle pair : pairs) check_name(pair[0], "field name");
  return pairs;
}

// Columns of one sample (kv_put): a numeric array is the sample's row, any
// other value (a number too) one non-tensor value, as in TransferQueue.
Column sample_column(const std::string& field, nb::handle value, bool borrow, bool allow_pickle) {
  if (is_ndarray(value) && !is_non_tensor_array(value)) {
    return column(field, value.attr("__getitem__")(nb::none()), borrow, allow_pickle);
  }
  nb::list row;
  row.append(value);
  return object_column(field, row, allow_pickle);
}

}  // namespace

void bind_column_input(nb::module_ m) {
  m.def("column", &column, "field"_a, "value"_a.none(), "borrow"_a = false, "allow_pickle"_a = false,
        "A native Column of one field of a put: a numpy array (samples along the first dimension; one of "
        "objects, str or bytes is one non-tensor value per row), a list of arrays or tensors of varying shape, a "
        "list of numbers, or a list of non-tensor values. Tensor fields are copied once into a buffer the storage "
        "owns; with borrow (remote clients, whose put has sent every byte when it returns) arrays are sent from "
        "their own memory. Non-tensor values are stored without pickle when they are plain (None, bool, int, "
        "float, str, bytes, lists, tuples and str-keyed dicts of them; a tuple reads back as a list); anything "
        "else needs allow_pickle=True on both sides.");
  m.def("sample_column", &sample_column, "field"_a, "value"_a.none(), "borrow"_a = false, "allow_pickle"_a = false,
        "A Column of one sample's value (kv_put): a numeric array is the sample's row; any other value (a number "
        "too) is one non-tensor value, as in TransferQueue.");
  m.def("non_tensor_rows", &non_tensor_rows, "field"_a, "data"_a.none(), "rows"_a.none(),
        "One value per row of a tensordict NonTensorData's data: a list or an array of one value per row is read "
        "per row, as TransferQueue reads it; anything else is that value in every row.");
  m.def("check_tensor", &check_tensor, "field"_a, "device"_a, "layout"_a, "dtype"_a, "quantized"_a, "nested"_a,
        "Refuses a tensor on the meta device, of a layout other than strided (unless nested) or of a dtype seqflow "
        "does not store, naming the field.");
  m.def("fields_of", &fields_of, "data"_a.none(), "parameter"_a = "data",
        "(name, value) of each field of a mapping (the caller's `parameter`), the names checked.");
}

}  // namespace seqflow::bindings
