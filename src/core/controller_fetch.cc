// Controller::get_meta: insert, force_fetch, and fetch through the sampler,
// polling or blocking on the condition variable until a deadline.
#include <algorithm>
#include <chrono>

#include "core/batch_meta_builder.h"
#include "core/controller_state.h"
#include "core/insert_undo.h"
#include "core/name_rule.h"
#include "core/sample_info.h"
#include "core/scan_counter.h"
#include "seqflow/controller.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

using core::PartitionState;

// A prefix-stable sampler first sees max(this, 2 * batch_size) ready samples.
constexpr size_t kFirstWindow = 64;
// Longer waits are clamped so that now() + timeout cannot overflow.
constexpr std::chrono::milliseconds kLongestWait = std::chrono::hours(24 * 365);

void validate(const MetaRequest& request) {
  core::check_name(request.partition_id, "partition_id");
  for (size_t i = 0; i < request.fields.size(); ++i) {
    core::check_name(request.fields[i], "fields[" + std::to_string(i) + "]");
  }
  if (!request.task_name.empty()) core::check_name(request.task_name, "task_name");
  if (request.mode != MetaMode::kFetch && request.lease.count() != 0) {
    throw_invalid("lease applies to fetch mode only, got " + std::to_string(request.lease.count()) + " ms for " +
                  (request.mode == MetaMode::kInsert ? "insert" : "force_fetch"));
  }
  switch (request.mode) {
    case MetaMode::kInsert:
      core::check_sample_count(request.batch_size, "batch_size");
      return;
    case MetaMode::kForceFetch:
      return;  // every produced sample; batch_size does not apply
    case MetaMode::kFetch:
      break;
    default:
      throw_invalid("mode must be insert, fetch or force_fetch, got " + std::to_string(static_cast<int>(request.mode)));
  }
  if (request.batch_size <= 0) {
    throw_invalid("batch_size must be positive, got " + std::to_string(request.batch_size));
  }
  if (request.task_name.empty()) throw_invalid("task_name must not be empty in fetch mode");
  if (request.sampling.dp_rank < 0) {
    throw_invalid("dp_rank must be >= 0, got " + std::to_string(request.sampling.dp_rank));
  }
  if (request.sampling.batch_index < 0) {
    throw_invalid("batch_index must be >= 0, got " + std::to_string(request.sampling.batch_index));
  }
  if (request.timeout.count() < 0) {
    throw_invalid("timeout must be >= 0 ms, got " + std::to_string(request.timeout.count()));
  }
  if (request.lease.count() < 0 || request.lease > kMaxLease) {
    throw_invalid("lease must be 1 to " + std::to_string(kMaxLease.count()) + " ms (0: no lease), got " +
                  std::to_string(request.lease.count()));
  }
}

std::string describe(const MetaRequest& request) {
  std::string fields;
  for (const std::string& field : request.fields) fields += (fields.empty() ? "" : ",") + field;
  return "partition '" + request.partition_id + "', task '" + request.task_name + "', fields [" + fields +
         "], batch_size " + std::to_string(request.batch_size) + ", dp_rank " +
         std::to_string(request.sampling.dp_rank) + ", batch_index " + std::to_string(request.sampling.batch_index);
}

// An answer the sampler reserved earlier. Only samples still live and still
// consumed by the task are served: a cleared (and maybe reused) index is not.
// Nullopt (not ready: poll or wait) while one of them lacks a requested
// field: storage lost its data (forget_production) and it was not put again.
// A sampler's booked answers (other ranks' shares, tensor-parallel repeats)
// outlive any one fetch, so a lease that gave its samples back would leave
// them booked and served again: leases need a sampler that books nothing.
[[noreturn]] void refuse_booked_lease(const Sampler& sampler) {
  throw_invalid("lease: sampler '" + sampler.name() +
                "' books answers for other ranks or repeats, which a lease's expiry or release cannot take back; "
                "fetch with lease=0, or use a sampler that books nothing (sequential)");
}

std::optional<BatchMeta> serve_reserved(const core::ControlData& data, const PartitionState& partition,
                                        const MetaRequest& request, const std::vector<int64_t>& reserved,
                                        const Sampler& sampler) {
  if (request.lease.count() != 0) refuse_booked_lease(sampler);
  const core::TaskQueue* queue = partition.find_task(request.task_name);
  const auto mask = partition.mask(request.fields);
  std::vector<uint32_t> slots;
  slots.reserve(reserved.size());
  for (int64_t index : reserved) {
    auto slot = data.slot_of(partition, index);
    if (!slot || queue == nullptr || !queue->is_consumed(*slot)) continue;
    if (mask && !partition.has_all(*slot, *mask)) return std::nullopt;
    slots.push_back(*slot);
  }
  return core::collect_batch(data, partition, slots, request.fields);
}

// The slots of a sampler's answer; throws kInternal (a sampler bug) when it
// names a sample that is not live, or, for `consumed`, not unconsumed or twice.
// The sampler is named only then: name() builds a string.
[[noreturn]] void throw_bad_answer(const Sampler& sampler, int64_t index, bool consumed,
                                   const PartitionState& partition) {
  throw Error(ErrorCode::kInternal, "sampler '" + sampler.name() + "' returned global index " + std::to_string(index) +
                                        ", which is not " + (consumed ? "an unconsumed" : "a live") +
                                        " sample of partition '" + partition.name() + "'");
}

// `slots` (of `indexes`) again, once each unconsumed by the task is checked.
std::vector<uint32_t> check_consumable(const PartitionState& partition, const core::TaskQueue& queue,
                                       std::vector<uint32_t> slots, std::span<const int64_t> indexes,
                                       const Sampler& sampler) {
  for (size_t i = 0; i < slots.size(); ++i) {
    if (queue.is_consumed(slots[i])) throw_bad_answer(sampler, indexes[i], true, partition);
  }
  std::vector<uint32_t> sorted = slots;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw Error(ErrorCode::kInternal, "sampler '" + sampler.name() + "' consumed a sample twice");
  }
  return slots;
}

std::vector<uint32_t> answer_slots(const core::ControlData& data, const PartitionState& partition,
                                   const core::TaskQueue& queue, std::span<const int64_t> indexes, bool consumed,
                                   const Sampler& sampler) {
  std::vector<uint32_t> slots;
  slots.reserve(indexes.size());
  for (int64_t index : indexes) {
    auto slot = data.slot_of(partition, index);
    if (!slot) throw_bad_answer(sampler, index, consumed, partition);
    slots.push_back(*slot);
  }
  return consumed ? check_consumable(partition, queue, std::move(slots), indexes, sampler) : slots;
}

// One attempt at a fetch; nullopt when the sampler finds too little ready
// (nothing is, in a partition that does not exist). *returnable: the answer
// consumed exactly what it hands out, nothing reserved (for this caller
// earlier, or now for other ranks), so give_back may undo it whole.
std::optional<BatchMeta> sample_and_consume(core::ControlData& data, PartitionState& partition, Sampler& sampler,
                                            const MetaRequest& request, const core::FieldMask& mask,
                                            const Workload* task_workload, core::FetchLeases& leases, bool* returnable);

std::optional<BatchMeta> try_fetch(core::ControlData& data, Sampler& sampler, const MetaRequest& request,
                                   const Workload* task_workload, core::FetchLeases& leases, bool* returnable) {
  PartitionState* found = data.find(request.partition_id);
  if (found == nullptr) return std::nullopt;
  PartitionState& partition = *found;
  if (auto reserved = sampler.reserved(request.partition_id, request.task_name, request.sampling)) {
    return serve_reserved(data, partition, request, *reserved, sampler);
  }
  const auto mask = partition.mask(request.fields);
  if (!mask) return std::nullopt;  // a requested field was never produced here
  // A fetch that fails (out of memory, a sampler's bad answer) leaves no
  // task it made, unless it consumed for a sampler's booking.
  const bool task_is_new = partition.find_task(request.task_name) == nullptr;
  try {
    return sample_and_consume(data, partition, sampler, request, *mask, task_workload, leases, returnable);
  } catch (...) {
    const core::TaskQueue* task = partition.find_task(request.task_name);
    if (task_is_new && task != nullptr && task->unconsumed() == partition.size()) {
      partition.erase_task(request.task_name);
    }
    throw;
  }
}

// A leasing fetch's samples (what it hands out and consumes), leased to its
// task; the lease's id, or 0 without a lease.
uint64_t lease_served(const core::ControlData& data, core::FetchLeases& leases, const MetaRequest& request,
                      std::span<const int64_t> served) {
  if (request.lease.count() == 0) return 0;
  std::vector<uint64_t> generations;
  generations.reserve(served.size());
  for (int64_t index : served) generations.push_back(data.generation(index));
  return leases.lease(request.partition_id, request.task_name, served, generations,
                      std::chrono::steady_clock::now() + request.lease);
}

// What a fetch hands out that it consumed: the samples its lease covers.
std::vector<int64_t> handed_out_and_consumed(const SampleResult& result) {
  if (result.consumed == result.sampled) return result.sampled;
  std::vector<int64_t> consumed = result.consumed;
  std::sort(consumed.begin(), consumed.end());
  std::vector<int64_t> out;
  for (int64_t index : result.sampled) {
    if (std::binary_search(consumed.begin(), consumed.end(), index)) out.push_back(index);
  }
  return out;
}

// try_fetch's sampling: the batch the sampler picks from the task's ready
// samples, consumed (and leased) as the sampler says. The answer is built
// before anything is consumed, so a fetch that raises consumes nothing.
std::optional<BatchMeta> sample_and_consume(core::ControlData& data, PartitionState& partition, Sampler& sampler,
                                            const MetaRequest& request, const core::FieldMask& mask,
                                            const Workload* task_workload, core::FetchLeases& leases,
                                            bool* returnable) {
  core::TaskQueue& queue = partition.task(request.task_name);
  core::PartitionSampleInfo info(data, partition);

  // Walk only unconsumed samples, oldest first; for prefix-stable samplers
  // only as far as they need.
  std::vector<int64_t> ready;
  uint32_t cursor = queue.head();
  size_t window =
      sampler.prefix_stable() ? std::max(kFirstWindow, 2 * static_cast<size_t>(request.batch_size)) : SIZE_MAX;
  ready.reserve(std::min(window, queue.unconsumed()));
  SampleRequest sample_request;
  sample_request.batch_size = request.batch_size;
  sample_request.partition_id = request.partition_id;
  sample_request.task_name = request.task_name;
  sample_request.sampling = request.sampling;
  sample_request.info = &info;
  sample_request.task_workload = task_workload;
  SampleResult result;
  for (;;) {
    while (cursor != core::kNoSlot && ready.size() < window) {
      ++detail::fetch_scan_visits;
      if (partition.has_all(cursor, mask)) ready.push_back(partition.global_index(cursor));
      cursor = queue.next(cursor);
    }
    sample_request.ready = ready;
    result = sampler.sample(sample_request);
    if (!result.sampled.empty() || cursor == core::kNoSlot) break;
    window = window > SIZE_MAX / 4 ? SIZE_MAX : window * 4;
  }
  if (result.sampled.empty()) return std::nullopt;

  std::vector<uint32_t> sampled, consumed;
  try {
    sampled = answer_slots(data, partition, queue, result.sampled, false, sampler);
    // Most samplers consume what they hand out: look the slots up once.
    consumed = result.consumed == result.sampled ? check_consumable(partition, queue, sampled, result.consumed, sampler)
                                                 : answer_slots(data, partition, queue, result.consumed, true, sampler);
    if (result.reserved && request.lease.count() != 0) refuse_booked_lease(sampler);
  } catch (...) {
    if (result.reserved) sampler.cancel_reservation(request.partition_id, request.task_name, request.sampling);
    throw;
  }
  // A sampler that reserved the answer for this caller's repeats (tensor-
  // parallel ranks of one DP rank) hands it out again: not the controller's
  // to undo. It serves its reservation only as consumed samples, so then they
  // are consumed first: a fetch that fails below is answered by its retry.
  // Otherwise the answer is built first: a fetch that fails consumes nothing.
  *returnable = result.consumed == result.sampled && !result.reserved;
  if (result.reserved) {
    for (uint32_t slot : consumed) queue.consume(slot);
    return core::collect_batch(data, partition, sampled, request.fields);
  }
  BatchMeta batch = core::collect_batch(data, partition, sampled, request.fields);
  if (request.lease.count() != 0) batch.lease = lease_served(data, leases, request, handed_out_and_consumed(result));
  for (uint32_t slot : consumed) queue.consume(slot);
  return batch;
}

// Every sample, in arrival order, whatever it has produced (its
// production_status says); consumes nothing.
BatchMeta force_fetch(const core::ControlData& data, const MetaRequest& request) {
  const PartitionState* partition = data.find(request.partition_id);
  if (partition == nullptr) return BatchMeta{};
  std::vector<uint32_t> slots;
  slots.reserve(partition->size());
  for (uint32_t slot = partition->first(); slot != core::kNoSlot; slot = partition->next(slot)) {
    slots.push_back(slot);
  }
  return core::collect_batch(data, *partition, slots, request.fields);
}

}  // namespace

BatchMeta Controller::get_meta(const MetaRequest& request) {
  validate(request);
  std::unique_lock lock(state_->mutex);
  const auto deadline = std::chrono::steady_clock::now() + std::min(request.timeout, kLongestWait);
  for (;;) {
    // Re-resolved on every pass: the partition may be created or cleared while we wait.
    if (auto batch = answer_without_waiting(request, nullptr)) return std::move(*batch);
    if (std::chrono::steady_clock::now() >= deadline) throw_fetch_timeout(request, request.timeout);
    // Releases the lock while waiting: other callers proceed. A lease that
    // expires meanwhile gives samples back: wake up for it.
    const auto lease_expiry = state_->leases.next_expiry();
    state_->changed.wait_until(lock, lease_expiry ? std::min(deadline, *lease_expiry) : deadline);
  }
}

BatchMeta Controller::get_meta_at_deadline(const MetaRequest& request, std::chrono::milliseconds waited,
                                           bool* returnable) {
  validate(request);
  std::lock_guard lock(state_->mutex);
  if (auto batch = answer_without_waiting(request, returnable)) return std::move(*batch);
  throw_fetch_timeout(request, waited);
}

void Controller::throw_fetch_timeout(const MetaRequest& request, std::chrono::milliseconds waited) const {
  const bool exists = state_->data.find(request.partition_id) != nullptr;
  throw Error(ErrorCode::kTimeout, "get_meta timed out after " + std::to_string(waited.count()) + " ms: " +
                                       (exists ? "too few samples ready for " : "the partition was not created, for ") +
                                       describe(request));
}

std::optional<BatchMeta> Controller::answer_without_waiting(const MetaRequest& request, bool* returnable) {
  State& state = *state_;
  bool fresh_answer = false;
  if (returnable) *returnable = false;
  if (request.mode == MetaMode::kInsert) {
    core::InsertUndo undo(state.data, request.partition_id);
    PartitionState& partition = state.data.find_or_create(request.partition_id);
    const core::NewSamples& added = undo.added(state.data.add_samples(partition, request.batch_size));
    BatchMeta inserted = core::collect_batch(state.data, partition, added.slots, request.fields);
    undo.commit();
    state.notify_changed(&request.partition_id);
    return inserted;
  }
  if (request.mode == MetaMode::kForceFetch) return force_fetch(state.data, request);
  state.expire_leases();
  const std::optional<Workload> task_workload = state.task_workloads.fitted(request.task_name);
  if (auto batch = try_fetch(state.data, *state.sampler, request, task_workload ? &*task_workload : nullptr,
                             state.leases, &fresh_answer)) {
    if (returnable) *returnable = fresh_answer;
    return batch;
  }
  if (request.polling || state.polling_mode) return BatchMeta{};
  return std::nullopt;
}

size_t Controller::give_back(const std::string& partition_id, const std::string& task_name,
                             std::span<const int64_t> global_indexes, std::span<const uint64_t> generations,
                             uint64_t lease) {
  core::check_generations(global_indexes, generations);
  std::lock_guard lock(state_->mutex);
  // An answer that reached nobody holds no lease either.
  if (lease != 0) state_->leases.end(partition_id, task_name, global_indexes, generations, lease);
  return state_->give_back(partition_id, task_name, global_indexes, generations);
}

size_t Controller::State::give_back(const std::string& partition_id, const std::string& task_name,
                                    std::span<const int64_t> indexes, std::span<const uint64_t> generations) {
  PartitionState* partition = data.find(partition_id);
  if (partition == nullptr || partition->find_task(task_name) == nullptr) return 0;
  core::TaskQueue& queue = partition->task(task_name);
  size_t given = 0;
  for (size_t i = 0; i < indexes.size(); ++i) {
    const std::optional<uint32_t> slot = data.slot_of(*partition, indexes[i]);
    const bool same_sample = slot && (generations.empty() || data.generation(indexes[i]) == generations[i]);
    if (!same_sample || !queue.is_consumed(*slot)) continue;
    uint32_t later = partition->next(*slot);
    while (later != core::kNoSlot && queue.is_consumed(later)) later = partition->next(later);
    queue.give_back(*slot, later);
    ++given;
  }
  if (given > 0) notify_changed(&partition_id);
  return given;
}

void Controller::on_change(std::function<void(const std::string* partition_id)> listener) {
  std::lock_guard lock(state_->mutex);
  state_->change_listener = std::move(listener);
}

std::optional<BatchMeta> Controller::try_get_meta(const MetaRequest& request, bool* returnable) {
  validate(request);
  std::lock_guard lock(state_->mutex);
  return answer_without_waiting(request, returnable);
}

}  // namespace seqflow
