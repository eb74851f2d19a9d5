// Checks of seqflow.KVBatchMeta's contents and of its selections and joins,
// with TransferQueue 0.1.11's messages.
#include <nanobind/stl/string.h>

#include <string>

#include "bindings/checks.h"
#include "bindings/submodules.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

[[noreturn]] void throw_value_error(const std::string& message) { throw nb::value_error(message.c_str()); }

nb::list list_of(nb::handle values) { return nb::steal<nb::list>(PySequence_List(values.ptr())); }

bool has_duplicates(nb::handle values) {
  nb::object unique = nb::steal(PySet_New(values.ptr()));
  if (!unique.is_valid()) throw nb::python_error();
  return nb::len(unique) != nb::len(values);
}

nb::list listed(nb::handle value, const char* name) {
  const bool iterable = PyObject_HasAttrString(value.ptr(), "__iter__") == 1;
  if (PyUnicode_Check(value.ptr()) || PyBytes_Check(value.ptr()) || is_mapping(value) || !iterable) {
    throw nb::type_error((std::string(name) + " must be a list, got " + repr_text(value)).c_str());
  }
  return list_of(value);
}

// (keys, tags, fields) as lists (fields None when None): one tag per key, no
// key or field twice.
nb::tuple validated(nb::handle keys, nb::handle tags, nb::handle fields) {
  nb::list key_list = listed(keys, "keys");
  nb::list tag_list = listed(tags, "tags");
  if (key_list.size() != tag_list.size()) {
    throw_value_error("keys and tags must have same length, but got " + std::to_string(key_list.size()) + " and " +
                      std::to_string(tag_list.size()));
  }
  if (has_duplicates(key_list)) {
    nb::list twice;
    for (nb::handle key : key_list) {
      if (PySequence_Count(key_list.ptr(), key.ptr()) > 1) twice.append(key);
    }
    nb::object sorted = nb::module_::import_("builtins").attr("sorted")(nb::steal(PySet_New(twice.ptr())));
    throw_value_error("Got duplicated keys: " + repr_text(sorted));
  }
  nb::object field_list = nb::none();
  if (!fields.is_none()) {
    if (PyUnicode_Check(fields.ptr())) {
      throw nb::type_error(("fields must be a list of field names, got " + repr_text(fields)).c_str());
    }
    field_list = list_of(fields);
    if (has_duplicates(field_list)) throw_value_error("Got duplicated fields: " + repr_text(field_list));
  }
  return nb::make_tuple(key_list, tag_list, field_list);
}

// (the positions of `selected` (no duplicates) among `keys`, selected as a list).
nb::tuple key_positions(nb::list keys, nb::handle selected) {
  nb::list wanted = list_of(selected);
  if (has_duplicates(wanted)) throw_value_error("Contain duplicate keys: " + repr_text(wanted));
  nb::dict position;
  for (size_t i = 0; i < keys.size(); ++i) position[keys[i]] = i;
  nb::list missing;
  nb::list out;
  for (nb::handle key : wanted) {
    if (position.contains(key)) {
      out.append(position[key]);
    } else {
      missing.append(key);
    }
  }
  if (missing.size()) {
    PyErr_SetString(PyExc_RuntimeError, ("Keys " + repr_text(missing) + " not found in current batch.").c_str());
    throw nb::python_error();
  }
  return nb::make_tuple(out, wanted);
}

// The parts of a concat share the partition and the set of fields.
void check_joinable(nb::list parts) {
  nb::object fields = parts[0].attr("fields");
  nb::object partition_id = parts[0].attr("partition_id");
  nb::object first_set = nb::steal(PySet_New(fields.is_none() ? nb::tuple().ptr() : fields.ptr()));
  for (size_t i = 0; i < parts.size(); ++i) {
    nb::object own = parts[i].attr("fields");
    if (!own.is_none() && !nb::steal(PySet_New(own.ptr())).equal(first_set)) {
      throw_value_error("Field names do not match for concatenation: chunk[0] has " + str_text(fields) + ", chunk[" +
                        std::to_string(i) + "] " + str_text(own));
    }
    nb::object own_partition = parts[i].attr("partition_id");
    if (!own_partition.equal(partition_id)) {
      throw_value_error("Partition do not match for concatenation: chunk[0] is " + repr_text(partition_id) +
                        ", chunk[" + std::to_string(i) + "] " + repr_text(own_partition));
    }
  }
}

}  // namespace

void bind_kv_batch_meta_arguments(nb::module_ m) {
  m.def("validated", &validated, nb::arg("keys").none(), nb::arg("tags").none(), nb::arg("fields").none(),
        "(keys, tags, fields) as lists (fields None when None): one tag per key, no key or field twice.");
  m.def("key_positions", &key_positions, nb::arg("keys"), nb::arg("selected").none(),
        "The positions of `selected` (no duplicates) among `keys`; RuntimeError naming the missing ones.");
  m.def("check_joinable", &check_joinable, nb::arg("parts"),
        "The parts of a concat share the partition and the set of fields.");
}

}  // namespace seqflow::bindings
