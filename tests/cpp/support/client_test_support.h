// The client tests' fixture, shared by client_test.cc and
// client_concurrency_test.cc: each test runs embedded and remote (real
// controller and storage services on loopback, one or three storage units).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "remote_cluster.h"
#include "seqflow/client.h"

namespace seqflow::test {

struct Mode {
  const char* name;
  size_t storage_units;  // 0: embedded
};

// Every mode; one file of each test executable instantiates ClientModes over
// them (cluster/client_test.cc) with
// INSTANTIATE_TEST_SUITE_P(Modes, ClientModes, ::testing::ValuesIn(kClientModes), mode_name):
// a second instantiation in the same executable would run every test twice.
inline constexpr Mode kClientModes[] = {{"Embedded", 0}, {"RemoteOneUnit", 1}, {"RemoteThreeUnits", 3}};

class ClientModes : public ::testing::TestWithParam<Mode> {
 protected:
  size_t units() const { return std::max<size_t>(GetParam().storage_units, 1); }

  // The client keeps its services alive.
  std::shared_ptr<Client> make_client(StorageOptions storage = {}) const {
    if (GetParam().storage_units == 0) return make_embedded_client(ControllerOptions{}, storage);
    auto cluster = std::make_shared<RemoteCluster>(GetParam().storage_units, storage);
    auto client = cluster->client();
    auto both = std::make_shared<std::pair<std::shared_ptr<RemoteCluster>, std::shared_ptr<Client>>>(cluster, client);
    return std::shared_ptr<Client>(both, client.get());
  }
};

inline std::string mode_name(const ::testing::TestParamInfo<Mode>& info) { return info.param.name; }

}  // namespace seqflow::test
