#include "client/sharded_storage.h"

#include <fstream>
#include <optional>

#include "client/call_deadline.h"
#include "net/storage_routing.h"
#include "net/wire_codec.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

using net::Frames;
using net::wire::Header;
using net::wire::Json;

// One request per unit that has work, sent before any reply is awaited; the
// first error is rethrown once every reply (or timeout) is in. Each request
// ends by the unit's timeout or the deadline of the client call (CallDeadline).
class FanOut {
 public:
  explicit FanOut(const std::vector<std::shared_ptr<net::ConnectionPool>>& units) : units_(units) {}

  void send(size_t unit, std::string_view op, Frames args) {
    auto lease = units_[unit]->acquire();
    const auto deadline = CallDeadline::of_request(lease->options().timeout);
    CallDeadline::check_open(deadline, op, lease->endpoint());
    const uint64_t id = lease->send(op, std::move(args), deadline);
    calls_.push_back(Call{unit, std::move(lease), id, deadline});
  }

  // Replies in send order; rethrows the first failure after all are in.
  std::vector<std::pair<size_t, Frames>> receive_all() {
    std::vector<std::pair<size_t, Frames>> replies;
    std::optional<Error> first_error;
    for (Call& call : calls_) {
      try {
        replies.emplace_back(call.unit, call.lease->receive(call.id, call.deadline));
      } catch (const Error& e) {
        if (!first_error) first_error = e;
      }
    }
    if (first_error) throw *first_error;
    return replies;
  }

 private:
  struct Call {
    size_t unit;
    net::ConnectionPool::Lease lease;
    uint64_t id;
    net::Connection::Clock::time_point deadline;
  };
  const std::vector<std::shared_ptr<net::ConnectionPool>>& units_;
  std::vector<Call> calls_;
};

std::string unit_file(const std::string& path, size_t unit) { return path + ".unit" + std::to_string(unit); }

}  // namespace

ShardedStorage::ShardedStorage(std::vector<std::shared_ptr<net::ConnectionPool>> units)
    : units_(std::move(units)) {
  if (units_.empty()) throw_invalid("remote storage needs at least one storage unit");
}

void ShardedStorage::put(std::span<const int64_t> global_indexes, const std::vector<Column>& columns) {
  for (const Column& column : columns) {
    column.validate();
    if (column.sample_count() != global_indexes.size()) {
      throw_invalid("column \"" + column.field + "\" holds " + std::to_string(column.sample_count()) +
                    " samples; the put has " + std::to_string(global_indexes.size()) + " global indexes");
    }
  }
  const auto shards = net::shard_indexes(global_indexes, units_.size());
  FanOut fan_out(units_);
  for (size_t u = 0; u < shards.size(); ++u) {
    if (shards[u].global_indexes.empty()) continue;
    // With one unit every sample goes there: the frames point into the columns.
    const std::span<const size_t> positions =
        units_.size() == 1 ? std::span<const size_t>() : std::span<const size_t>(shards[u].positions);
    Frames args(1);
    const Json entries = net::wire::append_columns(columns, positions, args);
    args[0] = net::wire::header_frame(
        Json{{"indexes", net::wire::binary_of(std::span<const int64_t>(shards[u].global_indexes))},
             {"columns", entries}});
    fan_out.send(u, "put", std::move(args));
  }
  fan_out.receive_all();
}

std::vector<std::vector<SampleView>> ShardedStorage::get(std::span<const int64_t> global_indexes,
                                                         std::span<const std::string> fields) const {
  const auto shards = net::shard_indexes(global_indexes, units_.size());
  const std::vector<std::string> names(fields.begin(), fields.end());
  FanOut fan_out(units_);
  for (size_t u = 0; u < shards.size(); ++u) {
    if (shards[u].global_indexes.empty()) continue;
    fan_out.send(u, "get",
                 net::wire::header_message(Json{
                     {"indexes", net::wire::binary_of(std::span<const int64_t>(shards[u].global_indexes))},
                     {"fields", names}}));
  }
  std::vector<std::vector<SampleView>> rows(global_indexes.size());
  for (auto& [unit, frames] : fan_out.receive_all()) {
    const Json header = net::wire::read_header(frames, 0, "get reply");
    const Header reply(header, "get reply", {"fields"});
    auto views = net::wire::take_views(reply.at("fields"), frames, 1, shards[unit].positions.size(),
                                       names.size(), "get reply");
    for (size_t i = 0; i < views.size(); ++i) rows[shards[unit].positions[i]] = std::move(views[i]);
  }
  return rows;
}

void ShardedStorage::clear(std::span<const int64_t> global_indexes) {
  const auto shards = net::shard_indexes(global_indexes, units_.size());
  FanOut fan_out(units_);
  for (size_t u = 0; u < shards.size(); ++u) {
    if (shards[u].global_indexes.empty()) continue;
    fan_out.send(u, "clear",
                 net::wire::header_message(Json{
                     {"indexes", net::wire::binary_of(std::span<const int64_t>(shards[u].global_indexes))}}));
  }
  fan_out.receive_all();
}

void ShardedStorage::clear_all() {
  FanOut fan_out(units_);
  for (size_t u = 0; u < units_.size(); ++u)
    fan_out.send(u, "clear_all", net::wire::header_message(Json::object()));
  fan_out.receive_all();
}

StorageStats ShardedStorage::stats() const {
  FanOut fan_out(units_);
  for (size_t u = 0; u < units_.size(); ++u)
    fan_out.send(u, "stats", net::wire::header_message(Json::object()));
  StorageStats total;
  for (auto& [unit, frames] : fan_out.receive_all()) {
    const Json header = net::wire::read_header(frames, 0, "stats reply");
    const Header reply(header, "stats reply", {"samples", "bytes"});
    total.samples += static_cast<uint64_t>(reply.integer("samples"));
    total.bytes += static_cast<uint64_t>(reply.integer("bytes"));
  }
  return total;
}

void ShardedStorage::save(const std::string& path) const {
  FanOut fan_out(units_);
  for (size_t u = 0; u < units_.size(); ++u)
    fan_out.send(u, "save", net::wire::header_message(Json{{"path", unit_file(path, u)}}));
  fan_out.receive_all();
  std::ofstream index(path, std::ios::trunc);
  index << Json{{"storage_units", units_.size()}}.dump() << "\n";
  if (!index.flush()) throw Error(ErrorCode::kInternal, "cannot write the storage checkpoint index " + path);
}

void ShardedStorage::load(const std::string& path) {
  std::ifstream index(path);
  if (!index) throw Error(ErrorCode::kNotFound, "no storage checkpoint index at " + path);
  Json listing;
  try {
    index >> listing;
  } catch (const Json::exception& e) {
    throw_invalid("storage checkpoint index " + path + " is corrupt: " + e.what());
  }
  const Header header(listing, "storage checkpoint index " + path, {"storage_units"});
  if (header.integer("storage_units") != static_cast<int64_t>(units_.size())) {
    throw_invalid("storage checkpoint " + path + " was saved from " +
                  std::to_string(header.integer("storage_units")) + " storage units; this cluster has " +
                  std::to_string(units_.size()));
  }
  FanOut fan_out(units_);
  for (size_t u = 0; u < units_.size(); ++u)
    fan_out.send(u, "load", net::wire::header_message(Json{{"path", unit_file(path, u)}}));
  fan_out.receive_all();
}

}  // namespace seqflow
