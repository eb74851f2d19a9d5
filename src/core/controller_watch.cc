// Controller::watch: the changes of a watched partition since a cursor
// (core::ChangeLogs), waiting on the controller's condition variable, which
// every change notifies, while there are none.
#include <algorithm>

#include "core/controller_state.h"
#include "seqflow/controller.h"

namespace seqflow {

WatchBatch Controller::watch(const WatchRequest& request) {
  core::check_watch_request(request);
  using Clock = core::ChangeLogs::Clock;
  const Clock::time_point deadline = Clock::now() + request.wait;
  WatchRequest asked = request;
  std::unique_lock lock(state_->mutex);
  while (true) {
    state_->expire_replay_passes();
    WatchBatch batch = state_->change_logs.read(asked, Clock::now());
    // A start answers its cursor at once: the watch is on from here.
    if (!batch.changes.empty() || batch.resync || asked.cursor == 0) return batch;
    asked.cursor = batch.cursor;  // filtered-out changes are not read twice
    if (Clock::now() >= deadline) return batch;
    // A kept replay pass whose lease ends meanwhile is a change (no thread ends it): wake for it.
    const auto pass_expiry = state_->replay_leases.next_expiry();
    state_->changed.wait_until(lock, pass_expiry ? std::min(deadline, *pass_expiry) : deadline);
  }
}

}  // namespace seqflow
