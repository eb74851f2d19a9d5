// seqflow.BatchMeta's field_schema: entries as the engine reports them, for
// data given in Python (add_fields), the dtype names the engine reads, copies
// and the schema of joined batches.
#include "bindings/field_schema.h"

#include <nanobind/stl/string.h>

#include <array>
#include <string>

#include "bindings/checks.h"
#include "bindings/deep_copy.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

// The engine's dtype names (numpy's spelling, and torch's for bfloat16).
constexpr std::array<std::string_view, 10> kDtypeNames{"bool",  "uint8",   "int8",     "int16",   "int32",
                                                       "int64", "float16", "bfloat16", "float32", "float64"};

std::string module_of(nb::handle value) { return nb::cast<std::string>(value.type().attr("__module__")); }

bool is_instance(nb::handle value, nb::handle type) {
  const int is = PyObject_IsInstance(value.ptr(), type.ptr());
  if (is < 0) throw nb::python_error();
  return is == 1;
}

nb::object get(nb::handle mapping, const char* key, nb::handle fallback = nb::none()) {
  return mapping.attr("get")(key, fallback);
}

bool truthy(nb::handle value) {
  const int is = PyObject_IsTrue(value.ptr());
  if (is < 0) throw nb::python_error();
  return is == 1;
}

nb::tuple tuple_of(nb::handle values) { return nb::steal<nb::tuple>(PySequence_Tuple(values.ptr())); }

// The shape the engine reports for samples of these shapes: -1 where they differ.
nb::tuple common_shape(nb::handle shapes) {
  nb::list all = list_of(shapes);
  nb::handle first = all[0];
  size_t longest = 0;
  bool same_rank = true;
  for (nb::handle shape : all) {
    longest = std::max(longest, nb::len(shape));
    same_rank = same_rank && nb::len(shape) == nb::len(first);
  }
  nb::list out;
  for (size_t k = 0; k < (same_rank ? nb::len(first) : longest); ++k) {
    bool same = same_rank;
    for (nb::handle shape : all) same = same && nb::object(shape[k]).equal(first[k]);
    out.append(same ? nb::object(first[k]) : nb::int_(-1));
  }
  return tuple_of(out);
}

nb::dict entry(nb::handle dtype, nb::object shape, bool nested, bool non_tensor) {
  nb::dict out;
  out["dtype"] = dtype_name(dtype);
  out["shape"] = shape;
  out["is_nested"] = nested;
  out["is_non_tensor"] = non_tensor;
  return out;
}

nb::dict nested_entry(nb::handle dtype, nb::list shapes) {
  nb::dict out = entry(dtype, common_shape(shapes), true, false);
  out["per_sample_shapes"] = shapes;
  return out;
}

[[noreturn]] void throw_count(nb::handle name, const std::string& count, int64_t rows) {
  throw nb::value_error(
      ("field " + repr_text(name) + " holds " + count + " samples, the batch " + std::to_string(rows)).c_str());
}

nb::list shapes_of(nb::handle samples) {
  nb::list shapes;
  for (nb::handle sample : samples) shapes.append(tuple_of(sample.attr("shape")));
  return shapes;
}

// The schema of one field of `rows` samples, as the engine would report it.
nb::dict field_entry(nb::handle name, nb::handle given, int64_t rows) {
  nb::object value = nb::borrow(given);
  const std::string type = type_name_of(value);
  if (nb::hasattr(value, "tolist") && (type == "NonTensorStack" || type == "NonTensorData")) {
    value = value.attr("tolist")();
  }
  if (module_of(value).starts_with("torch") && nb::hasattr(value, "is_nested")) {
    const bool nested = truthy(value.attr("is_nested"));
    nb::object samples = nested ? nb::object(list_of(nb::object(value.attr("unbind")()))) : nb::none();
    const int64_t count = nested                                   ? static_cast<int64_t>(nb::len(samples))
                          : nb::cast<int64_t>(value.attr("dim")()) ? nb::cast<int64_t>(value.attr("shape")[0])
                                                                   : 0;
    if (count != rows) throw_count(name, std::to_string(count), rows);
    if (nested) return nested_entry(value.attr("dtype"), shapes_of(samples));
    return entry(value.attr("dtype"), tuple_of(value.attr("shape")[nb::slice(nb::int_(1), nb::none(), nb::none())]),
                 false, false);
  }
  static CachedAttribute ndarray_type("numpy", "ndarray");
  const bool ndarray = is_instance(value, ndarray_type);
  if (ndarray &&
      std::string("OUS").find(nb::cast<std::string>(value.attr("dtype").attr("kind"))) == std::string::npos) {
    const bool scalar = nb::cast<int>(value.attr("ndim")) == 0;
    if (scalar || nb::cast<int64_t>(value.attr("shape")[0]) != rows) {
      throw_count(name, scalar ? std::string("no") : str_text(value.attr("shape")[0]), rows);
    }
    return entry(value.attr("dtype"), tuple_of(value.attr("shape")[nb::slice(nb::int_(1), nb::none(), nb::none())]),
                 false, false);
  }
  if (!ndarray && !PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr())) {
    throw nb::value_error(
        ("field " + repr_text(name) + " is a " + type_name_of(value) + "; give a tensor, an array or a list").c_str());
  }
  nb::list items = list_of(value);
  if (static_cast<int64_t>(items.size()) != rows) throw_count(name, std::to_string(items.size()), rows);
  static CachedAttribute number_type("numbers", "Number");
  static CachedAttribute numpy_bool("numpy", "bool_");
  bool arrays = items.size() > 0;
  bool numbers = items.size() > 0;
  for (nb::handle item : items) {
    arrays = arrays && nb::hasattr(item, "shape") && nb::hasattr(item, "dtype");
    numbers =
        numbers && !PyComplex_Check(item.ptr()) && (is_instance(item, number_type) || is_instance(item, numpy_bool));
  }
  if (arrays) return nested_entry(items[0].attr("dtype"), shapes_of(items));
  if (numbers)
    return entry(nb::module_::import_("numpy").attr("asarray")(items).attr("dtype"), nb::tuple(), false, false);
  return entry(nb::none(), nb::none(), false, true);
}

}  // namespace

// "float32" for torch.float32, np.float32, "float32" or "torch.float32";
// other spellings ("torch.float") as they are, for the engine to read.
nb::object dtype_name(nb::handle dtype) {
  if (dtype.is_none()) return nb::none();
  nb::object text = nb::borrow(dtype);
  if (!PyUnicode_Check(dtype.ptr())) {
    try {
      text = module_of(dtype) == "torch" ? nb::object(nb::str(str_text(dtype).c_str()))
                                         : nb::object(nb::module_::import_("numpy").attr("dtype")(dtype).attr("name"));
    } catch (nb::python_error& error) {
      if (!error.matches(PyExc_TypeError) && !error.matches(PyExc_ValueError)) throw;
      return nb::str(str_text(dtype).c_str());
    }
  }
  std::string bare = nb::cast<std::string>(text);
  if (bare.starts_with("torch.")) bare = bare.substr(6);
  for (std::string_view name : kDtypeNames) {
    if (bare == name) return nb::str(bare.c_str());
  }
  return text;
}

// (sample count, field_schema) of a TensorDict or a dict of fields.
nb::tuple schema_of(nb::handle data) {
  nb::list names;
  nb::list values;
  int64_t rows = 0;
  if (nb::hasattr(data, "batch_size") && nb::hasattr(data, "items")) {
    nb::object batch_size = data.attr("batch_size");
    rows = nb::len(batch_size) ? nb::cast<int64_t>(nb::int_(batch_size[0])) : 0;
    for (nb::handle key : nb::object(data.attr("keys")())) {
      names.append(key);
      values.append(data.attr("get")(key));
    }
  } else if (is_mapping(data)) {
    for (nb::handle pair : nb::object(data.attr("items")())) {
      names.append(pair[0]);
      values.append(pair[1]);
    }
    nb::object first = values.size() ? nb::object(values[0]) : nb::object(nb::tuple());
    nb::object shape = nb::getattr(first, "shape", nb::none());
    rows = truthy(shape) ? nb::cast<int64_t>(nb::int_(shape[0])) : static_cast<int64_t>(nb::len(first));
  } else {
    throw nb::type_error(("tensor_dict must be a TensorDict or a dict of fields, got " + type_name_of(data)).c_str());
  }
  nb::dict schema;
  for (size_t i = 0; rows && i < names.size(); ++i) schema[names[i]] = field_entry(names[i], values[i], rows);
  return nb::make_tuple(rows, schema);
}

// The first part's schema; a field nested in any part is nested, and
// per_sample_shapes are joined when any part has them.
nb::dict concat_schema(nb::handle parts) {
  nb::list all = list_of(parts);
  nb::object first = all[0].attr("field_schema");
  nb::dict out;
  for (nb::handle name : first) {
    nb::list entries;
    bool nested = false;
    bool per_sample = false;
    for (nb::handle part : all) {
      entries.append(part.attr("field_schema").attr("get")(name, nb::dict()));
    }
    nb::dict single;
    single[name] = first[name];
    nb::dict merged = nb::cast<nb::dict>(copy_schema(single, nb::none())[name]);
    nb::list shapes;
    for (nb::handle found : entries) {
      nested = nested || truthy(get(found, "is_nested", nb::bool_(false)));
      per_sample = per_sample || !get(found, "per_sample_shapes").is_none();
      shapes.append(get(found, "shape"));
    }
    merged["is_nested"] = nested;
    if (per_sample) {
      shapes = nb::list();
      for (size_t i = 0; i < all.size(); ++i) {
        nb::object own = get(entries[i], "per_sample_shapes");
        const size_t size = nb::cast<size_t>(all[i].attr("size"));
        for (size_t j = 0; j < size; ++j) shapes.append(own.is_none() ? get(entries[i], "shape") : nb::object(own[j]));
      }
      merged["per_sample_shapes"] = shapes;
    }
    if (nested) {
      bool tuples = true;
      for (nb::handle shape : shapes) tuples = tuples && PyTuple_Check(shape.ptr());
      merged["shape"] = tuples ? nb::object(common_shape(shapes)) : nb::none();
    }
    out[name] = merged;
  }
  return out;
}

nb::dict copy_schema(nb::handle schema, nb::handle at) {
  nb::dict out;
  for (nb::handle name : schema) {
    nb::object given = schema[name];
    nb::dict copied;
    for (nb::handle key : given) {
      const bool dtype = PyUnicode_Check(key.ptr()) && nb::cast<std::string>(key) == "dtype";
      copied[key] = dtype ? nb::object(given[key]) : deep_copy(given[key]);
    }
    nb::object shapes = get(copied, "per_sample_shapes");
    if (!at.is_none() && !shapes.is_none()) {
      nb::list picked;
      for (nb::handle i : at) picked.append(shapes[i]);
      copied["per_sample_shapes"] = picked;
    }
    out[name] = copied;
  }
  return out;
}

}  // namespace seqflow::bindings
