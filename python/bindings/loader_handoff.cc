// StreamingDataLoader's hand-off from its worker threads to the consumer: one
// bounded queue per worker, taken in worker order (worker w handles batch
// indexes w, w + W, ..., so batches come out in batch-index order), and the
// stop flag the workers' fetch loops watch (an Event's is_set / wait).
//
// The queues hold owned PyObject references and are touched only under the
// mutex; every wait releases the GIL first and never takes it while holding
// the mutex, so a worker and the consumer cannot deadlock on the two.
#include <nanobind/nanobind.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "bindings/submodules.h"
#include "seqflow/error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

class Handoff {
 public:
  Handoff(size_t workers, size_t depth) : queues_(workers), done_(workers, false), depth_(depth) {
    if (workers < 1 || depth < 1) {
      throw_invalid("Handoff needs workers >= 1 and depth >= 1, got " + std::to_string(workers) + " and " +
                    std::to_string(depth));
    }
  }
  Handoff(const Handoff&) = delete;
  Handoff& operator=(const Handoff&) = delete;
  ~Handoff() {  // the GIL is held: Python destroys it
    for (auto& queue : queues_) {
      for (PyObject* item : queue) Py_DECREF(item);
    }
  }

  // Worker `worker` hands over `item`, waiting for room; false (item dropped) once stopped.
  bool put(size_t worker, nb::object item) {
    check(worker);
    PyObject* owned = item.release().ptr();
    bool stored = false;
    {
      nb::gil_scoped_release release;
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopped_ || queues_[worker].size() < depth_; });
      if (!stopped_) {
        queues_[worker].push_back(owned);
        stored = true;
      }
    }
    changed_.notify_all();
    if (!stored) Py_DECREF(owned);
    return stored;
  }

  // Worker `worker` has handed over everything.
  void finish(size_t worker) {
    check(worker);
    {
      std::lock_guard lock(mutex_);
      done_[worker] = true;
    }
    changed_.notify_all();
  }

  // The consumer: the next item, from the workers in turn; none (an invalid
  // object) once every worker finished and its queue is empty.
  nb::object next() {
    PyObject* item = nullptr;
    {
      nb::gil_scoped_release release;
      std::unique_lock lock(mutex_);
      while (item == nullptr && !all_done()) {
        std::deque<PyObject*>& queue = queues_[turn_];
        changed_.wait(lock, [&] { return !queue.empty() || done_[turn_]; });
        if (queue.empty()) {  // that worker finished
          turn_ = advance(turn_);
          continue;
        }
        item = queue.front();
        queue.pop_front();
        turn_ = advance(turn_);
      }
    }
    changed_.notify_all();
    return item == nullptr ? nb::object() : nb::steal(item);
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    changed_.notify_all();
  }

  bool is_set() {
    std::lock_guard lock(mutex_);
    return stopped_;
  }

  // Sleeps `seconds` or until stopped; whether stopped.
  bool wait(double seconds) {
    nb::gil_scoped_release release;
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return stopped_; });
  }

 private:
  void check(size_t worker) const {
    if (worker >= queues_.size()) {
      throw_invalid("worker must be < " + std::to_string(queues_.size()) + ", got " + std::to_string(worker));
    }
  }
  size_t advance(size_t worker) const { return (worker + 1) % queues_.size(); }
  bool all_done() const {
    for (size_t w = 0; w < queues_.size(); ++w) {
      if (!done_[w] || !queues_[w].empty()) return false;
    }
    return true;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::deque<PyObject*>> queues_;
  std::vector<bool> done_;
  size_t depth_;
  size_t turn_ = 0;
  bool stopped_ = false;
};

}  // namespace

void bind_loader_handoff(nb::module_ m) {
  nb::class_<Handoff>(m, "Handoff",
                      "StreamingDataLoader's hand-off from `workers` worker threads to the consumer: a queue of "
                      "`depth` items per worker, taken in worker order; also the Event the workers' loops watch.")
      .def(nb::init<size_t, size_t>(), "workers"_a, "depth"_a)
      .def("put", &Handoff::put, "worker"_a, "item"_a.none(),
           "Hands `item` over, waiting for room; False (dropped) once stopped.")
      .def("finish", &Handoff::finish, "worker"_a, "The worker has handed over everything.")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__next__",
          [](Handoff& self) {
            nb::object item = self.next();
            if (!item.is_valid()) throw nb::stop_iteration();
            return item;
          },
          "The next item, from the workers in turn, until every worker finished.")
      .def("stop", &Handoff::stop)
      .def("is_set", &Handoff::is_set, "Stopped.")
      .def("wait", &Handoff::wait, "seconds"_a, "Sleeps `seconds` or until stopped; whether stopped.");
}

}  // namespace seqflow::bindings
