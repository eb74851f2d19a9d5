// The client facade: one API over the controller and the storage, embedded in
// this process (the default) or, later, remote. Frontends (Python, CLI) talk
// to a Client, never to the controller and storage directly.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "seqflow/controller.h"
#include "seqflow/storage.h"
#include "seqflow/tensor.h"

namespace seqflow {

class Client {
 public:
  virtual ~Client() = default;

  // New samples in `partition_id`, one per sample of the columns (all columns
  // the same sample count); custom_meta is empty or one object per sample.
  // Data, production and custom_meta become visible together; on failure no
  // sample is left behind.
  virtual BatchMeta put_new(const std::string& partition_id, const std::vector<Column>& columns,
                            std::span<const nlohmann::json> custom_meta) = 0;
  // More fields of existing samples (meta from insert or get_meta).
  virtual BatchMeta put_existing(const BatchMeta& meta, const std::vector<Column>& columns,
                                 std::span<const nlohmann::json> custom_meta) = 0;

  virtual BatchMeta get_meta(const MetaRequest& request) = 0;
  // result[i][f]: field fields[f] of sample i (meta order); views, not copies.
  virtual std::vector<std::vector<SampleView>> get_data(const BatchMeta& meta,
                                                        std::span<const std::string> fields) = 0;

  virtual Controller& controller() = 0;  // status queries, kv, custom meta
  // Clearing releases the storage too.
  virtual void clear_samples(const std::string& partition_id,
                             std::span<const int64_t> global_indexes) = 0;
  virtual void clear_partition(const std::string& partition_id) = 0;

  // Controller, samplers and storage, as one atomic directory.
  virtual void save_checkpoint(const std::string& directory) = 0;
  virtual void load_checkpoint(const std::string& directory) = 0;
};

std::shared_ptr<Client> make_embedded_client(ControllerOptions controller_options,
                                             StorageOptions storage_options);

// The field schema a column implies; throws kInvalidArgument on a bad column.
FieldSchema schema_of(const Column& column);

}  // namespace seqflow
