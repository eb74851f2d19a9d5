// seqflow.KVBatchMeta's methods, with TransferQueue 0.1.11's messages.
// TransferQueue's KVBatchMeta is a dataclass, and so is seqflow's
// (python/seqflow/kv_batch_meta.py: its fields, dataclasses.fields / asdict /
// replace and ==); these functions are its methods, bound as methods.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <utility>
#include <vector>

#include "bindings/batch_meta_object.h"
#include "bindings/checks.h"
#include "bindings/deep_copy.h"
#include "bindings/extra_info.h"
#include "bindings/submodules.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

[[noreturn]] void throw_value_error(const std::string& message) { throw nb::value_error(message.c_str()); }

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

void validate(nb::handle self) {
  nb::tuple checked = validated(self.attr("keys"), self.attr("tags"), self.attr("fields"));
  nb::setattr(self, "keys", checked[0]);
  nb::setattr(self, "tags", checked[1]);
  nb::setattr(self, "fields", checked[2]);
}

void post_init(nb::handle self) {
  validate(self);
  check_names(self.attr("keys"), "keys");
  check_optional_name(self.attr("partition_id"), "partition_id");
  nb::object fields = self.attr("fields");
  if (!fields.is_none()) check_names(fields, "fields");
  // Copies, so that chunks and concatenations share nothing.
  nb::setattr(self, "tags", deep_copy(self.attr("tags")));
  nb::setattr(self, "extra_info", deep_copy(self.attr("extra_info")));
}

nb::object of_owned(nb::handle type, nb::handle keys, nb::handle tags, nb::handle partition_id, nb::handle fields,
                    nb::handle extra_info) {
  nb::object meta = type.attr("__new__")(type);
  nb::setattr(meta, "keys", keys);
  nb::setattr(meta, "tags", tags);
  nb::setattr(meta, "partition_id", partition_id);
  nb::setattr(meta, "fields", fields);
  nb::setattr(meta, "extra_info", extra_info);
  validate(meta);
  return meta;
}

size_t size(nb::handle self) { return nb::len(nb::object(self.attr("keys"))); }

// The keys and the tags at these positions.
std::pair<nb::list, nb::list> keys_and_tags_at(nb::handle self, nb::handle at) {
  nb::list keys = nb::cast<nb::list>(self.attr("keys"));
  nb::list tags = nb::cast<nb::list>(self.attr("tags"));
  std::pair<nb::list, nb::list> out;
  for (nb::handle i : at) {
    out.first.append(keys[nb::cast<size_t>(i)]);
    out.second.append(tags[nb::cast<size_t>(i)]);
  }
  return out;
}

// A new batch of these positions' tags (and keys, unless given), the rest shared (the constructor copies).
nb::object part(nb::handle self, nb::handle at, nb::handle keys) {
  auto [picked_keys, picked_tags] = keys_and_tags_at(self, at);
  return self.type()(nb::arg("keys") = keys.is_none() ? nb::object(picked_keys) : nb::borrow(keys),
                     nb::arg("tags") = picked_tags, nb::arg("partition_id") = self.attr("partition_id"),
                     nb::arg("fields") = self.attr("fields"), nb::arg("extra_info") = self.attr("extra_info"));
}

void reorder(nb::handle self, nb::handle indexes) {
  nb::list given = list_of(indexes);
  const size_t n = size(self);
  if (given.size() != n) {
    throw_value_error("Attempted to reorder with indexes length " + std::to_string(given.size()) +
                      " that does not match the batch size " + std::to_string(n) + ".");
  }
  if (has_duplicates(given)) throw_value_error("Contain duplicate indexes: " + str_text(given));
  auto [keys, tags] = keys_and_tags_at(self, positions(given, static_cast<int64_t>(n), "indexes"));
  nb::setattr(self, "keys", keys);
  nb::setattr(self, "tags", tags);
}

nb::list chunk(nb::handle self, nb::handle chunks) {
  nb::list out;
  int64_t begin = 0;
  for (size_t count : chunk_sizes(size(self), count_of(chunks, "chunks"))) {
    nb::list at;
    for (int64_t i = begin; i < begin + static_cast<int64_t>(count); ++i) at.append(i);
    out.append(part(self, at, nb::none()));
    begin += static_cast<int64_t>(count);
  }
  return out;
}

nb::object concat(nb::handle type, nb::handle data) {
  nb::list parts;
  if (!data.is_none() && PyObject_IsTrue(data.ptr()) == 1) {
    for (nb::handle meta : data) {
      if (!meta.is_none() && size(meta) > 0) parts.append(meta);
    }
  }
  if (parts.size() == 0) return type();
  check_joinable(parts);
  nb::list keys;
  nb::list tags;
  nb::list infos;
  for (nb::handle meta : parts) {
    for (nb::handle key : nb::object(meta.attr("keys"))) keys.append(key);
    for (nb::handle tag : nb::object(meta.attr("tags"))) tags.append(tag);
    nb::object info = meta.attr("extra_info");
    infos.append(PyObject_IsTrue(info.ptr()) == 1 ? info : nb::object(nb::dict()));
  }
  return type(nb::arg("keys") = keys, nb::arg("tags") = tags, nb::arg("partition_id") = parts[0].attr("partition_id"),
              nb::arg("fields") = parts[0].attr("fields"),
              nb::arg("extra_info") = merged_extra_info(infos, "KVBatchMeta"));
}

}  // namespace

void bind_kv_batch_meta(nb::module_ m) {
  using namespace nb::literals;
  m.def("post_init", &post_init, nb::is_method(),
        "Checks keys (one tag each, no key twice, the name rule), partition_id and fields (no field twice), "
        "and copies tags and extra_info, so that chunks and concatenations share nothing.");
  m.def("of_owned", &of_owned, "cls"_a, "keys"_a, "tags"_a, "partition_id"_a.none(), "fields"_a.none(),
        "extra_info"_a.none(),
        "One over lists made for it alone (a kv put's reply): validated, not copied again (deep copies of 100k "
        "tags cost more than the put).");
  m.def("size", &size, nb::is_method(), "The number of keys.");
  m.def(
      "text",
      [](nb::handle self) {
        return "KVBatchMeta(size=" + std::to_string(size(self)) + ", field_names=" + str_text(self.attr("fields")) +
               ", extra_info=" + str_text(self.attr("extra_info")) + ")";
      },
      nb::is_method());
  m.def(
      "select_keys",
      [](nb::handle self, nb::handle keys_to_select) {
        nb::tuple found = key_positions(nb::cast<nb::list>(self.attr("keys")), keys_to_select);
        return part(self, found[0], found[1]);
      },
      nb::is_method(), "keys_to_select"_a.none(),
      "These keys (in this order) with their tags; ValueError on a duplicate, RuntimeError on a key the batch "
      "lacks.");
  m.def("reorder", &reorder, nb::is_method(), "indexes"_a.none(),
        "Puts the samples in the order of these positions (a permutation), in place.");
  m.def("chunk", &chunk, nb::is_method(), "chunks"_a.none(),
        "`chunks` consecutive parts with sizes chunk_sizes(size, chunks).");
  m.def("concat", &concat, "cls"_a, "data"_a.none(),
        "The keys of all batches, in order (empty ones and None skipped); all must share the partition and the "
        "set of fields. extra_info: the union; a key with two values raises ValueError.");
}

}  // namespace seqflow::bindings
