// Controller::replay_pass's wait: an idle pass returns when another thread
// changes the controller, not at its deadline.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "seqflow/controller.h"
#include "seqflow/replay.h"

namespace seqflow {
namespace {

using namespace std::chrono_literals;

TEST(ReplayWait, AnIdlePassReturnsWhenTheStateChanges) {
  Controller controller;
  ReplayRequest request;
  request.partition_id = "train";
  request.global_steps = 1;
  request.batch_size = 1;
  request.wait_ms = 20000;
  const auto started = std::chrono::steady_clock::now();
  auto waiting = std::async(std::launch::async, [&] { return controller.replay_pass(request); });
  EXPECT_EQ(waiting.wait_for(100ms), std::future_status::timeout);  // nothing to do: it waits
  controller.kv_resolve("train", std::vector<std::string>{"u"},
                        std::vector<Value>{Value{{"is_prompt", true}, {"status", "running"}, {"global_steps", 1}}});
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(waiting.get().ready);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  // The next pass sees the change.
  controller.kv_resolve("train", std::vector<std::string>{"u", "u_0_0"},
                        std::vector<Value>{Value{{"status", "finished"}}, Value{{"reward", 1}}});
  request.wait_ms = 0;
  EXPECT_EQ(controller.replay_pass(request).selected_uids, std::vector<std::string>{"u"});
}

}  // namespace
}  // namespace seqflow
