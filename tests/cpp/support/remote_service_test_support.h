// Shared by the remote service tests (remote_service_test.cc and
// remote_service_concurrency_test.cc): fetches of field "x" whose samples
// carry their id both as data and as custom_meta {"id": ...}.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "controller_test_support.h"
#include "server/controller_service.h"
#include "transport/connection.h"
#include "seqflow/client.h"
#include "storage_test_support.h"

namespace seqflow::test {

inline MetaRequest fetch(int64_t batch_size, const std::string& partition, const std::string& task) {
  return fetch_request(partition, task, {"x"}, batch_size);
}

// Field "x" of each sample of `meta`, as int64.
inline std::vector<int64_t> values_of(Client& client, const BatchMeta& meta) {
  const std::string fields[] = {"x"};
  std::vector<int64_t> values;
  for (const auto& row : client.get_data(meta, fields)) values.push_back(int64_of(row.at(0)));
  return values;
}

// custom_meta "id" of each sample of `meta`.
inline std::vector<int64_t> ids_of(const BatchMeta& meta) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < meta.size(); ++i) ids.push_back(meta.custom_meta[i]["id"].as_int());
  return ids;
}

// custom_meta {"id": first}, {"id": first + 1}, ...: `count` entries.
inline std::vector<Value> ids(int64_t first, size_t count) {
  std::vector<Value> out;
  for (size_t i = 0; i < count; ++i) out.push_back({{"id", first + static_cast<int64_t>(i)}});
  return out;
}

// A controller service expecting two storage units, none started, and a
// connection to it that speaks the wire as a unit would.
struct LoneController {
  static server::ControllerServiceOptions options() {
    server::ControllerServiceOptions out;
    out.storage_units = 2;
    return out;
  }
  server::ControllerService service{options()};
  bool started = (service.start(), true);  // before the connection asks for its endpoint
  zmq::context_t context;
  transport::Connection connection{context, service.endpoint(),
                                   transport::ConnectionOptions{.timeout = std::chrono::seconds(5), .security = {}}};
};

}  // namespace seqflow::test
