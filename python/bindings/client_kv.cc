// seqflow.Client's key-value calls: samples named by a key within their
// partition, as TransferQueue's kv_* API has them.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "bindings/arrays.h"
#include "bindings/checks.h"
#include "bindings/client_arguments.h"
#include "bindings/client_object.h"
#include "bindings/json_conversion.h"
#include "bindings/msgpack_conversion.h"
#include "bindings/tensor_conversion.h"
#include "seqflow/error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

using ProducedFlags = nb::ndarray<const bool, nb::ndim<2>, nb::device::cpu>;

// kv_list's {partition_id: {key: tag}}, tags decoded straight from their
// MessagePack (one decoder: verl's tag keys become str objects once).
nb::dict listing_to_python(const std::vector<PartitionKeys>& listed) {
  MsgpackDecoder decoder;
  nb::dict out;
  for (const PartitionKeys& partition : listed) {
    // Sized once: a growing dict of 100k keys rehashes itself ~14 times.
    nb::object keys = nb::steal(_PyDict_NewPresized(static_cast<Py_ssize_t>(partition.size())));
    if (!keys.is_valid()) throw nb::python_error();
    for (size_t i = 0; i < partition.size(); ++i) {
      const std::string_view name = partition.key(i);
      std::string error;
      nb::object tag = decoder.decode(partition.encoded_tag(i), error);
      if (!tag.is_valid()) throw_invalid("tag of key '" + std::string(name) + "' " + error);
      nb::object key = nb::steal(PyUnicode_DecodeUTF8(name.data(), static_cast<Py_ssize_t>(name.size()), "strict"));
      if (!key.is_valid()) throw nb::python_error();
      if (PyDict_SetItem(keys.ptr(), key.ptr(), tag.ptr()) != 0) throw nb::python_error();
    }
    out[nb::str(partition.partition_id().data(), partition.partition_id().size())] = keys;
  }
  return out;
}

std::string name_of(nb::handle value, std::string_view parameter) {
  return nb::cast<std::string>(check_name(value, parameter));
}

nb::object kv_put_rows(PyClient& self, nb::list keys, nb::handle partition_id, nb::handle columns, nb::handle tags) {
  const std::string partition = nb::cast<std::string>(partition_id);
  const std::vector<std::string> names = strings(keys);
  std::vector<Value> tag_values;
  if (!tags.is_none()) {
    size_t i = 0;
    for (nb::handle tag : tags) tag_values.push_back(to_value(tag, "tags[" + std::to_string(i++) + "]"));
  }
  const auto rows = nb::cast<std::vector<Column>>(columns);
  std::shared_ptr<Client> client = self.connected();
  nb::object meta = python_meta(without_gil([&] { return client->kv_put(partition, names, tag_values, rows); }));
  return kv_batch_meta_class().attr("_of_owned")(keys, meta.attr("custom_meta"), partition_id,
                                                 meta.attr("_produced_fields")(), meta.attr("extra_info"));
}

nb::object kv_put(PyClient& self, nb::handle key, nb::handle partition_id, nb::handle fields, nb::handle tag,
                  nb::handle allow_pickle) {
  check_name(key, "key");
  check_name(partition_id, "partition_id");
  check_tag(tag, "tag");
  const bool pickled = pickle_allowed(self, allow_pickle);  // checked with or without fields
  if (fields.is_none() && tag.is_none()) throw nb::value_error("kv_put needs fields or a tag");
  static CachedAttribute single_sample_columns("seqflow._convert", "single_sample_columns");
  nb::object columns = fields.is_none()
                           ? nb::object(nb::list())
                           : single_sample_columns(fields, "borrow"_a = self.is_remote(), "allow_pickle"_a = pickled);
  nb::list keys;
  keys.append(key);
  nb::object tags = nb::none();
  if (!tag.is_none()) tags = nb::make_tuple(tag);
  return kv_put_rows(self, keys, partition_id, columns, tags);
}

nb::object kv_batch_put(PyClient& self, nb::handle keys, nb::handle partition_id, nb::handle fields, nb::handle tags,
                        nb::handle allow_pickle) {
  nb::list names = check_names(keys, "keys");
  check_name(partition_id, "partition_id");
  if (names.size() == 0) throw nb::value_error("kv_batch_put of no keys: keys must name at least one sample");
  nb::object checked = checked_tags(tags, names.size());
  const bool pickled = pickle_allowed(self, allow_pickle);  // checked with or without fields
  if (fields.is_none() && checked.is_none()) throw nb::value_error("kv_batch_put needs fields or tags");
  static CachedAttribute to_columns("seqflow._convert", "to_columns");
  nb::object columns = fields.is_none() ? nb::object(nb::list())
                                        : to_columns(fields, "borrow"_a = self.is_remote(), "allow_pickle"_a = pickled,
                                                     "parameter"_a = "fields");
  return kv_put_rows(self, names, partition_id, columns, checked);
}

// A ValueError naming the keys that lack a selected field.
void check_fields_set(nb::handle meta, nb::handle fields, const nb::list& keys, nb::handle partition_id) {
  nb::object produced_object = meta.attr("_field_produced")(fields);
  const auto produced = nb::cast<ProducedFlags>(produced_object);
  const auto flags = produced.view();
  size_t j = 0;
  for (nb::handle field : fields) {
    nb::list missing;
    for (size_t i = 0; i < produced.shape(0); ++i) {
      if (!flags(i, j)) missing.append(keys[i]);
    }
    if (missing.size()) {
      throw nb::value_error(("field " + repr_text(field) + " is not set for keys " + repr_text(missing) +
                             " of partition " + repr_text(partition_id))
                                .c_str());
    }
    ++j;
  }
}

nb::object kv_batch_get(PyClient& self, nb::handle keys, nb::handle partition_id, nb::handle select_fields,
                        nb::handle format, nb::handle copy, nb::handle layout, nb::handle allow_pickle) {
  nb::list names = check_names(keys, "keys");
  const std::string partition = name_of(partition_id, "partition_id");
  nb::object fields = select_fields.is_none() ? nb::none() : nb::object(check_names(select_fields, "select_fields"));
  const std::vector<std::string> key_names = strings(names);
  std::shared_ptr<Client> client = self.connected();
  nb::object meta = python_meta(without_gil([&] { return client->kv_meta(partition, key_names); }));
  if (fields.is_none()) {
    fields = meta.attr("_produced_fields")();
  } else {
    check_fields_set(meta, fields, names, partition_id);
    meta = meta.attr("select_fields")(fields);
  }
  return get_data(self, meta, fields, format, copy, layout, allow_pickle);
}

nb::object kv_meta(PyClient& self, nb::handle keys, nb::handle partition_id, nb::handle create, nb::handle missing) {
  const std::vector<std::string> names = strings(check_names(keys, "keys"));
  const std::string partition = name_of(partition_id, "partition_id");
  const bool make = check_bool(create, "create");
  static nb::handle choices = nb::make_tuple("error", "skip").release();  // kept: see get_meta's modes
  const bool skip = nb::cast<std::string>(check_choice(missing, "missing", nb::borrow<nb::tuple>(choices))) == "skip";
  std::shared_ptr<Client> client = self.connected();
  return python_meta(without_gil([&] {
    if (make) return client->kv_put(partition, names, {}, {});
    if (skip) return client->control().kv_find(partition, names);
    return client->kv_meta(partition, names);
  }));
}

}  // namespace

void bind_client_kv(ClientClass& cls) {
  cls.def("kv_put", &kv_put, "key"_a.none(), "partition_id"_a.none(), "fields"_a.none() = nb::none(),
          "tag"_a.none() = nb::none(), nb::kw_only(), "allow_pickle"_a.none() = nb::none(),
          nb::sig("def kv_put(self, key: str, partition_id: str, fields=None, tag: Optional[dict] = None, *, "
                  "allow_pickle: Optional[bool] = None) -> KVBatchMeta"),
          R"(One sample under `key`: fields maps field name to its value (no
batch dimension: a tensor or numeric array is the row; any other value,
numbers included, is a non-tensor value, as in TransferQueue); tag is
merged into the sample's custom_meta.)");
  cls.def("kv_batch_put", &kv_batch_put, "keys"_a.none(), "partition_id"_a.none(), "fields"_a.none() = nb::none(),
          "tags"_a.none() = nb::none(), nb::kw_only(), "allow_pickle"_a.none() = nb::none(),
          nb::sig("def kv_batch_put(self, keys: Sequence[str], partition_id: str, fields=None, "
                  "tags: Optional[Sequence[dict]] = None, *, allow_pickle: Optional[bool] = None) -> KVBatchMeta"),
          "Samples under `keys`; fields holds one row per key (as in put).");
  cls.def("kv_batch_get", &kv_batch_get, "keys"_a.none(), "partition_id"_a.none(),
          "select_fields"_a.none() = nb::none(), nb::kw_only(), "format"_a.none() = "auto", "copy"_a.none() = true,
          "layout"_a.none() = "dense", "allow_pickle"_a.none() = nb::none(),
          nb::sig("def kv_batch_get(self, keys, partition_id: str, select_fields=None, *, format: str = 'auto', "
                  "copy: bool = True, layout: str = 'dense', allow_pickle: Optional[bool] = None)"),
          R"(The data under `keys` (every field they all hold, or select_fields),
as get_data returns it (format, copy, layout, allow_pickle: see
get_data). A missing key raises KeyError naming it; a field some key
lacks, ValueError.)");
  cls.def(
      "kv_batch_get_by_meta",
      [](nb::handle self, nb::handle meta, nb::handle select_fields, nb::kwargs kwargs) {
        check_instance(meta, "meta", kv_batch_meta_class(), "a KVBatchMeta");
        nb::object fields = select_fields.is_none() ? nb::object(meta.attr("fields")) : nb::borrow(select_fields);
        return self.attr("kv_batch_get")(meta.attr("keys"), meta.attr("partition_id"), fields, **kwargs);
      },
      "meta"_a.none(), "select_fields"_a.none() = nb::none(), "kwargs"_a,
      nb::sig("def kv_batch_get_by_meta(self, meta: KVBatchMeta, select_fields=None, **kwargs)"),
      "kv_batch_get of meta's keys (and fields, unless select_fields).");
  cls.def("kv_meta", &kv_meta, "keys"_a.none(), "partition_id"_a.none(), nb::kw_only(), "create"_a.none() = false,
          "missing"_a.none() = "error",
          nb::sig("def kv_meta(self, keys, partition_id: str, *, create: bool = False, missing: str = 'error') "
                  "-> BatchMeta"),
          R"(The samples of `keys`, in the order given, for get_data; one
controller call, whatever the partition's size. create=True makes
samples (no fields yet) for unknown keys, and the partition if
needed. Otherwise unknown keys raise KeyError naming the first
(missing="error") or are left out (missing="skip"; a partition that
does not exist then gives an empty BatchMeta).)");
  cls.def(
      "kv_keys",
      [](PyClient& self, nb::handle global_indexes, nb::handle partition_id) {
        nb::object indexes = check_int64_list(global_indexes, "global_indexes");
        const std::string partition = name_of(partition_id, "partition_id");
        const auto array = nb::cast<Int64Input>(indexes);
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->control().kv_keys(partition, as_span(array)); });
      },
      "global_indexes"_a.none(), "partition_id"_a.none(),
      nb::sig("def kv_keys(self, global_indexes, partition_id: str) -> list[str]"),
      R"(The key of each sample in `global_indexes`, in that order; one
controller call. A sample without a key (or not in the partition)
raises KeyError naming its global index.)");
  cls.def(
      "kv_list",
      [](PyClient& self, nb::handle partition_id) {
        const auto partition = nb::cast<std::optional<std::string>>(check_optional_name(partition_id, "partition_id"));
        std::shared_ptr<Client> client = self.connected();
        return listing_to_python(
            without_gil([&] { return client->control().kv_list(partition ? &*partition : nullptr); }));
      },
      "partition_id"_a.none() = nb::none(),
      nb::sig("def kv_list(self, partition_id: Optional[str] = None) -> dict[str, dict[str, Any]]"),
      R"({partition_id: {key: tag}} for one partition or (None) for every
partition, those without keys included (with {}). A partition that
does not exist is left out: kv_list("gone") is {}.)");
  cls.def(
      "kv_clear",
      [](PyClient& self, nb::handle keys, nb::handle partition_id) {
        const std::vector<std::string> names = strings(check_names(keys, "keys"));
        const std::string partition = name_of(partition_id, "partition_id");
        std::shared_ptr<Client> client = self.connected();
        without_gil([&] { client->kv_clear(partition, names); });
      },
      "keys"_a.none(), "partition_id"_a.none(), nb::sig("def kv_clear(self, keys, partition_id: str) -> None"),
      R"(Removes the keys' samples and data; keys (or a partition) that do
not exist are skipped, as in TransferQueue.)");
}

}  // namespace seqflow::bindings
