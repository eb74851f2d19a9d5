#include "bindings/msgpack_conversion.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

namespace nb = nanobind;

namespace seqflow::bindings {

// One value's bytes, read front to back. Every read checks the bounds; the
// first problem is kept in `error` and turns every result invalid.
class MsgpackDecoder::Reader {
 public:
  Reader(MsgpackDecoder& decoder, std::string_view bytes, std::string& error)
      : decoder_(decoder), begin_(bytes.data()), at_(bytes.data()), end_(bytes.data() + bytes.size()),
        error_(error) {}

  size_t position() const { return static_cast<size_t>(at_ - begin_); }
  size_t left() const { return static_cast<size_t>(end_ - at_); }

  nb::object value(int depth) {
    if (depth > kMaxDepth) return fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    const size_t where = position();
    uint8_t type = 0;
    if (!take(1, &type)) return {};
    if (type <= 0x7f) return steal(PyLong_FromLong(type));
    if (type >= 0xe0) return steal(PyLong_FromLong(static_cast<int8_t>(type)));
    if ((type & 0xf0) == 0x80) return map(type & 0x0f, depth);
    if ((type & 0xf0) == 0x90) return array(type & 0x0f, depth);
    if ((type & 0xe0) == 0xa0) return str(type & 0x1f);
    switch (type) {
      case 0xc0: return nb::none();
      case 0xc2: return nb::bool_(false);
      case 0xc3: return nb::bool_(true);
      case 0xc4: return bin(length<uint8_t>());
      case 0xc5: return bin(length<uint16_t>());
      case 0xc6: return bin(length<uint32_t>());
      case 0xc7: return ext(length<uint8_t>());
      case 0xc8: return ext(length<uint16_t>());
      case 0xc9: return ext(length<uint32_t>());
      case 0xca: return floating<uint32_t, float>();
      case 0xcb: return floating<uint64_t, double>();
      case 0xcc: return integer<uint8_t>();
      case 0xcd: return integer<uint16_t>();
      case 0xce: return integer<uint32_t>();
      case 0xcf: return integer<uint64_t>();
      case 0xd0: return integer<int8_t>();
      case 0xd1: return integer<int16_t>();
      case 0xd2: return integer<int32_t>();
      case 0xd3: return integer<int64_t>();
      case 0xd4: return ext(1);
      case 0xd5: return ext(2);
      case 0xd6: return ext(4);
      case 0xd7: return ext(8);
      case 0xd8: return ext(16);
      case 0xd9: return str(length<uint8_t>());
      case 0xda: return str(length<uint16_t>());
      case 0xdb: return str(length<uint32_t>());
      case 0xdc: return array(length<uint16_t>(), depth);
      case 0xdd: return array(length<uint32_t>(), depth);
      case 0xde: return map(length<uint16_t>(), depth);
      case 0xdf: return map(length<uint32_t>(), depth);
      default: break;
    }
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", type);
    return fail("unknown type byte " + std::string(hex), where);
  }

  nb::object fail(const std::string& what) { return fail(what, position()); }
  nb::object fail(const std::string& what, size_t where) {
    if (error_.empty()) error_ = what + " at byte " + std::to_string(where);
    return {};
  }

 private:
  // A new reference from the C API; null means Python ran out of memory.
  static nb::object steal(PyObject* object) {
    if (object == nullptr) throw nb::python_error();
    return nb::steal(object);
  }

  template <typename T>
  bool take(size_t count, T* out) {
    if (!error_.empty()) return false;
    if (left() < count) {
      fail("truncated value");
      return false;
    }
    if (out != nullptr) {  // big-endian on the wire
      uint64_t bits = 0;
      for (size_t i = 0; i < count; ++i) bits = (bits << 8) | static_cast<uint8_t>(at_[i]);
      *out = static_cast<T>(bits);
    }
    at_ += count;
    return true;
  }
  // Reads a T length; 0 after a failure (the next take fails too).
  template <typename T>
  size_t length() {
    T n = 0;
    take(sizeof(T), &n);
    return n;
  }
  // Bytes [at, at + count) when there are that many; advances past them.
  const char* span(size_t count) {
    const char* start = at_;
    return take<uint8_t>(count, nullptr) ? start : nullptr;
  }

  template <typename T>
  nb::object integer() {
    T n = 0;
    if (!take(sizeof(T), &n)) return {};
    if constexpr (std::is_signed_v<T>) return steal(PyLong_FromLongLong(n));
    return steal(PyLong_FromUnsignedLongLong(n));
  }
  template <typename Bits, typename Float>
  nb::object floating() {
    Bits bits = 0;
    if (!take(sizeof(Bits), &bits)) return {};
    Float value;
    std::memcpy(&value, &bits, sizeof value);
    return steal(PyFloat_FromDouble(value));
  }
  nb::object str(size_t count) {
    const size_t where = position();
    const char* text = span(count);
    if (text == nullptr) return {};
    PyObject* out = PyUnicode_DecodeUTF8(text, static_cast<Py_ssize_t>(count), "strict");
    if (out == nullptr) {
      PyErr_Clear();
      return fail("invalid UTF-8 in a string", where);
    }
    return nb::steal(out);
  }
  nb::object bin(size_t count) {
    const char* data = span(count);
    if (data == nullptr) return {};
    return steal(PyBytes_FromStringAndSize(data, static_cast<Py_ssize_t>(count)));
  }
  nb::object ext(size_t count) {
    return take<uint8_t>(1, nullptr) ? bin(count) : nb::object();  // the type byte is dropped
  }
  nb::object array(size_t count, int depth) {
    // Each element takes at least a byte: a bad count cannot allocate much.
    if (count > left()) return fail("truncated value");
    nb::object out = steal(PyList_New(static_cast<Py_ssize_t>(count)));
    for (size_t i = 0; i < count; ++i) {
      nb::object item = value(depth + 1);
      if (!item.is_valid()) return {};
      PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), item.release().ptr());
    }
    return out;
  }
  nb::object map(size_t count, int depth) {
    nb::object out = steal(PyDict_New());
    for (size_t i = 0; i < count; ++i) {
      const size_t where = position();
      uint8_t type = 0;
      if (!take(1, &type)) return {};
      size_t size = 0;
      if ((type & 0xe0) == 0xa0) {
        size = type & 0x1f;
      } else if (type == 0xd9) {
        size = length<uint8_t>();
      } else if (type == 0xda) {
        size = length<uint16_t>();
      } else if (type == 0xdb) {
        size = length<uint32_t>();
      } else {
        return fail("a map key that is not a string", where);
      }
      const char* text = span(size);
      if (text == nullptr) return {};
      nb::object name = decoder_.key(std::string_view(text, size));
      if (!name.is_valid()) return fail("invalid UTF-8 in a map key", where);
      nb::object item = value(depth + 1);
      if (!item.is_valid()) return {};
      if (PyDict_SetItem(out.ptr(), name.ptr(), item.ptr()) != 0) throw nb::python_error();
    }
    return out;
  }

  MsgpackDecoder& decoder_;
  const char* begin_;
  const char* at_;
  const char* end_;
  std::string& error_;
};

nb::object MsgpackDecoder::key(std::string_view text) {
  for (const auto& [cached, name] : keys_) {
    if (cached == text) return name;
  }
  PyObject* name = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "strict");
  if (name == nullptr) {
    PyErr_Clear();
    return {};
  }
  nb::object out = nb::steal(name);
  if (keys_.size() < kMaxKeys) keys_.emplace_back(std::string(text), out);
  return out;
}

nb::object MsgpackDecoder::decode(std::string_view bytes, std::string& error) {
  error.clear();
  if (bytes.empty()) return nb::dict();
  Reader reader(*this, bytes, error);
  nb::object out = reader.value(0);
  if (out.is_valid() && reader.left() != 0) {
    return reader.fail(std::to_string(reader.left()) + " bytes after the value");
  }
  return out;
}

}  // namespace seqflow::bindings
