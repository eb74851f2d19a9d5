#include <algorithm>
#include <cstring>

#include "common/aligned_buffer.h"
#include "common/split_copy.h"
#include "storage/value_check.h"
#include "transport/storage_routing.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::wire {
namespace {

// A thread's share of a large pack; a thread costs ~50 us to start, and
// one core copies ~10 GB/s.
constexpr size_t kPackBytesPerThread = size_t{16} << 20;
constexpr size_t kPackMaxThreads = 4;

void write_shapes(MsgpackWriter& out, const std::vector<Shape>& shapes) {
  out.array(shapes.size());
  for (const Shape& shape : shapes) out.numbers(std::span<const int64_t>(shape));
}

std::vector<Shape> read_shapes(const EncodedMap& entry, std::string_view key) {
  const std::vector<std::string_view> items = entry.elements(key, "must be an array of shapes");
  std::vector<Shape> shapes;
  shapes.reserve(items.size());
  for (const std::string_view item : items) {
    const MsgpackReader::Token shape = MsgpackReader(item, kMaxDecodeNesting).next(entry.depth() + 2);
    if (shape.kind != MsgpackReader::Kind::kBinary || shape.bytes.size() % sizeof(int64_t) != 0) {
      entry.fail(key, "must hold binary int64 shapes");
    }
    Shape dims(shape.bytes.size() / sizeof(int64_t));
    if (!dims.empty()) std::memcpy(dims.data(), shape.bytes.data(), shape.bytes.size());
    shapes.push_back(std::move(dims));
  }
  return shapes;
}

// The entries of an encoded array, a header's value; else throws `problem`.
std::vector<std::string_view> array_items(std::string_view entries, const std::string& problem) {
  std::optional<std::vector<std::string_view>> items = array_elements(entries, kValueDepth);
  if (!items) throw_invalid(problem);
  return std::move(*items);
}

// True when the samples at `positions` lie back to back in the column's buffer.
bool contiguous(const Column& column, std::span<const size_t> positions) {
  for (size_t i = 1; i < positions.size(); ++i) {
    if (column.offsets[positions[i]] != column.offsets[positions[i - 1] + 1]) return false;
  }
  return true;
}

// A column restricted to `positions`: its header entry (written into
// `out`), laid out as if its samples were packed back to back, and where
// each sample's bytes lie in the column's buffer.
void write_column_entry(MsgpackWriter& out, const Column& column, std::span<const size_t> positions,
                        std::vector<std::span<const std::byte>>& samples) {
  std::vector<uint64_t> offsets;
  offsets.reserve(positions.size() + 1);
  std::vector<Shape> shapes;
  const bool one_shape = column.shapes.size() == 1;
  if (one_shape) shapes.push_back(column.shapes.front());
  offsets.push_back(0);
  samples.reserve(positions.size());
  for (size_t p : positions) {
    const size_t size = column.offsets[p + 1] - column.offsets[p];
    offsets.push_back(offsets.back() + size);
    samples.emplace_back(column.buffer->data + column.offsets[p], size);
    if (!one_shape) shapes.push_back(column.shape_of(p));
  }
  MsgpackMapWriter entry;
  entry.set("field").string(column.field);
  entry.set("dtype").string(dtype_name(column.dtype));
  entry.set("object").boolean(column.is_object);
  write_shapes(entry.set("shapes"), shapes);
  entry.set("offsets").numbers(std::span<const uint64_t>(offsets));
  entry.write(out);
}

// Where a column's frame will lie: a range of its buffer, or (when its
// samples are not back to back) a packed buffer that `to` / `from` fill.
struct FrameSource {
  std::shared_ptr<const Buffer> buffer;
  size_t offset = 0, size = 0;
};

FrameSource plan_column(MsgpackWriter& out, const Column& column, std::span<const size_t> positions,
                        std::vector<iovec>& to, std::vector<iovec>& from) {
  std::vector<std::span<const std::byte>> samples;
  write_column_entry(out, column, positions, samples);
  size_t total = 0;
  for (const auto& sample : samples) total += sample.size();
  if (contiguous(column, positions)) {
    return {column.buffer, positions.empty() ? 0 : column.offsets[positions.front()], total};
  }
  // Packed into an aligned buffer (huge pages when large): a message of
  // the size allocated by ZeroMQ faults in 4 KiB pages, which made packing
  // the 128 MiB columns of a put to several units slower than the network.
  WritableBuffer packed = allocate_buffer(total);
  size_t at = 0;
  for (const auto& sample : samples) {
    to.push_back({packed.data + at, sample.size()});
    from.push_back({const_cast<std::byte*>(sample.data()), sample.size()});
    at += sample.size();
  }
  return {std::move(packed.buffer), 0, total};
}

// A received frame kept as a stored value. Small ones are copied: ZeroMQ
// receives them into a shared 8 KiB batch buffer, which a kept frame would
// hold whole (a peer's one-byte values then cost far more than their count).
std::shared_ptr<const Buffer> stored_buffer_of(zmq::message_t&& frame) {
  if (frame.size() < kReceiveBatchBytes) return Buffer::copy_of(as_bytes(frame));
  return buffer_of(std::move(frame));
}

// All samples of the columns when `positions` is empty.
std::span<const size_t> positions_or_all(const std::vector<Column>& columns, std::span<const size_t> positions,
                                         std::vector<size_t>& all) {
  if (!positions.empty() || columns.empty()) return positions;
  all.resize(columns.front().sample_count());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return all;
}

// Splits ascending `positions` as append_column_segments says.
std::vector<std::span<const size_t>> segments_of(const std::vector<Column>& columns,
                                                 std::span<const size_t> positions) {
  std::vector<std::span<const size_t>> segments;
  const auto packed_since = [&](size_t begin, size_t end) {
    if (begin < end) segments.push_back(positions.subspan(begin, end - begin));
  };
  size_t small_from = 0;  // where the runs not yet in a segment begin
  for (const auto& [begin, end] : consecutive_runs(positions)) {
    size_t bytes = 0;
    for (const Column& column : columns) {
      bytes += column.offsets[positions[end - 1] + 1] - column.offsets[positions[begin]];
    }
    if (columns.empty() || bytes / columns.size() < kMinRunFrameBytes) continue;
    packed_since(small_from, begin);
    segments.push_back(positions.subspan(begin, end - begin));
    small_from = end;
  }
  packed_since(small_from, positions.size());
  return segments;
}

// The entries and frames of `segments`: the packs of all of them are split
// between threads (common/split_copy.h) when large, since the packs of a
// put's first unit are all its send waits for.
std::string append_segments(const std::vector<Column>& columns, std::span<const std::span<const size_t>> segments,
                            Frames& frames) {
  MsgpackWriter out;
  out.array(columns.size() * segments.size());
  std::vector<FrameSource> sources;
  sources.reserve(columns.size() * segments.size());
  std::vector<iovec> to, from;
  for (const std::span<const size_t> segment : segments) {
    for (const Column& column : columns) sources.push_back(plan_column(out, column, segment, to, from));
  }
  (void)copy_split(to, from, kPackBytesPerThread, kPackMaxThreads, copy_in_memory);
  for (FrameSource& source : sources) frames.push_back(frame_of(std::move(source.buffer), source.offset, source.size));
  return std::move(out).take();
}

// The columns of one segment: `items` are their entries, their frames from `frames[first]` on.
std::vector<Column> take_segment(std::span<const std::string_view> items, Frames& frames, size_t first, size_t samples,
                                 std::string_view what) {
  std::vector<Column> columns;
  columns.reserve(items.size());
  for (size_t c = 0; c < items.size(); ++c) {
    const EncodedMap entry(items[c], kValueDepth + 1, std::string(what) + " column " + std::to_string(c),
                           {"field", "dtype", "object", "shapes", "offsets"});
    Column column;
    column.field = entry.text("field");
    column.dtype = parse_dtype(entry.text("dtype"));
    column.is_object = entry.boolean("object");
    column.shapes = read_shapes(entry, "shapes");
    const auto offsets = entry.numbers<uint64_t>("offsets");
    if (offsets.size() != samples + 1) {
      entry.fail("offsets", "must hold " + std::to_string(samples + 1) + " offsets");
    }
    if (column.shapes.size() != 1 && column.shapes.size() != samples) {
      entry.fail("shapes", "must hold one shape or one per sample");
    }
    column.offsets.assign(offsets.begin(), offsets.end());
    column.buffer = stored_buffer_of(std::move(frames[first + c]));
    column.validate();  // offsets and shapes against the frame's bytes
    columns.push_back(std::move(column));
  }
  return columns;
}

}  // namespace

std::string append_columns(const std::vector<Column>& columns, std::span<const size_t> positions, Frames& frames) {
  std::vector<size_t> all;
  const std::span<const size_t> segment = positions_or_all(columns, positions, all);
  return append_segments(columns, std::span(&segment, 1), frames);
}

ColumnSegments append_column_segments(const std::vector<Column>& columns, std::span<const size_t> positions,
                                      Frames& frames) {
  std::vector<size_t> all;
  positions = positions_or_all(columns, positions, all);
  const std::vector<std::span<const size_t>> segments = segments_of(columns, positions);
  if (segments.size() <= 1) return {append_columns(columns, positions, frames), {}};
  ColumnSegments out{append_segments(columns, segments, frames), {}};
  out.samples.reserve(segments.size());
  for (const std::span<const size_t> segment : segments) out.samples.push_back(segment.size());
  return out;
}

std::string describe_columns(const std::vector<Column>& columns, std::span<const size_t> positions,
                             std::vector<std::vector<std::span<const std::byte>>>& pieces) {
  std::vector<size_t> all;
  positions = positions_or_all(columns, positions, all);
  MsgpackWriter out;
  out.array(columns.size());
  for (const Column& column : columns) {
    pieces.emplace_back();
    write_column_entry(out, column, positions, pieces.back());
  }
  return std::move(out).take();
}

size_t column_count(std::string_view entries) {
  const std::optional<std::vector<std::string_view>> items = array_elements(entries, kValueDepth);
  return items ? items->size() : 0;
}

std::vector<Column> take_columns(std::string_view entries, Frames& frames, size_t first, size_t samples,
                                 std::string_view what) {
  return std::move(take_column_segments(entries, frames, first, {}, samples, what).front());
}

std::vector<std::vector<Column>> take_column_segments(std::string_view entries, Frames& frames, size_t first,
                                                      std::span<const uint64_t> segment_samples, size_t samples,
                                                      std::string_view what) {
  const std::vector<std::string_view> items = array_items(entries, std::string(what) + " columns must be an array");
  if (frames.size() != first + items.size()) {
    throw_invalid(std::string(what) + " names " + std::to_string(items.size()) + " columns but carries " +
                  std::to_string(frames.size() > first ? frames.size() - first : 0) + " data frames");
  }
  const uint64_t whole = samples;
  if (segment_samples.empty()) {
    segment_samples = std::span(&whole, 1);
  } else {
    uint64_t total = 0;
    bool counts_fit = true;
    for (const uint64_t count : segment_samples) {
      counts_fit = counts_fit && count > 0 && count <= samples - total;
      if (counts_fit) total += count;
    }
    if (!counts_fit || total != samples) {
      throw_invalid(std::string(what) + " segment_samples must be positive counts that add up to its " +
                    std::to_string(samples) + " samples");
    }
  }
  if (items.size() % segment_samples.size() != 0) {
    throw_invalid(std::string(what) + " names " + std::to_string(items.size()) + " columns for " +
                  std::to_string(segment_samples.size()) + " segments: each segment must name the same columns");
  }
  const size_t per_segment = items.size() / segment_samples.size();
  std::vector<std::vector<Column>> segments;
  segments.reserve(segment_samples.size());
  for (size_t k = 0; k < segment_samples.size(); ++k) {
    segments.push_back(take_segment(std::span(items).subspan(k * per_segment, per_segment), frames,
                                    first + k * per_segment, segment_samples[k], what));
    for (size_t c = 0; c < per_segment; ++c) {
      if (segments[k][c].field != segments[0][c].field) {
        throw_invalid(std::string(what) + " segment " + std::to_string(k) + " column " + std::to_string(c) +
                      " is field \"" + segments[k][c].field + "\"; segment 0's is \"" + segments[0][c].field +
                      "\": each segment must name the same columns in the same order");
      }
    }
  }
  return segments;
}

std::string append_views(const std::vector<std::vector<SampleView>>& rows, size_t fields, Frames& frames) {
  const size_t first = frames.size();  // frame numbers count from here
  MsgpackWriter out;
  out.array(fields);
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
    MsgpackMapWriter entry;
    entry.set("frames").numbers(std::span<const uint32_t>(frame_index));
    entry.set("offsets").numbers(std::span<const uint64_t>(offsets));
    entry.set("sizes").numbers(std::span<const uint64_t>(sizes));
    entry.set("dtypes").numbers(std::span<const uint8_t>(dtypes));
    entry.set("objects").numbers(std::span<const uint8_t>(objects));
    write_shapes(entry.set("shapes"), shapes);
    entry.write(out);
  }
  return std::move(out).take();
}

std::vector<std::vector<SampleView>> take_views(std::string_view entries, Frames& frames, size_t first, size_t rows,
                                                size_t fields, std::string_view what) {
  const std::string must_describe = std::string(what) + " must describe " + std::to_string(fields) + " fields";
  const std::vector<std::string_view> items = array_items(entries, must_describe);
  if (items.size() != fields) throw_invalid(must_describe);
  std::vector<std::shared_ptr<const Buffer>> buffers;
  buffers.reserve(frames.size() - std::min(first, frames.size()));
  for (size_t i = first; i < frames.size(); ++i) buffers.push_back(buffer_of(std::move(frames[i])));
  std::vector<std::vector<SampleView>> out(rows, std::vector<SampleView>(fields));
  const auto dtype_count = static_cast<uint8_t>(DType::kFloat64) + 1;
  for (size_t f = 0; f < fields; ++f) {
    const EncodedMap entry(items[f], kValueDepth + 1, std::string(what) + " field " + std::to_string(f),
                           {"frames", "offsets", "sizes", "dtypes", "objects", "shapes"});
    const auto frame_index = entry.numbers<uint32_t>("frames");
    const auto offsets = entry.numbers<uint64_t>("offsets");
    const auto sizes = entry.numbers<uint64_t>("sizes");
    const auto dtypes = entry.numbers<uint8_t>("dtypes");
    const auto objects = entry.numbers<uint8_t>("objects");
    const auto shapes = read_shapes(entry, "shapes");
    for (const size_t count :
         {frame_index.size(), offsets.size(), sizes.size(), dtypes.size(), objects.size(), shapes.size()}) {
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

}  // namespace seqflow::transport::wire
