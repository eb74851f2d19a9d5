// The controller service's waiting requests (DeferredWaiters::Wait): a
// blocking get_meta waits for enough ready samples, a watch for a change.
#pragma once

#include <functional>
#include <memory>

#include "seqflow/controller.h"
#include "server/deferred_waiters.h"

namespace seqflow::server {

// What undoes a fetch whose reply reached nobody (on_undelivered,
// DeferredReply::send): its samples go back to the task's queue, for the
// next fetch. Null unless the controller called the answer returnable
// (Controller::try_get_meta): nothing consumed, or a sampler's reservation.
std::function<void()> giving_back(Controller& controller, const MetaRequest& request, const BatchMeta& meta,
                                  bool returnable);

// A get_meta with too little ready: answered once try_get_meta has a batch;
// at its deadline, get_meta_at_deadline's batch or kTimeout.
std::unique_ptr<DeferredWaiters::Wait> fetch_wait(Controller& controller, MetaRequest request);

// A watch with no change since its cursor: answered with the first changes
// (or a resync); at its deadline, with what there is (maybe none).
std::unique_ptr<DeferredWaiters::Wait> watch_wait(Controller& controller, WatchRequest request);

}  // namespace seqflow::server
