#include "bindings/msgpack_conversion.h"

#include "core/custom_meta.h"
#include "seqflow/error.h"

namespace nb = nanobind;

namespace seqflow::bindings {
namespace {

using Kind = MsgpackReader::Kind;

// A new reference from the C API; null means Python ran out of memory.
nb::object steal(PyObject* object) {
  if (object == nullptr) throw nb::python_error();
  return nb::steal(object);
}

// The str of UTF-8 `text`, which the reader has just read (for the error's offset).
nb::object decode_text(const MsgpackReader& reader, std::string_view text, const char* what) {
  PyObject* out = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "strict");
  if (out == nullptr) {
    PyErr_Clear();
    reader.fail(std::string("invalid UTF-8 in ") + what, reader.position() - text.size());
  }
  return nb::steal(out);
}

}  // namespace

// Recursion is bounded by the reader's depth limit.
nb::object MsgpackDecoder::value(MsgpackReader& reader, size_t depth) {
  const MsgpackReader::Token token = reader.next(depth);
  switch (token.kind) {
    case Kind::kNull:
      return nb::none();
    case Kind::kBool:
      return nb::bool_(token.number != 0);
    case Kind::kUnsigned:
      return steal(PyLong_FromUnsignedLongLong(token.number));
    case Kind::kSigned:
      return steal(PyLong_FromLongLong(token.integer));
    case Kind::kFloat:
      return steal(PyFloat_FromDouble(token.real));
    case Kind::kString:
      return text(reader, token.bytes);
    case Kind::kBinary:  // an ext's type is dropped
      return steal(PyBytes_FromStringAndSize(token.bytes.data(), static_cast<Py_ssize_t>(token.bytes.size())));
    case Kind::kArray:
    case Kind::kMap:
      break;
  }
  if (token.kind == Kind::kArray) {
    // The reader checked the count against the bytes left: no huge allocation.
    nb::object out = steal(PyList_New(static_cast<Py_ssize_t>(token.number)));
    for (uint64_t i = 0; i < token.number; ++i) {
      PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), value(reader, depth + 1).release().ptr());
    }
    return out;
  }
  nb::object out = steal(PyDict_New());
  for (uint64_t i = 0; i < token.number; ++i) {
    nb::object name = key(reader);
    nb::object item = value(reader, depth + 1);
    if (PyDict_SetItem(out.ptr(), name.ptr(), item.ptr()) != 0) throw nb::python_error();
  }
  return out;
}

nb::object MsgpackDecoder::key(MsgpackReader& reader) {
  const std::string_view text = reader.key();
  for (const auto& [cached, name] : keys_) {
    if (cached == text) return name;
  }
  nb::object out = decode_text(reader, text, "a map key");
  if (keys_.size() < kMaxKeys) keys_.emplace_back(std::string(text), out);
  return out;
}

nb::object MsgpackDecoder::text(const MsgpackReader& reader, std::string_view text) {
  if (text.size() > kMaxCachedText) return decode_text(reader, text, "a string");
  for (const auto& [cached, value] : texts_) {
    if (cached == text) return value;
  }
  nb::object out = decode_text(reader, text, "a string");
  if (texts_.size() < kMaxTexts) texts_.emplace_back(std::string(text), out);
  return out;
}

nb::object MsgpackDecoder::decode(std::string_view bytes, std::string& error) {
  error.clear();
  if (bytes.empty()) return nb::dict();
  try {
    MsgpackReader reader(bytes, kMaxDecodeNesting);
    nb::object out = value(reader, 0);
    reader.finish();
    return out;
  } catch (const Error& problem) {
    error = problem.what();
    return {};
  }
}

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

}  // namespace seqflow::bindings
