#include "server/controller_waits.h"

#include "transport/control_protocol.h"
#include "transport/wire_codec.h"

namespace seqflow::server {
namespace {

class FetchWait final : public DeferredWaiters::Wait {
 public:
  FetchWait(Controller& controller, MetaRequest request) : controller_(controller), request_(std::move(request)) {}

  std::optional<DeferredWaiters::Answer> attempt() override {
    bool returnable = false;
    std::optional<BatchMeta> meta = controller_.try_get_meta(request_, &returnable);
    if (!meta) return std::nullopt;
    return answer(*meta, returnable);
  }

  DeferredWaiters::Answer at_deadline(std::chrono::milliseconds waited) override {
    bool returnable = false;
    const BatchMeta meta = controller_.get_meta_at_deadline(request_, waited, &returnable);
    return answer(meta, returnable);
  }

 private:
  DeferredWaiters::Answer answer(const BatchMeta& meta, bool returnable) {
    return {transport::wire::header_message(transport::wire::batch_meta_frame(meta)), std::nullopt,
            giving_back(controller_, request_, meta, returnable)};
  }

  Controller& controller_;
  const MetaRequest request_;
};

class WatchWait final : public DeferredWaiters::Wait {
 public:
  WatchWait(Controller& controller, WatchRequest request) : controller_(controller), request_(std::move(request)) {
    request_.wait = std::chrono::milliseconds(0);  // the waiters wait, not the controller
  }

  std::optional<DeferredWaiters::Answer> attempt() override {
    WatchBatch batch = controller_.watch(request_);
    if (batch.changes.empty() && !batch.resync) {
      request_.cursor = batch.cursor;  // what the filter left out is not read again
      return std::nullopt;
    }
    return answer(batch);
  }

  DeferredWaiters::Answer at_deadline(std::chrono::milliseconds) override {
    return answer(controller_.watch(request_));
  }

 private:
  static DeferredWaiters::Answer answer(const WatchBatch& batch) {
    return {transport::control::encode_watch_reply(batch), std::nullopt, nullptr};
  }

  Controller& controller_;
  WatchRequest request_;
};

}  // namespace

std::function<void()> giving_back(Controller& controller, const MetaRequest& request, const BatchMeta& meta,
                                  bool returnable) {
  if (!returnable || request.mode != MetaMode::kFetch || meta.size() == 0) return nullptr;
  return [&controller, partition = request.partition_id, task = request.task_name, indexes = meta.global_indexes,
          generations = meta.generations,
          lease = meta.lease] { controller.give_back(partition, task, indexes, generations, lease); };
}

std::unique_ptr<DeferredWaiters::Wait> fetch_wait(Controller& controller, MetaRequest request) {
  return std::make_unique<FetchWait>(controller, std::move(request));
}

std::unique_ptr<DeferredWaiters::Wait> watch_wait(Controller& controller, WatchRequest request) {
  return std::make_unique<WatchWait>(controller, std::move(request));
}

}  // namespace seqflow::server
