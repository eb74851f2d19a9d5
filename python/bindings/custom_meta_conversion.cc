// custom_meta between Python and the engine: dicts in (the value model, checked
// by the name rule), MessagePack entries out as dicts (bindings/batch_meta_conversion.h).
#include <nanobind/stl/string.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bindings/batch_meta_conversion.h"
#include "bindings/json_conversion.h"
#include "bindings/msgpack_conversion.h"
#include "core/name_rule.h"
#include "seqflow/custom_meta_list.h"
#include "seqflow/error.h"

namespace nb = nanobind;

namespace seqflow::bindings {

std::vector<Value> custom_meta_from_python(nb::handle value) {
  std::vector<Value> out;
  if (value.is_none()) return out;
  size_t i = 0;
  for (nb::handle item : value) {
    const std::string where = "custom_meta[" + std::to_string(i) + "]";
    if (!nb::isinstance<nb::dict>(item)) {
      throw_invalid(where + " must be a dict, got " + std::string(nb::type_name(item.type()).c_str()));
    }
    Value entry = to_value(item, where);
    // Top-level keys follow the name rule, as tags' keys do (a NUL would cut them short).
    for (const auto& member : entry.as_object()) core::check_name(member.first, where + " key");
    out.push_back(std::move(entry));
    ++i;
  }
  return out;
}

nb::list decode_custom_meta(nb::bytes bytes, const OffsetsInput& offsets) {
  const std::span<const uint32_t> bounds(offsets.data(), offsets.shape(0));
  CustomMetaList::check_offsets(bytes.size(), bounds);
  const std::string_view all(bytes.c_str(), bytes.size());
  MsgpackDecoder decoder;
  nb::list out;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    std::string error;
    nb::object value = decoder.decode(all.substr(bounds[i], bounds[i + 1] - bounds[i]), error);
    if (!value.is_valid()) throw_invalid("custom_meta[" + std::to_string(i) + "] " + error);
    if (!nb::isinstance<nb::dict>(value))
      throw_invalid("custom_meta[" + std::to_string(i) + "] is not a MessagePack map");
    out.append(value);
  }
  return out;
}

}  // namespace seqflow::bindings
