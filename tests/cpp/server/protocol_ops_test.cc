// Every op a service answers is one its protocol defines, and every op the
// protocol defines is answered: the op names are spelled in one place.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "server/controller_service.h"
#include "server/storage_service.h"
#include "transport/control_protocol.h"
#include "transport/storage_protocol.h"

namespace seqflow::test {
namespace {

// The protocol's ops plus the service's built-in "ping", sorted.
template <typename Ops>
std::vector<std::string> expected_ops(const Ops& protocol) {
  std::vector<std::string> out(protocol.begin(), protocol.end());
  out.push_back("ping");
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ProtocolOps, ControllerServiceAnswersExactlyTheControlProtocol) {
  const server::ControllerService service({});
  EXPECT_EQ(service.ops(), expected_ops(transport::control::kOps));
}

TEST(ProtocolOps, StorageServiceAnswersExactlyTheStorageProtocol) {
  const server::StorageService service(server::StorageServiceOptions{});
  EXPECT_EQ(service.ops(), expected_ops(transport::storage_protocol::kOps));
}

template <typename Ops>
bool names_each_once(const Ops& protocol) {
  std::vector<std::string> ops(protocol.begin(), protocol.end());
  std::sort(ops.begin(), ops.end());
  return std::adjacent_find(ops.begin(), ops.end()) == ops.end();
}

TEST(ProtocolOps, EachProtocolNamesEachOpOnce) {
  EXPECT_TRUE(names_each_once(transport::control::kOps));
  EXPECT_TRUE(names_each_once(transport::storage_protocol::kOps));
}

}  // namespace
}  // namespace seqflow::test
