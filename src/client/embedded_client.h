// The embedded client: controller and storage in this process, called
// directly. Besides the Client facade it offers what frontends need and the
// facade lacks: the key-value calls that must touch both planes.
#pragma once

#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "seqflow/client.h"
#include "seqflow/controller.h"
#include "seqflow/storage.h"

namespace seqflow {

// Thread-safe. Puts and reads run concurrently; clears and checkpoints wait
// for the puts in flight (so a released global index is never reused by a
// put while its old values are being dropped), get_meta never waits for them.
class EmbeddedClient final : public Client {
 public:
  EmbeddedClient(ControllerOptions controller_options, StorageOptions storage_options);

  BatchMeta put_new(const std::string& partition_id, const std::vector<Column>& columns,
                    std::span<const nlohmann::json> custom_meta) override;
  BatchMeta put_existing(const BatchMeta& meta, const std::vector<Column>& columns,
                         std::span<const nlohmann::json> custom_meta) override;

  BatchMeta get_meta(const MetaRequest& request) override;
  std::vector<std::vector<SampleView>> get_data(const BatchMeta& meta,
                                                std::span<const std::string> fields) override;

  Controller& controller() override { return controller_; }
  const StorageUnit& storage() const { return storage_; }

  void clear_samples(const std::string& partition_id, std::span<const int64_t> global_indexes) override;
  void clear_partition(const std::string& partition_id) override;

  void save_checkpoint(const std::string& directory) override;
  void load_checkpoint(const std::string& directory) override;

  // Key-value API. kv_put writes the columns (one sample per key) under the
  // keys, creating samples for unknown keys; on failure the keys it created
  // are removed again. Without columns it only creates keys and sets tags.
  // kv_meta is the metadata of known keys (a missing key throws kNotFound
  // naming it), for get_data. kv_clear releases the keys' samples in the
  // controller and the storage.
  BatchMeta kv_put(const std::string& partition_id, std::span<const std::string> keys,
                   std::span<const nlohmann::json> tags, const std::vector<Column>& columns);
  BatchMeta kv_meta(const std::string& partition_id, std::span<const std::string> keys);
  void kv_clear(const std::string& partition_id, std::span<const std::string> keys);

 private:
  // put_existing without taking the lock (kv_put holds it already).
  BatchMeta write_existing(const BatchMeta& meta, const std::vector<Column>& columns,
                           std::span<const nlohmann::json> custom_meta);
  void drop_from_storage(const std::vector<int64_t>& released);
  bool has_partition(const std::string& partition_id) const;
  // After a failed put that created `partition_id`: removes it if no sample
  // is left. Trades the shared `lock` for the exclusive one.
  void forget_partition_if_empty(std::shared_lock<std::shared_mutex>& lock,
                                 const std::string& partition_id);

  Controller controller_;
  StorageUnit storage_;
  // Shared: puts and reads. Exclusive: clears, checkpoints.
  mutable std::shared_mutex mutex_;
};

}  // namespace seqflow
