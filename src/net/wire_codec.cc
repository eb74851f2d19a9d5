#include "net/wire_codec.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/msgpack_reader.h"
#include "seqflow/error.h"
#include "storage/aligned_buffer.h"
#include "storage/value_check.h"

namespace seqflow::net::wire {
namespace {

// Each sample's entry is checked before anything decodes it: a peer's
// deeply nested entry must be an error, not a stack overflow.
CustomMetaList decode_custom_meta(const Header& header, size_t samples) {
  const std::vector<char> bytes = header.numbers<char>("custom_meta");
  const std::vector<uint32_t> offsets = header.numbers<uint32_t>("custom_meta_offsets");
  if (offsets.size() != samples + 1) header.fail("custom_meta_offsets", "must hold one offset per sample, plus one");
  CustomMetaList::check_offsets(bytes.size(), offsets);
  CustomMetaList out;
  out.reserve(samples, bytes.size());
  for (size_t i = 0; i < samples; ++i) {
    const std::string_view entry(bytes.data() + offsets[i], offsets[i + 1] - offsets[i]);
    if (!entry.empty()) {
      try {
        check_msgpack_map(entry, kMaxNesting);
      } catch (const Error& error) {
        header.fail("custom_meta", "entry " + std::to_string(i) + " " + error.what());
      }
    }
    out.push_back_encoded(entry);
  }
  return out;
}

std::string in_quotes(std::string_view text) { return "'" + std::string(text) + "'"; }

Json encode_schema(const FieldSchema& schema) {
  return Json{{"dtype", std::string(dtype_name(schema.dtype))},
              {"shape", binary_of(std::span<const int64_t>(schema.shape))},
              {"nested", schema.is_nested},
              {"object", schema.is_object}};
}

FieldSchema decode_schema(const Json& value, const std::string& what) {
  const Header entry(value, what, {"dtype", "shape", "nested", "object"});
  FieldSchema schema;
  schema.dtype = parse_dtype(entry.text("dtype"));
  schema.shape = entry.numbers<int64_t>("shape");
  schema.is_nested = entry.boolean("nested");
  schema.is_object = entry.boolean("object");
  return schema;
}

Json encode_shapes(const std::vector<Shape>& shapes) {
  Json out = Json::array();
  for (const Shape& shape : shapes) out.push_back(binary_of(std::span<const int64_t>(shape)));
  return out;
}

std::vector<Shape> decode_shapes(const Header& entry, std::string_view key) {
  const Json& value = entry.at(key);
  if (!value.is_array()) entry.fail(key, "must be an array of shapes");
  std::vector<Shape> shapes;
  shapes.reserve(value.size());
  for (const Json& shape : value) {
    if (!shape.is_binary() || shape.get_binary().size() % sizeof(int64_t) != 0) {
      entry.fail(key, "must hold binary int64 shapes");
    }
    Shape dims(shape.get_binary().size() / sizeof(int64_t));
    if (!dims.empty()) std::memcpy(dims.data(), shape.get_binary().data(), shape.get_binary().size());
    shapes.push_back(std::move(dims));
  }
  return shapes;
}

// True when the samples at `positions` lie back to back in the column's buffer.
bool contiguous(const Column& column, std::span<const size_t> positions) {
  for (size_t i = 1; i < positions.size(); ++i) {
    if (column.offsets[positions[i]] != column.offsets[positions[i - 1] + 1]) return false;
  }
  return true;
}

Json append_column(const Column& column, std::span<const size_t> positions, Frames& frames) {
  std::vector<uint64_t> offsets;
  offsets.reserve(positions.size() + 1);
  std::vector<Shape> shapes;
  const bool one_shape = column.shapes.size() == 1;
  if (one_shape) shapes.push_back(column.shapes.front());
  offsets.push_back(0);
  for (size_t p : positions) {
    offsets.push_back(offsets.back() + (column.offsets[p + 1] - column.offsets[p]));
    if (!one_shape) shapes.push_back(column.shape_of(p));
  }
  const size_t total = offsets.back();
  if (positions.empty() || contiguous(column, positions)) {
    const size_t begin = positions.empty() ? 0 : column.offsets[positions.front()];
    frames.push_back(frame_of(column.buffer, begin, total));
  } else {
    // Packed into an aligned buffer (huge pages when large): a message of
    // the size allocated by ZeroMQ faults in 4 KiB pages, which made packing
    // the 128 MiB columns of a put to several units slower than the network.
    WritableBuffer packed = allocate_buffer(total);
    for (size_t i = 0; i < positions.size(); ++i) {
      const size_t p = positions[i];
      const size_t size = column.offsets[p + 1] - column.offsets[p];
      if (size != 0) std::memcpy(packed.data + offsets[i], column.buffer->data + column.offsets[p], size);
    }
    frames.push_back(frame_of(std::move(packed.buffer), 0, total));
  }
  return Json{{"field", column.field},
              {"dtype", std::string(dtype_name(column.dtype))},
              {"object", column.is_object},
              {"shapes", encode_shapes(shapes)},
              {"offsets", binary_of(std::span<const uint64_t>(offsets))}};
}

}  // namespace

zmq::message_t header_frame(const Json& header) {
  std::vector<uint8_t> bytes = Json::to_msgpack(header);
  return copy_frame(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

Json read_header(const Frames& frames, size_t index, std::string_view what) {
  if (index >= frames.size()) {
    throw_invalid(std::string(what) + " needs a header frame at position " + std::to_string(index) +
                  ", got " + std::to_string(frames.size()) + " frames");
  }
  Json out;
  try {
    out = msgpack_to_json(as_string_view(frames[index]), kMaxNesting);
  } catch (const Error& error) {
    throw_invalid(std::string(what) + " header " + error.what());
  }
  if (!out.is_object()) {
    throw_invalid(std::string(what) + " header must be a MessagePack map, got " + out.type_name());
  }
  return out;
}

Header::Header(const Json& header, std::string_view what, std::initializer_list<std::string_view> allowed)
    : header_(header), what_(what) {
  if (!header_.is_object()) {
    throw_invalid(what_ + " must be a map, got " + std::string(header_.type_name()));
  }
  for (const auto& item : header_.items()) {
    if (std::find(allowed.begin(), allowed.end(), item.key()) == allowed.end()) {
      throw_invalid(what_ + " has an unknown field " + in_quotes(item.key()));
    }
  }
}

void Header::fail(std::string_view key, std::string_view problem) const {
  throw_invalid(what_ + " field " + in_quotes(key) + " " + std::string(problem));
}

bool Header::has(std::string_view key) const {
  auto it = header_.find(key);
  return it != header_.end() && !it->is_null();
}

const Json& Header::at(std::string_view key) const {
  auto it = header_.find(key);
  if (it == header_.end()) throw_invalid(what_ + " lacks the field " + in_quotes(key));
  return *it;
}

std::string Header::text(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_string()) fail(key, "must be a string, got " + std::string(value.type_name()));
  return value.get<std::string>();
}

int64_t Header::integer(std::string_view key) const {
  const Json& value = at(key);
  if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
    fail(key, "is out of range");
  }
  if (!value.is_number_integer()) fail(key, "must be an integer, got " + std::string(value.type_name()));
  return value.get<int64_t>();
}

bool Header::boolean(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_boolean()) fail(key, "must be a boolean, got " + std::string(value.type_name()));
  return value.get<bool>();
}

std::vector<std::string> Header::texts(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_array()) fail(key, "must be an array of strings");
  std::vector<std::string> out;
  out.reserve(value.size());
  for (const Json& item : value) {
    if (!item.is_string()) fail(key, "must be an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::vector<Json> Header::objects(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_array()) fail(key, "must be an array of maps");
  for (const Json& item : value) {
    if (!item.is_object() && !item.is_null()) fail(key, "must be an array of maps");
  }
  return value.get<std::vector<Json>>();
}

Json encode_schemas(const std::map<std::string, FieldSchema>& schemas) {
  Json out = Json::object();
  for (const auto& [field, schema] : schemas) out[field] = encode_schema(schema);
  return out;
}

std::map<std::string, FieldSchema> decode_schemas(const Json& value, std::string_view what) {
  if (!value.is_object()) throw_invalid(std::string(what) + " field schema must be a map");
  std::map<std::string, FieldSchema> out;
  for (const auto& item : value.items()) {
    out.emplace(item.key(), decode_schema(item.value(), std::string(what) + " schema of " + in_quotes(item.key())));
  }
  return out;
}

Json encode_batch_meta(const BatchMeta& meta) {
  std::vector<std::string> names;
  std::vector<uint64_t> ends;
  for (size_t r = 0; r < meta.partition_ids.run_count(); ++r) {
    names.push_back(meta.partition_ids.run_name(r));
    ends.push_back(meta.partition_ids.run_end(r));
  }
  const auto& custom = meta.custom_meta;
  return Json{{"indexes", binary_of(std::span<const int64_t>(meta.global_indexes))},
              {"partitions", names},
              {"partition_ends", binary_of(std::span<const uint64_t>(ends))},
              {"schema", encode_schemas(meta.field_schema)},
              {"produced", binary_of(std::span<const uint8_t>(meta.production_status))},
              {"custom_meta", binary_of(std::span<const char>(custom.bytes()))},
              {"custom_meta_offsets", binary_of(std::span<const uint32_t>(custom.offsets()))},
              {"extra_info", meta.extra_info}};
}

BatchMeta decode_batch_meta(const Json& value, std::string_view what) {
  const Header header(value, what,
                      {"indexes", "partitions", "partition_ends", "schema", "produced", "custom_meta",
                       "custom_meta_offsets", "extra_info"});
  BatchMeta meta;
  meta.global_indexes = header.numbers<int64_t>("indexes");
  const size_t n = meta.global_indexes.size();
  const std::vector<std::string> names = header.texts("partitions");
  const std::vector<uint64_t> ends = header.numbers<uint64_t>("partition_ends");
  if (names.size() != ends.size()) header.fail("partition_ends", "must hold one end per partition");
  uint64_t begin = 0;
  for (size_t r = 0; r < names.size(); ++r) {
    if (ends[r] <= begin || ends[r] > n) header.fail("partition_ends", "must ascend within the sample count");
    meta.partition_ids.append(ends[r] - begin, names[r]);
    begin = ends[r];
  }
  if (begin != n) header.fail("partition_ends", "must end at the sample count " + std::to_string(n));
  meta.field_schema = decode_schemas(header.at("schema"), what);
  meta.production_status = header.numbers<uint8_t>("produced");
  if (meta.production_status.size() != n * meta.field_schema.size()) {
    header.fail("produced", "must hold one flag per sample and field");
  }
  meta.custom_meta = decode_custom_meta(header, n);
  meta.extra_info = header.at("extra_info");
  if (!meta.extra_info.is_object()) header.fail("extra_info", "must be a map");
  return meta;
}

Json encode_meta_request(const MetaRequest& request) {
  const char* mode = request.mode == MetaMode::kInsert ? "insert"
                     : request.mode == MetaMode::kFetch ? "fetch"
                                                         : "force_fetch";
  return Json{{"fields", request.fields},           {"batch_size", request.batch_size},
              {"partition_id", request.partition_id}, {"mode", mode},
              {"task_name", request.task_name},       {"dp_rank", request.sampling.dp_rank},
              {"batch_index", request.sampling.batch_index}, {"polling", request.polling},
              {"timeout_ms", request.timeout.count()}};
}

MetaRequest decode_meta_request(const Json& value, std::string_view what) {
  const Header header(value, what,
                      {"fields", "batch_size", "partition_id", "mode", "task_name", "dp_rank", "batch_index",
                       "polling", "timeout_ms"});
  MetaRequest request;
  request.fields = header.texts("fields");
  request.batch_size = header.integer("batch_size");
  request.partition_id = header.text("partition_id");
  request.mode = parse_meta_mode(header.text("mode"));
  request.task_name = header.text("task_name");
  request.sampling.dp_rank = header.integer("dp_rank");
  request.sampling.batch_index = header.integer("batch_index");
  request.polling = header.boolean("polling");
  request.timeout = std::chrono::milliseconds(header.integer("timeout_ms"));
  return request;
}

Json encode_status(const std::vector<std::pair<int64_t, bool>>& status) {
  std::vector<int64_t> indexes;
  std::vector<uint8_t> flags;
  indexes.reserve(status.size());
  flags.reserve(status.size());
  for (const auto& [index, flag] : status) {
    indexes.push_back(index);
    flags.push_back(flag ? 1 : 0);
  }
  return Json{{"indexes", binary_of(std::span<const int64_t>(indexes))},
              {"flags", binary_of(std::span<const uint8_t>(flags))}};
}

std::vector<std::pair<int64_t, bool>> decode_status(const Json& value, std::string_view what) {
  const Header header(value, what, {"indexes", "flags"});
  const auto indexes = header.numbers<int64_t>("indexes");
  const auto flags = header.numbers<uint8_t>("flags");
  if (indexes.size() != flags.size()) header.fail("flags", "must hold one flag per index");
  std::vector<std::pair<int64_t, bool>> out;
  out.reserve(indexes.size());
  for (size_t i = 0; i < indexes.size(); ++i) out.emplace_back(indexes[i], flags[i] != 0);
  return out;
}

Json append_columns(const std::vector<Column>& columns, std::span<const size_t> positions, Frames& frames) {
  std::vector<size_t> all;
  if (positions.empty() && !columns.empty()) {
    all.resize(columns.front().sample_count());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    positions = all;
  }
  Json out = Json::array();
  for (const Column& column : columns) out.push_back(append_column(column, positions, frames));
  return out;
}

std::vector<Column> take_columns(const Json& entries, Frames& frames, size_t first, size_t samples,
                                 std::string_view what) {
  if (!entries.is_array()) throw_invalid(std::string(what) + " columns must be an array");
  if (frames.size() != first + entries.size()) {
    throw_invalid(std::string(what) + " names " + std::to_string(entries.size()) + " columns but carries " +
                  std::to_string(frames.size() > first ? frames.size() - first : 0) + " data frames");
  }
  std::vector<Column> columns;
  columns.reserve(entries.size());
  for (size_t c = 0; c < entries.size(); ++c) {
    const Header entry(entries[c], std::string(what) + " column " + std::to_string(c),
                       {"field", "dtype", "object", "shapes", "offsets"});
    Column column;
    column.field = entry.text("field");
    column.dtype = parse_dtype(entry.text("dtype"));
    column.is_object = entry.boolean("object");
    column.shapes = decode_shapes(entry, "shapes");
    const auto offsets = entry.numbers<uint64_t>("offsets");
    if (offsets.size() != samples + 1) {
      entry.fail("offsets", "must hold " + std::to_string(samples + 1) + " offsets");
    }
    if (column.shapes.size() != 1 && column.shapes.size() != samples) {
      entry.fail("shapes", "must hold one shape or one per sample");
    }
    column.offsets.assign(offsets.begin(), offsets.end());
    column.buffer = buffer_of(std::move(frames[first + c]));
    column.validate();  // offsets and shapes against the frame's bytes
    columns.push_back(std::move(column));
  }
  return columns;
}

Json append_views(const std::vector<std::vector<SampleView>>& rows, size_t fields, Frames& frames) {
  const size_t first = frames.size();  // frame numbers count from here
  Json out = Json::array();
  for (size_t f = 0; f < fields; ++f) {
    std::vector<uint32_t> frame_index;
    std::vector<uint64_t> offsets, sizes;
    std::vector<uint8_t> dtypes, objects;
    std::vector<Shape> shapes;
    const Buffer* run_buffer = nullptr;
    size_t run_begin = 0, run_end = 0;
    std::shared_ptr<const Buffer> run_owner;
    auto close_run = [&] {
      if (run_buffer != nullptr) frames.push_back(frame_of(run_owner, run_begin, run_end - run_begin));
    };
    for (const auto& row : rows) {
      const SampleView& view = row.at(f);
      if (view.buffer.get() != run_buffer || view.offset != run_end) {
        close_run();
        run_buffer = view.buffer.get();
        run_owner = view.buffer;
        run_begin = run_end = view.offset;
      }
      frame_index.push_back(static_cast<uint32_t>(frames.size() - first));
      offsets.push_back(view.offset - run_begin);
      sizes.push_back(view.nbytes);
      run_end = view.offset + view.nbytes;
      dtypes.push_back(static_cast<uint8_t>(view.dtype));
      objects.push_back(view.is_object ? 1 : 0);
      shapes.push_back(view.shape);
    }
    close_run();
    out.push_back(Json{{"frames", binary_of(std::span<const uint32_t>(frame_index))},
                       {"offsets", binary_of(std::span<const uint64_t>(offsets))},
                       {"sizes", binary_of(std::span<const uint64_t>(sizes))},
                       {"dtypes", binary_of(std::span<const uint8_t>(dtypes))},
                       {"objects", binary_of(std::span<const uint8_t>(objects))},
                       {"shapes", encode_shapes(shapes)}});
  }
  return out;
}

std::vector<std::vector<SampleView>> take_views(const Json& entry_list, Frames& frames, size_t first,
                                                size_t rows, size_t fields, std::string_view what) {
  if (!entry_list.is_array() || entry_list.size() != fields) {
    throw_invalid(std::string(what) + " must describe " + std::to_string(fields) + " fields");
  }
  std::vector<std::shared_ptr<const Buffer>> buffers;
  buffers.reserve(frames.size() - std::min(first, frames.size()));
  for (size_t i = first; i < frames.size(); ++i) buffers.push_back(buffer_of(std::move(frames[i])));
  std::vector<std::vector<SampleView>> out(rows, std::vector<SampleView>(fields));
  const auto dtype_count = static_cast<uint8_t>(DType::kFloat64) + 1;
  for (size_t f = 0; f < fields; ++f) {
    const Header entry(entry_list[f], std::string(what) + " field " + std::to_string(f),
                       {"frames", "offsets", "sizes", "dtypes", "objects", "shapes"});
    const auto frame_index = entry.numbers<uint32_t>("frames");
    const auto offsets = entry.numbers<uint64_t>("offsets");
    const auto sizes = entry.numbers<uint64_t>("sizes");
    const auto dtypes = entry.numbers<uint8_t>("dtypes");
    const auto objects = entry.numbers<uint8_t>("objects");
    const auto shapes = decode_shapes(entry, "shapes");
    for (const size_t count : {frame_index.size(), offsets.size(), sizes.size(), dtypes.size(), objects.size(),
                               shapes.size()}) {
      if (count != rows) entry.fail("frames", "and its siblings must hold one entry per sample");
    }
    for (size_t i = 0; i < rows; ++i) {
      if (frame_index[i] >= buffers.size()) entry.fail("frames", "names a frame that is not there");
      const auto& buffer = buffers[frame_index[i]];
      if (offsets[i] > buffer->size || sizes[i] > buffer->size - offsets[i]) {
        entry.fail("offsets", "points outside its frame");
      }
      if (dtypes[i] >= dtype_count) entry.fail("dtypes", "holds an unknown dtype");
      SampleView& view = out[i][f];
      view.buffer = buffer;
      view.offset = offsets[i];
      view.nbytes = sizes[i];
      view.dtype = static_cast<DType>(dtypes[i]);
      view.is_object = objects[i] != 0;
      view.shape = shapes[i];
      // The storage's own rule, overflow-safe: a huge shape must not wrap
      // around to the byte count and hand readers a tensor larger than its bytes.
      if (auto problem = value_problem(view.dtype, view.is_object, view.shape, view.nbytes)) {
        entry.fail("shapes", "does not match sample " + std::to_string(i) + ": " + *problem);
      }
    }
  }
  return out;
}

}  // namespace seqflow::net::wire
