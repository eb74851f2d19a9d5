#include "bindings/msgpack_conversion.h"

#include <vector>

#include <nlohmann/json.hpp>

namespace nb = nanobind;

namespace seqflow::bindings {
namespace {

// nlohmann's SAX events turned into Python containers on a stack.
class PythonBuilder {
 public:
  using json = nlohmann::json;

  bool null() { return add(nb::none()); }
  bool boolean(bool value) { return add(nb::bool_(value)); }
  bool number_integer(json::number_integer_t value) { return add(nb::int_(value)); }
  bool number_unsigned(json::number_unsigned_t value) { return add(nb::int_(value)); }
  bool number_float(json::number_float_t value, const json::string_t&) { return add(nb::float_(value)); }
  bool string(json::string_t& value) { return add(nb::str(value.data(), value.size())); }
  bool binary(json::binary_t& value) {
    return add(nb::bytes(reinterpret_cast<const char*>(value.data()), value.size()));
  }
  bool start_object(size_t) { return open(nb::dict()); }
  bool key(json::string_t& name) {
    key_ = nb::str(name.data(), name.size());
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(size_t) { return open(nb::list()); }
  bool end_array() { return close(); }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& error) {
    error_ = error.what();
    return false;
  }

  nb::object result() const { return result_; }
  const std::string& error() const { return error_; }

 private:
  bool add(nb::object value) {
    if (stack_.empty()) {
      result_ = std::move(value);
    } else if (PyDict_Check(stack_.back().ptr())) {
      nb::borrow<nb::dict>(stack_.back())[key_] = value;
    } else {
      nb::borrow<nb::list>(stack_.back()).append(value);
    }
    return true;
  }
  bool open(nb::object container) {
    add(container);
    stack_.push_back(std::move(container));
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  std::vector<nb::object> stack_;
  nb::object key_;
  nb::object result_;
  std::string error_;
};

}  // namespace

nb::object from_msgpack(std::string_view bytes, std::string& error) {
  if (bytes.empty()) return nb::dict();
  PythonBuilder builder;
  if (!nlohmann::json::sax_parse(bytes.begin(), bytes.end(), &builder,
                                 nlohmann::json::input_format_t::msgpack)) {
    error = builder.error();
    return nb::object();
  }
  return builder.result();
}

}  // namespace seqflow::bindings
