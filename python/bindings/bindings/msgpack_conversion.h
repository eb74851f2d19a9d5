// MessagePack -> Python objects, for custom_meta. A direct decoder: going
// through nlohmann's reader (a JSON tree, or even its SAX events) cost about
// 300 ns per small map, more than building the dict; this costs about 100.
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/msgpack_reader.h"
#include "seqflow/partition_keys.h"

namespace seqflow::bindings {

// One decoder serves every entry of a batch: a map key it has met before is
// handed out again as the same str object, so 256 dicts keyed
// "total_lengths" create and hash that key once, not 256 times. Short string
// values repeat too (a status of "finished" on 100k tags): the first few
// distinct ones are shared the same way (str objects are immutable).
class MsgpackDecoder {
 public:
  // The value `bytes` encodes (empty bytes: an empty dict), which must fill
  // `bytes` exactly and nest at most kMaxDecodeNesting deep. Map keys
  // must be strings; strings must be UTF-8; ext values become bytes (their
  // type is dropped). On malformed input: an invalid object, and `error`
  // completes "<subject> ..." with what is wrong at which byte.
  nanobind::object decode(std::string_view bytes, std::string& error);

 private:
  nanobind::object value(MsgpackReader& reader, size_t depth);
  nanobind::object key(MsgpackReader& reader);
  nanobind::object text(const MsgpackReader& reader, std::string_view text);

  static constexpr size_t kMaxKeys = 32;
  static constexpr size_t kMaxTexts = 16;
  static constexpr size_t kMaxCachedText = 16;  // bytes; longer ones are rarely repeated (ids, prompts)
  std::vector<std::pair<std::string, nanobind::object>> keys_;
  std::vector<std::pair<std::string, nanobind::object>> texts_;
};

// kv_list's {partition_id: {key: tag}}, tags decoded straight from their
// MessagePack (one decoder: verl's tag keys become str objects once).
nanobind::dict listing_to_python(const std::vector<PartitionKeys>& listed);

}  // namespace seqflow::bindings
