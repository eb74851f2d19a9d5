// The client facade: one API over the control plane and the data plane,
// embedded in this process (the default) or remote (services reached over
// ZeroMQ). Frontends (Python, CLI) talk to a Client, never to the controller
// and storage directly.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "seqflow/controller.h"
#include "seqflow/storage.h"
#include "seqflow/tensor.h"
#include "seqflow/value.h"

namespace seqflow {

class Client {
 public:
  virtual ~Client() = default;

  // New samples in `partition_id`, one per sample of the columns (all columns
  // the same sample count); custom_meta is empty or one object per sample.
  // Data, production and custom_meta become visible together; on failure no
  // sample is left behind.
  virtual BatchMeta put_new(const std::string& partition_id, const std::vector<Column>& columns,
                            std::span<const Value> custom_meta) = 0;
  // More fields of existing samples (meta from insert or get_meta).
  virtual BatchMeta put_existing(const BatchMeta& meta, const std::vector<Column>& columns,
                                 std::span<const Value> custom_meta) = 0;

  virtual BatchMeta get_meta(const MetaRequest& request) = 0;
  // result[i][f]: field fields[f] of sample i (meta order); views, not copies.
  virtual std::vector<std::vector<SampleView>> get_data(const BatchMeta& meta, std::span<const std::string> fields) = 0;

  // Status queries and custom metadata; clears go through the client.
  virtual ControlPlane& control() = 0;
  // Clearing releases the storage too. generations: one per index, or none
  // (see ControlPlane::clear_samples).
  virtual void clear_samples(const std::string& partition_id, std::span<const int64_t> global_indexes,
                             std::span<const uint64_t> generations) = 0;
  virtual void clear_partition(const std::string& partition_id) = 0;

  // Key-value API. kv_put writes the columns (one sample per key) under the
  // keys, creating samples for unknown keys; on failure the keys it created
  // are removed again. Without columns it only creates keys and sets tags.
  // kv_meta is the metadata of known keys (a missing key throws kNotFound
  // naming it), for get_data. kv_clear releases the keys' samples in both
  // planes.
  virtual BatchMeta kv_put(const std::string& partition_id, std::span<const std::string> keys,
                           std::span<const Value> tags, const std::vector<Column>& columns) = 0;
  virtual BatchMeta kv_meta(const std::string& partition_id, std::span<const std::string> keys) = 0;
  virtual void kv_clear(const std::string& partition_id, std::span<const std::string> keys) = 0;
  // ControlPlane::replay_pass, the released samples dropped in both planes (as kv_clear's).
  virtual ReplayPass replay_pass(const ReplayRequest& request) = 0;
  // ControlPlane::ack_replay_pass, the released prompt keys dropped in both
  // planes; whether the pass was still kept.
  virtual bool ack_replay_pass(const std::string& partition_id, uint64_t pass_id) = 0;
  // ControlPlane::reissue_inflight_prompts, the cleared trajectories dropped in both planes.
  virtual ReissuedPrompts reissue_inflight_prompts(const std::string& partition_id, int64_t global_steps,
                                                   bool member_status) = 0;

  // Controller, samplers and storage, as one atomic directory, with the
  // caller's `user_metadata` (a JSON object) in its metadata.json, which
  // load_checkpoint returns. In remote mode the services write and read the
  // files, so the directory must be on a filesystem they and this client
  // share under the same path. Loading a directory that holds no
  // checkpoint throws kNotFound naming it.
  virtual void save_checkpoint(const std::string& directory, const Value& user_metadata) = 0;
  virtual Value load_checkpoint(const std::string& directory) = 0;

  virtual StorageStats storage_stats() const = 0;
  // What capacity did to puts (embedded: the storage unit in this process);
  // nullopt remote, where each unit's metrics report it.
  virtual std::optional<CapacityStats> capacity_stats() const = 0;
};

// ControlPlane::end_leases for the samples of a fetched batch (each run of
// one partition in one call): acknowledged, or released to be served again.
// Returns the leases it ended (fewer than the batch's samples: some expired
// and went back, and may be served again).
size_t end_leases(ControlPlane& control, const BatchMeta& meta, const std::string& task_name, bool release);

std::shared_ptr<Client> make_embedded_client(ControllerOptions controller_options, StorageOptions storage_options);

// Remote mode: the controller service at `controller_endpoint` (e.g.
// tcp://10.0.0.1:5555) names the storage units; sample gi lives on unit
// (gi / kPlacementBlock) % N (seqflow/limits.h). Every call fails with kTimeout after `timeout` without a reply.
// A put (put_new, put_existing, kv_put) has one deadline, `timeout` from its
// start, for all its requests and its rollback; the rollback gets at least a
// quarter of `timeout` (at most 1 s), so a failed put returns within 1.25x
// `timeout`. The controller refuses an insert it would start after its
// client's deadline, so a timed-out put leaves no samples behind.
struct RemoteOptions {
  std::string controller_endpoint;
  std::chrono::milliseconds timeout{30000};
  // CURVE: all three empty for plaintext; otherwise Z85 keys (40 chars).
  std::string server_public_key;
  std::string client_public_key;
  std::string client_secret_key;
  // Storage units on this host (same user, same pid namespace) copy large
  // puts and gets through memory (process_vm_readv) instead of TCP; units
  // elsewhere are detected and sent the bytes. Off: always TCP.
  bool local_copy = true;
  // A control call (get_meta, insert, ...) waiting for its reply spins for
  // up to this long before it sleeps: a short call then costs no thread
  // wake-up (20-40 us on a VM). It spins only while replies come within it
  // and while the process waits on fewer calls than it has cores; data
  // calls never spin. 0: always sleep.
  std::chrono::microseconds busy_poll{200};
};
std::shared_ptr<Client> make_remote_client(const RemoteOptions& options);

// The field schema a column implies; throws kInvalidArgument on a bad column.
FieldSchema schema_of(const Column& column);

}  // namespace seqflow
