#include "client/sharded_storage.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <thread>

#include "client/call_deadline.h"
#include "client/storage_index.h"
#include "transport/control_protocol.h"
#include "transport/local_copy.h"
#include "transport/storage_protocol.h"
#include "transport/storage_routing.h"
#include "transport/wire_codec.h"
#include "seqflow/error.h"
#include "common/aligned_buffer.h"
#include "durable/atomic_file.h"

namespace seqflow {
namespace {

using transport::Frames;
namespace control = transport::control;
namespace storage_protocol = transport::storage_protocol;
using transport::wire::reply_name;

// One request per unit that has work, sent before any reply is awaited; the
// first error is rethrown once every reply (or timeout) is in. Each request
// ends by the unit's timeout or the deadline of the client call (CallDeadline).
class FanOut {
 public:
  explicit FanOut(const std::vector<std::shared_ptr<transport::ConnectionPool>>& units) : units_(units) {}

  void send(size_t unit, std::string_view op, Frames args) {
    auto lease = units_[unit]->acquire();
    const auto deadline = CallDeadline::of_request(lease->options().timeout);
    CallDeadline::check_open(deadline, op, lease->endpoint());
    const uint64_t id = lease->send(op, std::move(args), deadline);
    calls_.push_back(Call{unit, std::move(lease), id, deadline});
  }

  // Each unit's reply or the error its call ended with, in send order.
  struct Outcome {
    size_t unit;
    Frames reply;
    std::optional<Error> error;
  };
  std::vector<Outcome> receive_each() {
    std::vector<Outcome> outcomes;
    for (Call& call : calls_) {
      try {
        outcomes.push_back({call.unit, call.lease->receive(call.id, call.deadline), std::nullopt});
      } catch (const Error& e) {
        outcomes.push_back({call.unit, Frames(), e});
      }
    }
    return outcomes;
  }

  // Replies in send order; rethrows the first failure after all are in.
  std::vector<std::pair<size_t, Frames>> receive_all() {
    std::vector<std::pair<size_t, Frames>> replies;
    for (Outcome& outcome : receive_each()) {
      if (outcome.error) throw *outcome.error;
      replies.emplace_back(outcome.unit, std::move(outcome.reply));
    }
    return replies;
  }

 private:
  struct Call {
    size_t unit;
    transport::ConnectionPool::Lease lease;
    uint64_t id;
    transport::Connection::Clock::time_point deadline;
  };
  const std::vector<std::shared_ptr<transport::ConnectionPool>>& units_;
  std::vector<Call> calls_;
};

// How long opening a same-host session may take (a local handshake).
constexpr std::chrono::milliseconds kSessionTimeout{5000};

// A unit's get reply whose values are still in the unit's memory: the
// request positions of its rows (which hold placeholder views) and the
// description of its frames.
struct DescribedRows {
  std::span<const size_t> positions;
  pid_t unit_pid;  // from the unit's session, never from its reply
};

// Copies the values of described rows out of the units' memory into one
// new buffer per field, rows in request order: a field of the get is then
// one run of bytes, a tensor without a gather, and each value is copied once.
void copy_described(const std::vector<DescribedRows>& described, size_t fields,
                    std::vector<std::vector<SampleView>>& rows) {
  std::vector<std::pair<size_t, size_t>> order;  // (position, index into described)
  for (size_t d = 0; d < described.size(); ++d) {
    for (const size_t p : described[d].positions) order.emplace_back(p, d);
  }
  std::sort(order.begin(), order.end());
  std::vector<std::vector<transport::local_copy::Piece>> pieces(described.size());
  for (size_t f = 0; f < fields; ++f) {
    size_t total = 0;
    for (const auto& [p, d] : order) total += rows[p][f].nbytes;
    WritableBuffer field = allocate_buffer(total);
    size_t at = 0;
    for (const auto& [p, d] : order) {
      SampleView& view = rows[p][f];
      pieces[d].push_back({view.buffer->data + view.offset, field.data + at, view.nbytes});
      view.buffer = field.buffer;
      view.offset = at;
      at += view.nbytes;
    }
  }
  for (size_t d = 0; d < described.size(); ++d) {
    transport::local_copy::read_pieces(described[d].unit_pid, pieces[d],
                                       reply_name(storage_protocol::kGet) + " local_frames");
  }
}

// Data bytes of the columns' samples at `positions` (all when empty).
size_t bytes_at(const std::vector<Column>& columns, std::span<const size_t> positions) {
  size_t total = 0;
  for (const Column& column : columns) {
    if (positions.empty()) {
      total += column.offsets.empty() ? 0 : column.offsets.back() - column.offsets.front();
      continue;
    }
    for (const size_t p : positions) total += column.offsets[p + 1] - column.offsets[p];
  }
  return total;
}

}  // namespace

ShardedStorage::ShardedStorage(std::vector<std::shared_ptr<transport::ConnectionPool>> units,
                               std::shared_ptr<transport::ConnectionPool> controller, bool local_copy)
    : units_(std::move(units)),
      controller_(std::move(controller)),
      local_copy_(std::make_unique<std::atomic<bool>[]>(units_.size())),
      sessions_(units_.size()) {
  if (units_.empty()) throw_invalid("remote storage needs at least one storage unit");
  for (size_t u = 0; u < units_.size(); ++u) local_copy_[u] = local_copy;
}

std::shared_ptr<const transport::local_copy::Session> ShardedStorage::session_for(size_t unit) const {
  if (!local_copy_[unit]) return nullptr;
  std::lock_guard lock(sessions_mutex_);
  auto& session = sessions_[unit];
  if (session && session->usable()) return session;
  session.reset();
  try {
    const std::string address = storage_protocol::decode_local_copy_session_reply(
        units_[unit]->call(storage_protocol::kLocalCopySession, storage_protocol::encode_bare_request()));
    session = transport::local_copy::Session::open(address, kSessionTimeout);
  } catch (const Error&) {
    session.reset();  // a unit that cannot be asked: the bytes go over TCP
  }
  if (!session) local_copy_[unit] = false;
  return session;
}

void ShardedStorage::put(const SampleKeys& samples, const std::vector<Column>& columns) {
  const std::span<const int64_t> global_indexes = samples.global_indexes;
  for (const Column& column : columns) {
    column.validate();
    if (column.sample_count() != global_indexes.size()) {
      throw_invalid("column \"" + column.field + "\" holds " + std::to_string(column.sample_count()) +
                    " samples; the put has " + std::to_string(global_indexes.size()) + " global indexes");
    }
  }
  const auto shards = transport::shard_indexes(global_indexes, units_.size());
  // With one unit every sample goes there: frames point into the columns.
  const auto positions_of = [&](size_t u) {
    return units_.size() == 1 ? std::span<const size_t>() : std::span<const size_t>(shards[u].positions);
  };
  const auto with_bytes = [&](size_t u, const std::optional<StorageUnit::Ticket>& ticket) {
    Frames data;
    const transport::wire::ColumnSegments segments =
        transport::wire::append_column_segments(columns, positions_of(u), data);
    return storage_protocol::encode_put_request(samples, shards[u].positions, segments.entries, std::move(data), ticket,
                                                segments.samples);
  };
  // A unit that refused the session (it restarted since, or cannot read this
  // process) gets the bytes now; the next put opens a new session. A unit
  // without room (it waits for room: WhenFull::kWait) stored nothing.
  std::map<size_t, StorageUnit::Full> full;  // unit -> its "storage full" answer and ticket
  const auto retried_as = [&](size_t u) {
    const size_t first = shards[u].positions.front();
    return StorageUnit::RetriedPut{samples.global_indexes[first], samples.generations[first], samples.write_version,
                                   shards[u].positions.size()};
  };
  // Every answer is taken in before an error goes up: a "full" one that came
  // with the failure holds a place in its unit's line, which the put leaves.
  std::optional<Error> failure;
  std::vector<size_t> refused;  // units that did not read this process's memory
  const auto take_answers = [&](FanOut& answers) {
    for (auto& [unit, frames, error] : answers.receive_each()) {
      if (error) {
        if (!failure) failure = std::move(error);
        continue;
      }
      try {
        storage_protocol::PutReply reply = storage_protocol::decode_put_reply(frames);
        if (reply.full) full[unit] = {std::move(*reply.full), reply.ticket};
        if (reply.local_copy_refused) refused.push_back(unit);
      } catch (const Error& e) {
        if (!failure) failure = e;
      }
    }
  };
  FanOut fan_out(units_);
  try {
    for (size_t u = 0; u < shards.size(); ++u) {
      if (shards[u].global_indexes.empty()) continue;
      const auto session = local_copy_[u] && bytes_at(columns, positions_of(u)) >= transport::local_copy::kMinBytes
                               ? session_for(u)
                               : nullptr;
      if (session && session->unit_reads_us()) {
        // The unit assembles each column's frame from the samples where they
        // lie in the columns, which stay valid until it has replied.
        std::vector<std::vector<std::span<const std::byte>>> pieces;
        const std::string entries = transport::wire::describe_columns(columns, positions_of(u), pieces);
        fan_out.send(u, storage_protocol::kPut,
                     storage_protocol::encode_local_put_request(
                         samples, shards[u].positions, entries,
                         transport::local_copy::seal(transport::local_copy::describe(pieces), *session)));
      } else {
        fan_out.send(u, storage_protocol::kPut, with_bytes(u, std::nullopt));
      }
    }
  } catch (const Error& e) {
    failure = e;  // the units sent to already are answered below: their memory reads end first
  }
  take_answers(fan_out);
  {
    std::lock_guard lock(sessions_mutex_);
    for (const size_t unit : refused) sessions_[unit].reset();
  }
  if (!failure && !refused.empty()) {
    FanOut resend(units_);
    try {
      for (const size_t unit : refused) resend.send(unit, storage_protocol::kPut, with_bytes(unit, std::nullopt));
    } catch (const Error& e) {
      failure = e;  // the resends already sent are answered below
    }
    take_answers(resend);
  }
  if (failure) {
    leave_lines(full, retried_as);
    throw *failure;
  }
  if (!full.empty()) wait_for_room(samples, full, retried_as, with_bytes);
}

// The units told the put to wait until clears make room: it asks them again,
// backing off from 1 ms to 100 ms, until they stored it or the put's
// deadline (its call's, CallDeadline, or else one unit timeout) passed.
// Each try first asks whether the put fits now (room, with its ticket and
// without its values) and sends the values only then; each put stores all
// or nothing on its unit, so retries never duplicate. A unit whose answer
// carried no ticket (it keeps the put no place: max_waiting_puts hold one)
// is sent the values on every try.
void ShardedStorage::wait_for_room(const SampleKeys& samples, std::map<size_t, StorageUnit::Full>& full,
                                   const std::function<StorageUnit::RetriedPut(size_t)>& retried_as,
                                   const PutRequest& request) const {
  constexpr std::chrono::milliseconds kFirstBackoff{1};
  constexpr std::chrono::milliseconds kMaxBackoff{100};
  // Retries come often enough that the unit keeps the put's place in line.
  static_assert(kMaxBackoff * 5 <= StorageUnit::kRetriedPutPlace);
  using Clock = CallDeadline::Clock;
  const Clock::time_point started = Clock::now();
  const Clock::time_point deadline =
      CallDeadline::of_request(units_[full.begin()->first]->acquire()->options().timeout);
  std::chrono::milliseconds backoff = kFirstBackoff;
  try {
    for (;;) {
      const Clock::time_point now = Clock::now();
      if (now >= deadline) {
        const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - started);
        throw_invalid(full.begin()->second.message + "; the put waited " + std::to_string(waited.count()) +
                      " ms for room (its timeout)");
      }
      const std::function<void()> wait = [&] {
        std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
      };
      if (samples.around_wait != nullptr) {
        (*samples.around_wait)(wait);  // the caller's locks are released meanwhile
      } else {
        wait();
      }
      backoff = std::min(backoff * 2, kMaxBackoff);
      if (Clock::now() >= deadline) continue;
      FanOut probe(units_);
      FanOut retry(units_);
      for (const auto& [unit, answer] : full) {
        if (answer.ticket) {
          probe.send(unit, storage_protocol::kRoom,
                     storage_protocol::encode_room_request({retried_as(unit), *answer.ticket, false}));
        } else {
          retry.send(unit, storage_protocol::kPut, request(unit, std::nullopt));
        }
      }
      // A unit's error (or malformed answer) fails the put once every
      // answer is in; no values are sent after it.
      std::optional<Error> failure;
      for (auto& [unit, frames, error] : probe.receive_each()) {
        try {
          if (error) throw *error;
          StorageUnit::Room room = storage_protocol::decode_room_reply(frames);
          if (room.placed && room.full) {
            full[unit].message = std::move(*room.full);
            continue;
          }
          // It fits, or its place lapsed: the put itself decides (and, full,
          // takes a new place with a new ticket).
          if (!failure) retry.send(unit, storage_protocol::kPut, request(unit, full[unit].ticket));
        } catch (const Error& e) {
          if (!failure) failure = e;
        }
      }
      // Every put's answer is taken in before an error goes up: one that
      // carries a new ticket is the one leave_lines must name.
      for (auto& [unit, frames, error] : retry.receive_each()) {
        try {
          if (error) throw *error;
          storage_protocol::PutReply reply = storage_protocol::decode_put_reply(frames);
          if (reply.full) {
            full[unit] = {std::move(*reply.full), reply.ticket};
          } else {
            full.erase(unit);
          }
        } catch (const Error& e) {
          if (!failure) failure = e;
        }
      }
      if (failure) throw *failure;
      if (full.empty()) return;
    }
  } catch (...) {
    leave_lines(full, retried_as);
    throw;
  }
}

// Best effort, briefly: the put failed already.
void ShardedStorage::leave_lines(const std::map<size_t, StorageUnit::Full>& full,
                                 const std::function<StorageUnit::RetriedPut(size_t)>& retried_as) const {
  constexpr std::chrono::milliseconds kLeaveBudget{200};
  const CallDeadline scope(CallDeadline::Clock::now() + kLeaveBudget);
  try {
    FanOut fan_out(units_);
    for (const auto& [unit, answer] : full) {
      if (!answer.ticket) continue;  // it holds no place there
      fan_out.send(unit, storage_protocol::kRoom,
                   storage_protocol::encode_room_request({retried_as(unit), *answer.ticket, true}));
    }
    fan_out.receive_each();
  } catch (const Error&) {
    // A unit that does not hear it lets the place lapse (StorageUnit::kRetriedPutPlace).
  }
}

std::vector<std::vector<SampleView>> ShardedStorage::get(const SampleKeys& samples,
                                                         std::span<const std::string> fields) const {
  const std::span<const int64_t> global_indexes = samples.global_indexes;
  const auto shards = transport::shard_indexes(global_indexes, units_.size());
  const std::vector<std::string> names(fields.begin(), fields.end());
  std::vector<std::vector<SampleView>> rows(global_indexes.size());
  FanOut fan_out(units_);
  std::optional<Error> failure;
  // The session each unit was asked under: its pid is the one to copy from.
  std::vector<std::shared_ptr<const transport::local_copy::Session>> asked_under(units_.size());
  // Every request that could be sent is answered and its reply looked at,
  // also when another unit failed: a reply's lease must be given back.
  for (size_t u = 0; u < shards.size(); ++u) {
    if (shards[u].global_indexes.empty()) continue;
    try {
      std::span<const uint8_t> local_copy;
      if (auto session = session_for(u); session && session->reads_unit()) {
        asked_under[u] = std::move(session);
        local_copy = asked_under[u]->id();
      }
      fan_out.send(u, storage_protocol::kGet,
                   storage_protocol::encode_get_request(samples, shards[u].positions, names, local_copy));
    } catch (const Error& e) {
      if (!failure) failure = e;
    }
  }
  std::vector<std::pair<size_t, uint64_t>> leases;  // (unit, lease): given back once read
  std::vector<DescribedRows> described;
  for (auto& [unit, frames, error] : fan_out.receive_each()) {
    if (error) {
      if (!failure) failure = error;
      continue;
    }
    try {
      const storage_protocol::GetReply reply = storage_protocol::decode_get_reply(frames);
      if (reply.lease) leases.emplace_back(unit, *reply.lease);
      if (reply.local_frames) {
        if (!asked_under[unit]) {
          throw_invalid(reply_name(storage_protocol::kGet) +
                        " field 'local_frames' came from a unit this client asked for the bytes");
        }
        // take_views lays the values out over stand-ins; copy_described fetches them.
        Frames stand_ins = transport::local_copy::placeholders(*reply.local_frames,
                                                               reply_name(storage_protocol::kGet) + " local_frames");
        frames.resize(1);
        std::move(stand_ins.begin(), stand_ins.end(), std::back_inserter(frames));
        described.push_back({shards[unit].positions, asked_under[unit]->unit_pid()});
      }
      auto views = transport::wire::take_views(reply.fields, frames, 1, shards[unit].positions.size(), names.size(),
                                               reply_name(storage_protocol::kGet));
      for (size_t i = 0; i < views.size(); ++i) rows[shards[unit].positions[i]] = std::move(views[i]);
    } catch (const Error& e) {
      if (!failure) failure = e;
    }
  }
  if (!failure) {
    try {
      copy_described(described, names.size(), rows);
    } catch (const Error& e) {
      failure = e;
    }
  }
  give_back(leases);
  if (failure) throw *failure;
  return rows;
}

void ShardedStorage::commit(const SampleKeys& samples, std::span<const std::string> fields) {
  settle_version(storage_protocol::kCommit, samples, fields);
}

void ShardedStorage::discard(const SampleKeys& samples, std::span<const std::string> fields) {
  settle_version(storage_protocol::kDiscard, samples, fields);
}

void ShardedStorage::settle_version(std::string_view op, const SampleKeys& samples,
                                    std::span<const std::string> fields) {
  // As a unit refuses it, also when no unit would be asked.
  if (samples.write_version == 0) {
    throw_invalid(std::string(op) + " needs write_version above 0 (an unversioned put commits itself); got 0");
  }
  const auto shards = transport::shard_indexes(samples.global_indexes, units_.size());
  const std::vector<std::string> names(fields.begin(), fields.end());
  FanOut fan_out(units_);
  for (size_t u = 0; u < shards.size(); ++u) {
    if (shards[u].global_indexes.empty()) continue;
    const auto write_tag =
        samples.write_tags.size() == units_.size() ? std::optional(samples.write_tags[u]) : std::nullopt;
    fan_out.send(u, op, storage_protocol::encode_settle_request(samples, shards[u].positions, names, write_tag));
  }
  for (const auto& [unit, frames] : fan_out.receive_all()) storage_protocol::decode_empty_reply(frames, op);
}

void ShardedStorage::give_back(const std::vector<std::pair<size_t, uint64_t>>& leases) const {
  if (leases.empty()) return;
  FanOut fan_out(units_);
  for (const auto& [unit, lease] : leases) {
    fan_out.send(unit, storage_protocol::kRelease, storage_protocol::encode_release_request(lease));
  }
  for (const auto& [unit, frames] : fan_out.receive_all()) {
    if (!storage_protocol::decode_release_reply(frames)) {
      throw Error(ErrorCode::kTimeout, "storage unit " + units_[unit]->endpoint() +
                                           " let go of a get's values before this client had copied them "
                                           "(its lease ran out); nothing was returned, call get again");
    }
  }
}

void ShardedStorage::clear(std::span<const int64_t>) {
  throw_invalid(
      "remote storage units drop data only for their controller: clear samples through the controller "
      "(clear_samples, clear_partition, kv_clear)");
}

void ShardedStorage::clear_generations(std::span<const int64_t> global_indexes, std::span<const uint64_t>) {
  clear(global_indexes);
}

void ShardedStorage::clear_all() {
  throw_invalid(
      "remote storage units drop data only for their controller: clear partitions through the controller "
      "(clear_partition)");
}

StorageStats ShardedStorage::stats() const {
  FanOut fan_out(units_);
  for (size_t u = 0; u < units_.size(); ++u) {
    fan_out.send(u, storage_protocol::kStats, storage_protocol::encode_bare_request());
  }
  StorageStats total;
  for (auto& [unit, frames] : fan_out.receive_all()) {
    const StorageStats stats = storage_protocol::decode_stats_reply(frames);
    total.samples += stats.samples;
    total.bytes += stats.bytes;
    total.overhead_bytes += stats.overhead_bytes;
  }
  return total;
}

// The index lists each unit's fingerprint, so that the checkpoint
// directory's manifest (which fingerprints the index) covers the unit files
// too, and each unit refuses a file of another save.
void ShardedStorage::save(const std::string& path) const {
  write_index(path,
              control::decode_fingerprints_reply(
                  controller_->call(control::kSaveStorage, control::encode_path_request(path)), control::kSaveStorage));
}

void ShardedStorage::save_with_controller(const std::string& controller_path, const std::string& storage_path) const {
  write_index(storage_path, control::decode_fingerprints_reply(
                                controller_->call(control::kSaveCheckpoint, control::encode_save_checkpoint_request(
                                                                                {controller_path, storage_path})),
                                control::kSaveCheckpoint));
}

void ShardedStorage::write_index(const std::string& path, const std::vector<uint64_t>& fingerprints) const {
  if (fingerprints.size() != units_.size()) {
    throw_invalid("the controller's save reply holds " + std::to_string(fingerprints.size()) + " fingerprints for " +
                  std::to_string(units_.size()) + " storage units");
  }
  // Durable as the unit files are (temporary, fsync, rename): the directory
  // swap that publishes the checkpoint must not publish an empty index.
  const std::string text = storage_index_text(fingerprints);
  durable::AtomicFileWriter index(path);
  index.write(std::as_bytes(std::span(text)));
  index.commit();
}

void ShardedStorage::load(const std::string& path) {
  const std::vector<uint64_t> fingerprints = read_storage_index(path, units_.size());
  // Every unit checks its file before any unit loads: a file of another
  // save must not leave some units loaded and others not.
  for (const bool check_only : {true, false}) {
    if (check_only && fingerprints.empty()) continue;
    control::decode_empty_reply(controller_->call(control::kLoadStorage, control::encode_load_storage_request(
                                                                             {path, fingerprints, check_only})),
                                control::kLoadStorage);
  }
}

}  // namespace seqflow
