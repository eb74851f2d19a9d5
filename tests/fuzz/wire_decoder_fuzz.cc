// Fuzz target of everything that decodes bytes from a peer: the transport
// envelope, the MessagePack header, and every wire codec decoder on it
// (batch metadata, metadata requests, kv_list replies, status lists,
// schemas, the columns of a put, the sample keys of a get or a commit with
// their write and read versions, the views of a get reply, same-host
// descriptions). A decoder may refuse input only with
// seqflow::Error. Anything else is a finding: a crash, another exception, a
// sanitizer report, a header the checking reader and the tree reader judge
// differently, a decoded value that does not survive being encoded again,
// or a tensor whose shape does not match its bytes.
//
// Besides, the message (header and data) goes to one decoder of the
// controller's or the storage units' protocol (protocol_decoders.h), which
// may refuse it only with a kInvalidArgument seqflow::Error.
//
// Input: the row and field count a get reply is read with (the requester
// knows them, the message does not), the protocol decoder's place in its
// table, then the frames of one message [envelope, header, data...], each as
// a 4-byte little-endian length and its bytes; a length past the end takes
// what is left.
#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/msgpack_reader.h"
#include "fuzz_random.h"
#include "fuzz_target.h"
#include "protocol_decoders.h"
#include "transport/envelope.h"
#include "transport/local_copy.h"
#include "transport/local_copy_session.h"
#include "transport/schema_codec.h"
#include "transport/wire_codec.h"
#include "seqflow/error.h"
#include "seqflow/storage.h"
#include "sample_keys_support.h"
#include "wire_test_support.h"

namespace {

using namespace seqflow;
using test::Tree;
using transport::Frames;
namespace wire = transport::wire;

constexpr size_t kLengthBytes = 4;
constexpr size_t kMaxFields = 8;    // of a get reply; the first two bytes pick rows and fields
constexpr size_t kPrefixBytes = 3;  // rows, fields, protocol decoder

struct Message {
  size_t rows = 0;
  size_t fields = 0;
  size_t decoder = 0;  // its place in test::protocol_decoders()
  Frames frames;
};

Message parse_input(const uint8_t* data, size_t size) {
  Message message;
  if (size < kPrefixBytes) return message;
  message.rows = data[0];
  message.fields = data[1] % (kMaxFields + 1);
  message.decoder = data[2];
  size_t at = kPrefixBytes;
  while (at < size) {
    uint32_t length = 0;
    for (size_t b = 0; b < kLengthBytes && at < size; ++b) length |= static_cast<uint32_t>(data[at++]) << (8 * b);
    const size_t take = std::min<size_t>(length, size - at);
    message.frames.push_back(transport::copy_frame(std::string_view(reinterpret_cast<const char*>(data + at), take)));
    at += take;
  }
  return message;
}

std::vector<uint8_t> make_input(size_t rows, size_t fields, size_t decoder, const Frames& frames) {
  std::vector<uint8_t> out = {static_cast<uint8_t>(rows), static_cast<uint8_t>(fields), static_cast<uint8_t>(decoder)};
  for (const auto& frame : frames) {
    for (size_t b = 0; b < kLengthBytes; ++b) out.push_back(static_cast<uint8_t>(frame.size() >> (8 * b)));
    const auto bytes = transport::as_bytes(frame);
    for (std::byte byte : bytes) out.push_back(static_cast<uint8_t>(byte));
  }
  return out;
}

[[noreturn]] void finding(const std::string& what) { throw std::logic_error("finding: " + what); }

// Only a seqflow::Error is an acceptable way to refuse input.
template <typename Decode>
void decode_or_refuse(Decode&& decode) {
  try {
    decode();
  } catch (const Error&) {
  }
}

// A protocol decoder refuses input only as invalid: no other code, no other
// exception.
void decode_or_refuse_as_invalid(const test::ProtocolDecoder& entry, const Frames& frames, size_t rows, size_t fields) {
  Frames message = test::copies(frames);
  try {
    entry.decode(message, rows, fields);
  } catch (const Error& error) {
    if (error.code() != ErrorCode::kInvalidArgument) {
      finding(std::string(entry.name) + " refuses input with another code than kInvalidArgument: " + error.what());
    }
  }
}

// Reading every byte a decoder hands out lets AddressSanitizer check its bounds.
volatile uint8_t g_sink = 0;
void touch(std::span<const std::byte> bytes) {
  uint8_t sum = 0;
  for (std::byte b : bytes) sum = static_cast<uint8_t>(sum + static_cast<uint8_t>(b));
  g_sink = g_sink + sum;
}

// A decoded value must hold together, checked independently of the
// codec's own checks (128-bit arithmetic, no overflow): a tensor's bytes
// are its element count times the dtype size, an object is uint8 bytes of
// shape {nbytes}.
void expect_consistent(const SampleView& view, const std::string& where) {
  if (view.is_object) {
    if (view.dtype != DType::kUInt8 || view.shape != Shape{static_cast<int64_t>(view.nbytes)}) {
      finding(where + ": an object whose dtype or shape does not match its bytes");
    }
    return;
  }
  unsigned __int128 bytes = dtype_size(view.dtype);
  for (int64_t dim : view.shape) {
    if (dim < 0) finding(where + ": a negative dimension");
    bytes *= static_cast<uint64_t>(dim);
    if (bytes > std::numeric_limits<uint64_t>::max()) break;
  }
  if (bytes != view.nbytes) finding(where + ": a shape that does not match the byte count");
}

// Whatever a decoder accepted encodes to a message it accepts again, with
// the same encoding.
template <typename T>
void expect_stable(const T& value, const std::function<std::string(const T&)>& encode,
                   const std::function<T(std::string_view)>& decode, const char* what) {
  const std::string once = encode(value);
  try {
    if (encode(decode(once)) != once) finding(std::string(what) + " changes when re-encoded");
  } catch (const Error& error) {
    finding(std::string(what) + " re-encoded is refused: " + error.what());
  }
}

// One header frame's bytes as a message.
Frames message_of_bytes(std::string_view bytes) {
  Frames frames;
  frames.push_back(transport::copy_frame(bytes));
  return frames;
}

void decode_columns(std::string_view header_bytes, const Frames& frames) {
  const EncodedMap header =
      wire::encoded_header(header_bytes, "put request",
                           {"indexes", "partitions", "partition_ends", "generations", "write_version", "columns"});
  const wire::SampleKeyColumns samples = wire::read_sample_keys(header);
  const auto& indexes = samples.global_indexes;
  Frames args = test::copies(frames);
  const std::vector<Column> columns =
      wire::take_columns(header.value("columns"), args, 2, indexes.size(), "put request");
  for (const Column& column : columns) {
    for (size_t i = 0; i < column.sample_count(); ++i) {
      const SampleView view = column.sample(i);
      expect_consistent(view, "column '" + column.field + "' sample " + std::to_string(i));
      touch(view.bytes());
    }
  }
  // As the storage service does: store, read back, send as views.
  StorageUnit storage;
  storage.put(samples.keys(), columns);
  std::vector<std::string> fields;
  for (const Column& column : columns) fields.push_back(column.field);
  const auto rows = storage.get(samples.keys(), fields);
  Frames reply(1);
  const std::string views = wire::append_views(rows, fields.size(), reply);
  const auto back = wire::take_views(views, reply, 1, rows.size(), fields.size(), "get reply");
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t f = 0; f < fields.size(); ++f) {
      const auto want = columns[f].sample(i).bytes();
      const auto have = back[i][f].bytes();
      if (want.size() != have.size() || (!want.empty() && std::memcmp(want.data(), have.data(), want.size()) != 0)) {
        finding("column '" + fields[f] + "' sample " + std::to_string(i) + " changes through storage and back");
      }
    }
  }
}

// A unit holding seed_columns() for samples 0, 5 and 2 (partition "p",
// generation 1, as test::storage_request names them): committed, and an
// overwrite staged as version 2, for fuzzed gets and commits to run against.
StorageUnit& unit_with_versions(StorageUnit& storage, const std::vector<Column>& columns) {
  const std::vector<int64_t> indexes = {0, 5, 2};
  const test::TestSamples samples = test::samples_of(indexes);
  storage.put(samples, columns);
  SampleKeys staged = samples;
  staged.write_version = 2;
  storage.put(staged, columns);
  return storage;
}

std::vector<Column> seed_columns();

void decode_get_request(std::string_view header_bytes) {
  const EncodedMap header =
      wire::encoded_header(header_bytes, "get request",
                           {"indexes", "partitions", "partition_ends", "generations", "read_versions", "fields"});
  const wire::SampleKeyColumns samples = wire::read_sample_keys(header);
  for (const auto& [field, versions] : samples.read_versions) {
    if (versions.size() != samples.global_indexes.size()) {
      finding("read_versions of '" + field + "' does not hold one version per sample");
    }
  }
  const std::vector<std::string> fields = header.texts("fields");
  StorageUnit storage;
  const auto rows = unit_with_versions(storage, seed_columns()).get(samples.keys(), fields);
  for (const auto& row : rows) {
    for (const SampleView& view : row) {
      expect_consistent(view, "a stored value a get request reads");
      touch(view.bytes());
    }
  }
}

// A commit or a discard (`commit` false): the same request.
void decode_settle_request(std::string_view header_bytes, bool commit) {
  const EncodedMap header = wire::encoded_header(
      header_bytes, commit ? "commit request" : "discard request",
      {"indexes", "partitions", "partition_ends", "generations", "write_version", "fields", "write_tag"});
  const wire::SampleKeyColumns samples = wire::read_sample_keys(header);
  const std::vector<std::string> fields = header.texts("fields");
  StorageUnit storage;
  const std::vector<Column> columns = seed_columns();
  unit_with_versions(storage, columns);
  if (commit) {
    storage.commit(samples.keys(), fields);
  } else {
    storage.discard(samples.keys(), fields);
  }
  // A commit or a discard only drops values: never more bytes than both versions.
  uint64_t both = 0;
  for (const Column& column : columns) both += 2 * (column.offsets.back() - column.offsets.front());
  if (storage.stats().bytes > both) finding("a commit or a discard made the unit hold more bytes");
}

void decode_views(std::string_view header_bytes, const Message& message) {
  const EncodedMap header = wire::encoded_header(header_bytes, "get reply", {"fields"});
  Frames frames = test::copies(message.frames);
  const auto rows = wire::take_views(header.value("fields"), frames, 2, message.rows, message.fields, "get reply");
  for (const auto& row : rows) {
    for (const SampleView& view : row) {
      expect_consistent(view, "a view of a get reply");
      touch(view.bytes());
    }
  }
}

using Status = std::vector<std::pair<int64_t, bool>>;
using Schemas = std::map<std::string, FieldSchema>;
using Listing = std::vector<PartitionKeys>;

BatchMeta read_batch_meta(std::string_view bytes) {
  return wire::read_batch_meta(message_of_bytes(bytes), 0, "batch meta");
}
std::string batch_meta_bytes(const BatchMeta& meta) {
  return std::string(transport::as_string_view(wire::batch_meta_frame(meta)));
}
MetaRequest read_meta_request(std::string_view bytes) {
  return wire::read_meta_request(message_of_bytes(bytes), 0, "meta request");
}
std::string meta_request_bytes(const MetaRequest& request) {
  return std::string(transport::as_string_view(wire::meta_request_frame(request)));
}
Listing read_kv_list(std::string_view bytes) {
  Frames frames = message_of_bytes(bytes);  // the reader takes its frame over
  return wire::read_kv_list(frames, 0, "kv_list reply");
}
std::string kv_list_bytes(const Listing& listed) {
  return std::string(transport::as_string_view(wire::kv_list_frame(listed)));
}
Status read_status(std::string_view bytes) {
  return wire::read_status(wire::encoded_header(bytes, "status", {"indexes", "flags"}));
}
std::string status_bytes(const Status& status) {
  MsgpackWriter out;
  wire::write_status(out, status);
  return std::move(out).take();
}
Schemas read_schemas(std::string_view bytes) {
  check_msgpack_map(bytes, kMaxDecodeNesting);
  return wire::read_schemas(bytes, 0, "schemas");
}
std::string schemas_bytes(const Schemas& schemas) {
  MsgpackWriter out;
  wire::write_schemas(out, schemas, wire::SchemaKeys::kShapeSecond);
  return std::move(out).take();
}

// The header's bytes as the checking reader (what every decoder runs first)
// and as a tree (which builds every value) see them: both accept it, as a
// map, or both refuse it.
bool header_is_a_map(std::string_view bytes) {
  bool checked = true;
  try {
    check_msgpack_map(bytes, kMaxDecodeNesting);
  } catch (const Error&) {
    checked = false;
  }
  bool built = true;
  try {
    built = Tree::read(bytes).is_map();
  } catch (const Error&) {
    built = false;
  }
  if (checked != built) {
    finding(std::string("the header's checking reader ") + (checked ? "accepts" : "refuses") +
            " a header the tree reader " + (built ? "accepts" : "refuses"));
  }
  return checked;
}

// A unit's session listener, made once: sealed descriptions are checked
// against it (no session the fuzzer names is open, so none is read).
transport::local_copy::SessionListener& fuzz_sessions() {
  static transport::local_copy::SessionListener sessions;
  return sessions;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Message message = parse_input(data, size);
  if (message.frames.empty()) return 0;
  decode_or_refuse([&] { transport::decode_request_envelope(message.frames[0]); });
  decode_or_refuse([&] { transport::decode_reply_envelope(message.frames[0]); });
  (void)transport::request_id_or_zero(message.frames[0]);

  if (message.frames.size() < 2) return 0;
  const auto& decoders = test::protocol_decoders();
  Frames body = test::copies(message.frames);
  body.erase(body.begin());  // the envelope
  decode_or_refuse_as_invalid(decoders[message.decoder % decoders.size()], body, message.rows, message.fields);
  const std::string_view header = transport::as_string_view(message.frames[1]);
  if (!header_is_a_map(header)) {
    // Every frame reader checks the whole header first.
    for (const auto& read : {+[](std::string_view b) { (void)read_batch_meta(b); },
                             +[](std::string_view b) { (void)read_meta_request(b); },
                             +[](std::string_view b) { (void)read_kv_list(b); }}) {
      try {
        read(header);
      } catch (const Error&) {
        continue;
      }
      finding("a frame reader accepts a header that is no valid MessagePack map");
    }
    return 0;
  }
  decode_or_refuse([&] {
    const BatchMeta meta = read_batch_meta(header);
    for (size_t i = 0; i < meta.size(); ++i) {
      (void)meta.partition_ids[i];
      (void)meta.custom_meta[i];  // decodes the entry the codec let through
    }
    expect_stable<BatchMeta>(meta, batch_meta_bytes, read_batch_meta, "batch meta");
  });
  decode_or_refuse([&] {
    expect_stable<MetaRequest>(read_meta_request(header), meta_request_bytes, read_meta_request, "meta request");
  });
  decode_or_refuse([&] {
    const Listing listed = read_kv_list(header);
    for (const PartitionKeys& partition : listed) {
      for (size_t i = 0; i < partition.size(); ++i) {
        touch(std::as_bytes(std::span(partition.key(i))));
        touch(std::as_bytes(std::span(partition.encoded_tag(i))));
        decode_or_refuse([&] { (void)partition.tag(i); });  // tags are checked where they are decoded
      }
    }
    expect_stable<Listing>(listed, kv_list_bytes, read_kv_list, "kv_list reply");
  });
  decode_or_refuse([&] { expect_stable<Status>(read_status(header), status_bytes, read_status, "status"); });
  decode_or_refuse([&] { expect_stable<Schemas>(read_schemas(header), schemas_bytes, read_schemas, "schemas"); });
  decode_or_refuse([&] { decode_columns(header, message.frames); });
  decode_or_refuse([&] { decode_get_request(header); });
  decode_or_refuse([&] { decode_settle_request(header, true); });
  decode_or_refuse([&] { decode_settle_request(header, false); });
  decode_or_refuse([&] { decode_views(header, message); });
  // A same-host description (a put's local_frames, a get reply's).
  decode_or_refuse([&] { (void)transport::local_copy::sealed_reader(fuzz_sessions(), header, "local frames"); });
  decode_or_refuse([&] { (void)transport::local_copy::placeholders(header, "local frames"); });
  return 0;
}

namespace {

// Values at the edges of what the decoders check: sizes, counts, offsets,
// dtype names and codes, modes.
Tree edge_value(Rng& rng) {
  switch (below(rng, 10)) {
    case 0:
      return Tree(int64_t{0});
    case 1:
      return Tree(int64_t{-1});
    case 2:
      return Tree(std::numeric_limits<int64_t>::max());
    case 3:
      return Tree(std::numeric_limits<uint64_t>::max());
    case 4:
      return Tree(static_cast<int64_t>(below(rng, 300)));
    case 5:
      return Tree(0.5);
    case 6:
      return Tree(below(rng, 2) == 0);
    case 7:
      return Tree(nullptr);
    case 8: {
      static const char* const kTexts[] = {"",      "float32",     "bfloat16", "torch.float", "complex64",
                                           "fetch", "force_fetch", "insert",   "x",           "unknown"};
      return Tree(kTexts[below(rng, std::size(kTexts))]);
    }
    default:
      return Tree::array();
  }
}

// Rewrites one little-endian element of a binary array (offsets, sizes,
// indexes, shapes) with an edge value, or changes the array's length.
void mutate_binary(std::string& bytes, Rng& rng) {
  const size_t width = size_t{1} << below(rng, 4);  // 1, 2, 4 or 8 bytes
  if (below(rng, 4) == 0 || bytes.size() < width) {
    bytes.resize(below(rng, 2) == 0 ? below(rng, bytes.size() + 1) : bytes.size() + 1 + below(rng, 16));
    return;
  }
  const uint64_t edges[] = {0, 1, 2, ~uint64_t{0}, uint64_t{1} << 62, uint64_t{1} << 31, bytes.size(), rng()};
  const uint64_t value = edges[below(rng, std::size(edges))];
  const size_t at = below(rng, bytes.size() / width) * width;
  for (size_t b = 0; b < width; ++b) bytes[at + b] = static_cast<char>(value >> (8 * b));
}

// One change somewhere in the tree: descend at random, then change the node.
void mutate_tree(Tree& value, Rng& rng) {
  if (value.size() != 0 && below(rng, 3) != 0) {
    const auto at = static_cast<std::ptrdiff_t>(below(rng, value.size()));
    mutate_tree(value.is_map() ? std::next(value.as_map().begin(), at)->second : value.as_array()[at], rng);
    return;
  }
  if (value.is_binary() && below(rng, 4) != 0) {
    mutate_binary(value.binary_bytes(), rng);
  } else if (value.is_map() && value.size() != 0 && below(rng, 2) == 0) {
    const auto member = std::next(value.as_map().begin(), static_cast<std::ptrdiff_t>(below(rng, value.size())));
    value.as_map().erase(member);  // a missing key
  } else if (value.is_map() && below(rng, 2) == 0) {
    value["extra"] = edge_value(rng);  // an unknown key
  } else if (value.is_array() && value.size() != 0 && below(rng, 2) == 0) {
    const size_t at = below(rng, value.size());
    if (below(rng, 2) == 0) {
      value.erase(at);
    } else {
      value.push_back(Tree(value[at]));
    }
  } else {
    value = edge_value(rng);
  }
}

Column seed_column(const std::string& field, DType dtype, std::vector<Shape> shapes, size_t bytes, bool object) {
  Column column;
  column.field = field;
  column.dtype = dtype;
  column.is_object = object;
  column.shapes = std::move(shapes);
  const size_t samples = column.shapes.size() == 1 ? 3 : column.shapes.size();
  std::vector<std::byte> all(bytes * samples);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::byte>(i * 7 + 1);
  column.offsets.push_back(0);
  for (size_t i = 0; i < samples; ++i) {
    const size_t size = column.is_object ? static_cast<size_t>(column.shapes[i][0]) : bytes;
    column.offsets.push_back(column.offsets.back() + size);
  }
  all.resize(column.offsets.back());
  column.buffer = Buffer::copy_of(all);
  return column;
}

std::vector<Column> seed_columns() {
  return {seed_column("fixed", DType::kFloat32, {{2}}, 8, false),
          seed_column("nested", DType::kInt16, {{2}, {2}, {2}}, 4, false),
          seed_column("text", DType::kUInt8, {{3}, {0}, {5}}, 0, true)};
}

Frames with_envelope(zmq::message_t envelope, zmq::message_t header) {
  Frames frames;
  frames.push_back(std::move(envelope));
  frames.push_back(std::move(header));
  return frames;
}

}  // namespace

// Mutates the header as a tree and encodes it again, so that the mutant is
// valid MessagePack and reaches the decoders' checks (byte-level mutants
// mostly stop at the parser); or resizes, drops or repeats a data frame.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Message message = parse_input(data, size);
  Rng rng(seed);
  if (message.frames.size() > 2 && below(rng, 4) == 0) {
    const size_t at = 2 + below(rng, message.frames.size() - 2);
    const auto bytes = transport::as_bytes(message.frames[at]);
    switch (below(rng, 3)) {
      case 0:
        message.frames[at] = transport::copy_frame(bytes.first(below(rng, bytes.size() + 1)));
        break;
      case 1:
        message.frames.erase(message.frames.begin() + static_cast<std::ptrdiff_t>(at));
        break;
      default:
        message.frames.push_back(transport::copy_frame(bytes));
        break;
    }
  } else {
    if (message.frames.size() < 2) return size;
    Tree header;
    try {
      header = test::tree_of(message.frames[1]);
    } catch (const Error&) {
      return size;
    }
    if (!header.is_map()) return size;
    mutate_tree(header, rng);
    message.frames[1] = test::tree_frame(header);
  }
  const std::vector<uint8_t> out = make_input(message.rows, message.fields, message.decoder, message.frames);
  if (out.size() > max_size) return size;
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

std::vector<std::vector<uint8_t>> fuzz_seed_corpus() {
  std::vector<std::vector<uint8_t>> seeds;
  const auto ok = [] { return transport::encode_reply_envelope(7, std::nullopt); };

  BatchMeta meta;
  meta.global_indexes = {4, 1, 9};
  meta.generations = {17, 3, uint64_t{1} << 62};
  meta.partition_ids.append(2, "train");
  meta.partition_ids.append(1, "val");
  meta.field_schema["a"] = FieldSchema{DType::kFloat32, {2}, false, false};
  meta.field_schema["b"] = FieldSchema{DType::kInt64, {-1}, true, false};
  meta.production_status = {1, 0, 1, 1, 0, 0};
  meta.custom_meta.push_back({{"total_lengths", 12}});
  meta.custom_meta.push_back(Value::object());
  meta.custom_meta.push_back({{"group_id", "g"}, {"list", Value::array({1, 2.5, "x"})}});
  meta.extra_info = {{"step", 3}};
  seeds.push_back(make_input(0, 0, 0, with_envelope(ok(), wire::batch_meta_frame(meta))));
  seeds.push_back(make_input(0, 0, 0, with_envelope(ok(), wire::batch_meta_frame(BatchMeta{}))));
  BatchMeta deep_meta;  // custom_meta nested up to the limit: {"deep": [[...1...]]}
  deep_meta.global_indexes = {0};
  deep_meta.partition_ids.append(1, "p");
  Value deep_value = 1;
  for (size_t level = 2; level <= kMaxDecodeNesting; ++level) deep_value = Value::array({deep_value});
  deep_meta.custom_meta.push_back({{"deep", deep_value}});
  seeds.push_back(make_input(0, 0, 0, with_envelope(ok(), wire::batch_meta_frame(deep_meta))));

  Listing listed;
  const std::string done = Tree{{"status", "done"}, {"global_steps", 2}}.bytes();
  listed.emplace_back("train").push_back("k1", done);
  listed.back().push_back("k2", {});
  listed.emplace_back("empty");
  seeds.push_back(make_input(0, 0, 0, with_envelope(ok(), wire::kv_list_frame(listed))));

  MetaRequest request;
  request.fields = {"a", "b"};
  request.batch_size = 8;
  request.partition_id = "train";
  request.task_name = "t";
  seeds.push_back(make_input(
      0, 0, 0, with_envelope(transport::encode_request_envelope(3, "get_meta"), wire::meta_request_frame(request))));
  request.sampling.dp_rank_given = true;  // and the caller's other sampling_config keys
  request.sampling.extra = {{"temperature", 0.7}, {"policy_version", 3}, {"tags", Value::array({"a", nullptr})}};
  seeds.push_back(make_input(
      0, 0, 0, with_envelope(transport::encode_request_envelope(4, "get_meta"), wire::meta_request_frame(request))));
  seeds.push_back(
      make_input(0, 0, 0, with_envelope(ok(), transport::copy_frame(status_bytes({{1, true}, {5, false}})))));
  seeds.push_back(make_input(0, 0, 0, with_envelope(ok(), transport::copy_frame(schemas_bytes(meta.field_schema)))));

  const std::vector<Column> columns = seed_columns();
  const std::vector<int64_t> indexes = {0, 5, 2};
  const std::vector<size_t> subsets[] = {{}, {0, 2}};
  for (const auto& positions : subsets) {
    Frames put(2);
    put[0] = transport::encode_request_envelope(9, "put");
    const std::string entries = wire::append_columns(columns, positions, put);
    std::vector<int64_t> routed = indexes;
    if (!positions.empty()) routed = {indexes[positions[0]], indexes[positions[1]]};
    Tree header = test::storage_request(routed);
    header["columns"] = Tree::read(entries);
    put[1] = test::tree_frame(header);
    seeds.push_back(make_input(0, 0, 0, put));
    header["write_version"] = 2;  // the same put, staged
    put[1] = test::tree_frame(header);
    seeds.push_back(make_input(0, 0, 0, put));
  }

  // A get of staged versions and the commit of one.
  const FieldVersions read_versions = {{"fixed", {2, 0, 2}}, {"text", {0, 0, 2}}};
  const test::TestSamples seed_samples = test::samples_of(indexes);
  SampleKeys versioned = seed_samples;
  versioned.write_version = 2;
  versioned.read_versions = &read_versions;
  const std::vector<size_t> all = {0, 1, 2};
  MsgpackMapWriter get_keys;
  wire::add_sample_keys(get_keys, versioned, all);
  Tree get_request = test::tree_of(get_keys);
  get_request.erase("write_version");  // a get's keys carry read versions only
  get_request["fields"] = Tree::array({"fixed", "text"});
  seeds.push_back(
      make_input(0, 0, 0, with_envelope(transport::encode_request_envelope(10, "get"), test::tree_frame(get_request))));
  MsgpackMapWriter commit_request;
  versioned.read_versions = nullptr;
  wire::add_sample_keys(commit_request, versioned, all);
  const std::string settled[] = {"fixed", "nested", "text"};
  commit_request.set("fields").strings(settled);
  seeds.push_back(make_input(
      0, 0, 0, with_envelope(transport::encode_request_envelope(11, "commit"), wire::header_frame(commit_request))));

  StorageUnit storage;
  storage.put(test::samples_of(indexes), columns);
  const std::string fields[] = {"fixed", "text", "nested"};
  const auto rows = storage.get(test::samples_of(std::vector<int64_t>{2, 0, 5}), fields);
  Frames reply(2);
  reply[0] = ok();
  MsgpackMapWriter views;
  views.set("fields").encoded(wire::append_views(rows, std::size(fields), reply));
  reply[1] = wire::header_frame(views);
  seeds.push_back(make_input(rows.size(), std::size(fields), 0, reply));

  Frames error;
  error.push_back(transport::encode_reply_envelope(7, ErrorCode::kNotFound));
  error.push_back(transport::copy_frame(std::string_view("partition_id 'x' does not exist")));
  seeds.push_back(make_input(0, 0, 0, error));

  // One valid message per protocol decoder, which it must accept.
  const auto& decoders = test::protocol_decoders();
  for (size_t d = 0; d < decoders.size(); ++d) {
    Frames body = decoders[d].seed();
    try {
      decoders[d].decode(body, decoders[d].rows, decoders[d].fields);
    } catch (const Error& error) {
      finding(std::string(decoders[d].name) + " refuses the message its encoder made: " + error.what());
    }
    Frames frames;
    frames.push_back(ok());
    std::move(body.begin(), body.end(), std::back_inserter(frames));
    seeds.push_back(make_input(decoders[d].rows, decoders[d].fields, d, frames));
  }

  Frames nested;  // a header at the nesting limit
  nested.push_back(transport::encode_request_envelope(1, "insert"));
  nested.push_back(transport::copy_frame(std::string_view(test::nested_msgpack(kMaxDecodeNesting))));
  seeds.push_back(make_input(0, 0, 0, nested));
  return seeds;
}
