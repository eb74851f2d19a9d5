#include "storage/storage_capacity.h"

#include <cmath>
#include <sstream>

#include "seqflow/error.h"

namespace seqflow {

namespace {

std::string fraction_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

void check_watermark(const char* name, double value) {
  if (!(value > 0.0 && value <= 1.0)) {
    throw_invalid(std::string(name) + " must be in (0, 1] (a fraction of each limit), got " + fraction_text(value));
  }
}

// The share of `limit` a watermark stands for, rounded down.
uint64_t at_watermark(uint64_t limit, double watermark) {
  return watermark >= 1.0 ? limit : static_cast<uint64_t>(std::floor(static_cast<double>(limit) * watermark));
}

}  // namespace

void check_storage_options(const StorageOptions& options) {
  check_watermark("high_watermark", options.high_watermark);
  if (options.low_watermark) {
    check_watermark("low_watermark", *options.low_watermark);
    if (*options.low_watermark > options.high_watermark) {
      throw_invalid("low_watermark must not exceed high_watermark (" + fraction_text(options.high_watermark) +
                    "), got " + fraction_text(*options.low_watermark));
    }
  }
  if (options.wait_timeout.count() < 0) {
    throw_invalid("wait_timeout must be >= 0 ms, got " + std::to_string(options.wait_timeout.count()));
  }
  if (options.max_waiting_puts == 0) throw_invalid("max_waiting_puts must be >= 1, got 0");
}

namespace storage {

StorageCapacity::StorageCapacity(const StorageOptions& options)
    : options_(options),
      low_watermark_(options.low_watermark.value_or(options.high_watermark)),
      per_partition_(options.max_bytes_per_partition != 0 || options.max_samples_per_partition != 0) {
  check_storage_options(options);
}

std::optional<Refusal> StorageCapacity::check(std::string_view limit_name, const std::string* partition, uint64_t limit,
                                              bool& filled, uint64_t used, uint64_t released, uint64_t reserved,
                                              uint64_t requested, std::string_view unit,
                                              std::string_view requester) const {
  if (limit == 0 || requested == 0) return std::nullopt;
  const uint64_t kept = used > released ? used - released : 0;
  const uint64_t high = at_watermark(limit, options_.high_watermark);
  const uint64_t low = at_watermark(limit, low_watermark_);
  const bool never_fits = requested > high;
  const bool closed = !never_fits && filled && kept > low;
  const uint64_t free = kept < high ? high - kept : 0;
  if (!never_fits && !closed && reserved <= free && requested <= free - reserved) {
    filled = false;
    return std::nullopt;
  }
  // Refused: the words are made only now, off a put's usual path.
  const std::string limit_text = "storage full: " + std::string(limit_name) + " is " + std::to_string(limit) +
                                 (partition == nullptr ? std::string() : " for partition '" + *partition + "'");
  if (never_fits) {
    const std::string allowed = high == limit ? std::string()
                                              : " at its high watermark " + fraction_text(options_.high_watermark) +
                                                    " (" + std::to_string(high) + ")";
    return Refusal{limit_text + "; " + std::string(requester) + " needs " + std::to_string(requested) + " " +
                       std::string(unit) + ", more than the limit allows" + allowed + ": it never fits",
                   true};
  }
  if (closed) {
    return Refusal{limit_text + " and filled up: puts resume once usage falls to its low watermark " +
                       fraction_text(low_watermark_) + " (" + std::to_string(low) + "); usage is " +
                       std::to_string(kept) + ", " + std::string(requester) + " needs " + std::to_string(requested) +
                       " " + std::string(unit),
                   false};
  }
  // Room only reserved for earlier waiting puts is not full: no hysteresis then.
  filled = low < high && kept + requested > high;  // without hysteresis, room is simply what is free
  const std::string watermark =
      high == limit ? std::string()
                    : " (high watermark " + fraction_text(options_.high_watermark) + ": " + std::to_string(high) + ")";
  const std::string held_back =
      reserved == 0 ? std::string() : " and earlier waiting puts need " + std::to_string(reserved) + " first";
  return Refusal{limit_text + watermark + "; " + std::string(requester) + " needs " + std::to_string(requested) + " " +
                     std::string(unit) + ", " + std::to_string(free) + " are free" + held_back,
                 false};
}

void Reserved::add(const UsageChange& total, const PartitionChanges& changes) {
  const auto grow = [](Usage& usage, const UsageChange& change) {
    usage.samples += change.in.samples > change.out.samples ? change.in.samples - change.out.samples : 0;
    usage.bytes += change.in.bytes > change.out.bytes ? change.in.bytes - change.out.bytes : 0;
  };
  grow(unit, total);
  for (const auto& [partition, change] : changes) grow(partitions[partition], change);
}

std::optional<Refusal> StorageCapacity::refusal(const Usage& held, const UsageChange& total,
                                                const PartitionChanges& partitions, const Reserved& reserved,
                                                std::string_view requester) {
  static constexpr std::string_view kBytes = "bytes (values and their bookkeeping)";
  static constexpr std::string_view kSamples = "new samples";
  if (auto refused = check("max_bytes", nullptr, options_.max_bytes, unit_.bytes_filled, held.bytes, total.out.bytes,
                           reserved.unit.bytes, total.in.bytes, kBytes, requester)) {
    return refused;
  }
  if (auto refused = check("max_samples", nullptr, options_.max_samples, unit_.samples_filled, held.samples,
                           total.out.samples, reserved.unit.samples, total.in.samples, kSamples, requester)) {
    return refused;
  }
  for (const auto& [partition, change] : partitions) {
    // Hysteresis of a partition not counted yet starts open (a temporary
    // scope): it holds nothing.
    const auto known = partitions_.find(partition);
    Scope fresh;
    Scope& scope = known == partitions_.end() ? fresh : known->second;
    const auto held_for = reserved.partitions.find(partition);
    const Usage ahead = held_for == reserved.partitions.end() ? Usage{} : held_for->second;
    if (auto refused =
            check("max_bytes_per_partition", &partition, options_.max_bytes_per_partition, scope.bytes_filled,
                  scope.usage.bytes, change.out.bytes, ahead.bytes, change.in.bytes, kBytes, requester)) {
      return refused;
    }
    if (auto refused =
            check("max_samples_per_partition", &partition, options_.max_samples_per_partition, scope.samples_filled,
                  scope.usage.samples, change.out.samples, ahead.samples, change.in.samples, kSamples, requester)) {
      return refused;
    }
  }
  return std::nullopt;
}

void StorageCapacity::add(const PartitionChanges& partitions) {
  if (!per_partition_) return;
  std::vector<Scope*> scopes;
  scopes.reserve(partitions.size());
  for (const auto& [partition, change] : partitions) scopes.push_back(&partitions_[partition]);
  size_t i = 0;
  for (const auto& [partition, change] : partitions) {
    Usage& usage = scopes[i++]->usage;
    usage.samples = usage.samples - std::min(usage.samples, change.out.samples) + change.in.samples;
    usage.bytes = usage.bytes - std::min(usage.bytes, change.out.bytes) + change.in.bytes;
  }
}

void StorageCapacity::release(const std::string& partition, const Usage& freed) {
  if (!per_partition_) return;
  const auto scope = partitions_.find(partition);
  if (scope == partitions_.end()) return;
  Usage& usage = scope->second.usage;
  usage.samples -= std::min(usage.samples, freed.samples);
  usage.bytes -= std::min(usage.bytes, freed.bytes);
  if (usage.samples == 0 && usage.bytes == 0) partitions_.erase(scope);  // a drained partition starts open again
}

void StorageCapacity::clear() noexcept {
  unit_ = {};
  partitions_.clear();
}

StorageCapacity StorageCapacity::of_content(const StorageOptions& options,
                                            const std::unordered_map<std::string, Usage>& partitions) {
  StorageCapacity out(options);
  if (!out.per_partition_) return out;
  for (const auto& [partition, usage] : partitions) out.partitions_[partition].usage = usage;
  return out;
}

void StorageCapacity::check_partitions(const std::unordered_map<std::string, Usage>& partitions,
                                       std::string_view requester) const {
  const auto check_one = [&](std::string_view limit_name, uint64_t limit, const std::string& partition, uint64_t needed,
                             std::string_view unit) {
    if (limit == 0 || needed <= limit) return;
    throw_invalid("storage full: " + std::string(limit_name) + " is " + std::to_string(limit) + " for partition '" +
                  partition + "'; " + std::string(requester) + " holds " + std::to_string(needed) + " " +
                  std::string(unit) + " of it; nothing was loaded");
  };
  for (const auto& [partition, usage] : partitions) {
    check_one("max_bytes_per_partition", options_.max_bytes_per_partition, partition, usage.bytes,
              "bytes (values and their bookkeeping)");
    check_one("max_samples_per_partition", options_.max_samples_per_partition, partition, usage.samples, "samples");
  }
}

std::vector<StorageUnit::PartitionUsage> StorageCapacity::partition_usage() const {
  std::vector<StorageUnit::PartitionUsage> out;
  out.reserve(partitions_.size());
  for (const auto& [partition, scope] : partitions_) {
    out.push_back({partition, scope.usage.samples, scope.usage.bytes});
  }
  return out;
}

}  // namespace storage
}  // namespace seqflow
