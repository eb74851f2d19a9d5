// kv_find and kv_keys, the lookups behind TransferQueue's kv_retrieve_meta
// (create=False) and kv_retrieve_keys: the same answers from the controller
// in this process and through the controller service.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "both_modes.h"
#include "seqflow/controller.h"
#include "test_support.h"

namespace seqflow::test {
namespace {

using Keys = std::vector<std::string>;
using Indexes = std::vector<int64_t>;

TEST(ControllerKvLookup, FindLeavesOutUnknownKeysAndPartitions) {
  in_both_modes([](ControlPlane& control) {
    EXPECT_EQ(control.kv_resolve("p", Keys{"a", "b", "c"}, {}).global_indexes, (Indexes{0, 1, 2}));
    EXPECT_EQ(control.kv_find("p", Keys{"c", "nope", "a", "c"}).global_indexes, (Indexes{2, 0, 2}));
    EXPECT_EQ(control.kv_find("p", Keys{"nope"}).size(), 0u);
    EXPECT_EQ(control.kv_find("gone", Keys{"a"}).size(), 0u);
    EXPECT_TRUE(control.partition_list() == (Keys{"p"}));  // a lookup creates nothing
  });
  // A cleared key is unknown again (remote clears need storage units; the
  // Python tests clear through a remote client).
  Controller controller;
  controller.kv_resolve("p", Keys{"a", "b"}, {});
  controller.kv_clear("p", Keys{"b"});
  EXPECT_EQ(controller.kv_find("p", Keys{"a", "b"}).global_indexes, (Indexes{0}));
}

TEST(ControllerKvLookup, KeysMapGlobalIndexesBackOrNameTheMissingOne) {
  in_both_modes([](ControlPlane& control) {
    control.kv_resolve("p", Keys{"a", "b"}, {});
    control.kv_resolve("q", Keys{"z"}, {});
    control.insert("p", 1);  // global index 3, without a key
    EXPECT_EQ(control.kv_keys("p", Indexes{1, 0, 1}), (Keys{"b", "a", "b"}));
    EXPECT_EQ(control.kv_keys("q", Indexes{2}), (Keys{"z"}));
    EXPECT_TRUE(control.kv_keys("p", Indexes{}).empty());
    EXPECT_TRUE(throws_code(
        [&] {
          control.kv_keys("p", Indexes{0, 3});
        },
        ErrorCode::kNotFound, {"global index 3 has no key in partition 'p'"}));
    EXPECT_TRUE(throws_code([&] { control.kv_keys("p", Indexes{2}); }, ErrorCode::kNotFound,
                            {"global index 2"}));  // z's sample lives in q
    EXPECT_TRUE(throws_code([&] { control.kv_keys("gone", Indexes{0}); }, ErrorCode::kNotFound, {"'gone'"}));
  });
}

}  // namespace
}  // namespace seqflow::test
