#include <algorithm>
#include <cstring>

#include "common/aligned_buffer.h"
#include "storage/value_check.h"
#include "transport/encoded_map.h"

namespace seqflow::transport::wire {
namespace {

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

// A column restricted to `positions`: its header entry,
// laid out as if its samples were packed back to back, and where each
// sample's bytes lie in the column's buffer.
Json column_entry(const Column& column, std::span<const size_t> positions,
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
  return Json{{"field", column.field},
              {"dtype", std::string(dtype_name(column.dtype))},
              {"object", column.is_object},
              {"shapes", encode_shapes(shapes)},
              {"offsets", binary_of(std::span<const uint64_t>(offsets))}};
}

Json append_column(const Column& column, std::span<const size_t> positions, Frames& frames) {
  std::vector<std::span<const std::byte>> samples;
  Json entry = column_entry(column, positions, samples);
  size_t total = 0;
  for (const auto& sample : samples) total += sample.size();
  if (contiguous(column, positions)) {
    frames.push_back(frame_of(column.buffer, positions.empty() ? 0 : column.offsets[positions.front()], total));
  } else {
    // Packed into an aligned buffer (huge pages when large): a message of
    // the size allocated by ZeroMQ faults in 4 KiB pages, which made packing
    // the 128 MiB columns of a put to several units slower than the network.
    WritableBuffer packed = allocate_buffer(total);
    size_t at = 0;
    for (const auto& sample : samples) {
      if (!sample.empty()) std::memcpy(packed.data + at, sample.data(), sample.size());
      at += sample.size();
    }
    frames.push_back(frame_of(std::move(packed.buffer), 0, total));
  }
  return entry;
}

// All samples of the columns when `positions` is empty.
std::span<const size_t> positions_or_all(const std::vector<Column>& columns, std::span<const size_t> positions,
                                         std::vector<size_t>& all) {
  if (!positions.empty() || columns.empty()) return positions;
  all.resize(columns.front().sample_count());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return all;
}

}  // namespace

Json append_columns(const std::vector<Column>& columns, std::span<const size_t> positions, Frames& frames) {
  std::vector<size_t> all;
  positions = positions_or_all(columns, positions, all);
  Json out = Json::array();
  for (const Column& column : columns) out.push_back(append_column(column, positions, frames));
  return out;
}

Json describe_columns(const std::vector<Column>& columns, std::span<const size_t> positions,
                      std::vector<std::vector<std::span<const std::byte>>>& pieces) {
  std::vector<size_t> all;
  positions = positions_or_all(columns, positions, all);
  Json out = Json::array();
  for (const Column& column : columns) {
    pieces.emplace_back();
    out.push_back(column_entry(column, positions, pieces.back()));
  }
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

std::vector<std::vector<SampleView>> take_views(const Json& entry_list, Frames& frames, size_t first, size_t rows,
                                                size_t fields, std::string_view what) {
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
