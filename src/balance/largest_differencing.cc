#include "balance/largest_differencing.h"

#include <algorithm>

#include "seqflow/error.h"

namespace seqflow::balance::detail {

namespace {

// A part under construction. Items form a singly linked list through `next`
// so that merging two sets is O(1) and keeps verl's item order.
struct WeightedSet {
  int64_t sum = 0;
  int64_t count = 0;
  int64_t head = -1;
  int64_t tail = -1;
};

constexpr WeightedSet kEmptySet{};

// verl orders sets by (sum, count, item list). Two distinct sets never share an
// item, so their item lists differ at the first item: comparing heads is exact.
bool set_less(const WeightedSet& a, const WeightedSet& b) {
  if (a.sum != b.sum) return a.sum < b.sum;
  if (a.count != b.count) return a.count < b.count;
  return a.head < b.head;
}

// A function object, not a function pointer, so that std::sort inlines it.
constexpr auto set_greater = [](const WeightedSet& a, const WeightedSet& b) { return set_less(b, a); };

// A k-way partial partition. Empty sets are kept implicit so that a state of one
// item costs O(1), not O(k). In verl's descending order the empties sit after
// every set with a non-negative sum and before every set with a negative sum.
struct State {
  std::vector<WeightedSet> sets;  // non-empty, descending
  int64_t empties = 0;
  int64_t spread = 0;
  WeightedSet top;

  size_t nonnegative_count() const {
    return static_cast<size_t>(
        std::partition_point(sets.begin(), sets.end(), [](const WeightedSet& s) { return s.sum >= 0; }) - sets.begin());
  }

  int64_t slot_of(size_t i, size_t nonnegative) const {
    return static_cast<int64_t>(i < nonnegative ? i : i + static_cast<size_t>(empties));
  }

  void refresh() {
    size_t nonneg = nonnegative_count();
    top = (nonneg > 0 || empties == 0) ? sets.front() : kEmptySet;
    int64_t bottom = (nonneg < sets.size() || empties == 0) ? sets.back().sum : 0;
    spread = top.sum - bottom;
  }
};

// verl's State.__lt__: larger spread first, then the larger top set.
bool pops_before(const State& a, const State& b) {
  if (a.spread != b.spread) return a.spread > b.spread;
  return set_greater(a.top, b.top);
}

// A binary heap that performs exactly the comparisons and moves of CPython's
// heapq, so that states which compare equal pop in the same order as in verl.
class StateHeap {
 public:
  explicit StateHeap(const std::vector<State>& states) : states_(states) {}

  void push(int32_t id) {
    heap_.push_back(id);
    sift_toward_root(0, heap_.size() - 1);
  }

  int32_t pop() {
    int32_t last = heap_.back();
    heap_.pop_back();
    if (heap_.empty()) return last;
    int32_t first = heap_[0];
    heap_[0] = last;
    sift_to_leaf_and_back(0);
    return first;
  }

  size_t size() const { return heap_.size(); }
  int32_t front() const { return heap_.front(); }

 private:
  bool less(int32_t a, int32_t b) const { return pops_before(states_[a], states_[b]); }

  void sift_toward_root(size_t start, size_t pos) {
    int32_t item = heap_[pos];
    while (pos > start) {
      size_t parent = (pos - 1) >> 1;
      if (!less(item, heap_[parent])) break;
      heap_[pos] = heap_[parent];
      pos = parent;
    }
    heap_[pos] = item;
  }

  void sift_to_leaf_and_back(size_t pos) {
    size_t end = heap_.size();
    size_t start = pos;
    int32_t item = heap_[pos];
    size_t child = 2 * pos + 1;
    while (child < end) {
      size_t right = child + 1;
      if (right < end && !less(heap_[child], heap_[right])) child = right;
      heap_[pos] = heap_[child];
      pos = child;
      child = 2 * pos + 1;
    }
    heap_[pos] = item;
    sift_toward_root(start, pos);
  }

  const std::vector<State>& states_;
  std::vector<int32_t> heap_;
};

class Differencer {
 public:
  Differencer(std::span<const int64_t> values, int64_t k) : values_(values), k_(k), next_(values.size(), -1) {}

  // `items` ascend by (value, index), which is ascending set order.
  State make_state(std::span<const int64_t> items) const {
    State state;
    state.sets.reserve(items.size());
    for (auto it = items.rbegin(); it != items.rend(); ++it) {
      state.sets.push_back({values_[*it], 1, *it, *it});
    }
    state.empties = k_ - static_cast<int64_t>(items.size());
    state.refresh();
    return state;
  }

  // verl's State.merge: set i of `a` absorbs set k-1-i of `b`.
  void merge(State& a, State& b) {
    size_t a_nonneg = a.nonnegative_count();
    size_t b_nonneg = b.nonnegative_count();
    merged_.clear();
    size_t i = 0;
    size_t j = b.sets.size();  // b's slots run backwards
    while (i < a.sets.size() || j > 0) {
      int64_t a_slot = i < a.sets.size() ? a.slot_of(i, a_nonneg) : k_;
      int64_t b_slot = j > 0 ? k_ - 1 - b.slot_of(j - 1, b_nonneg) : k_;
      if (a_slot < b_slot) {
        merged_.push_back(a.sets[i++]);
      } else if (b_slot < a_slot) {
        merged_.push_back(b.sets[--j]);
      } else {
        WeightedSet joined = a.sets[i++];
        const WeightedSet& tail = b.sets[--j];
        next_[joined.tail] = tail.head;
        joined.tail = tail.tail;
        joined.sum += tail.sum;
        joined.count += tail.count;
        merged_.push_back(joined);
      }
    }
    std::sort(merged_.begin(), merged_.end(), set_greater);
    a.sets.swap(merged_);
    a.empties = k_ - static_cast<int64_t>(a.sets.size());
    a.refresh();
    std::vector<WeightedSet>().swap(b.sets);
  }

  DifferencingResult unpack(const State& state) const {
    DifferencingResult result;
    result.parts.reserve(static_cast<size_t>(k_));
    size_t nonneg = state.nonnegative_count();
    auto emit = [&](const WeightedSet& set) {
      std::vector<int64_t> part;
      part.reserve(static_cast<size_t>(set.count));
      for (int64_t item = set.head; item != -1; item = next_[item]) part.push_back(item);
      result.parts.push_back(std::move(part));
      result.sums.push_back(set.sum);
    };
    for (size_t i = 0; i < nonneg; ++i) emit(state.sets[i]);
    for (int64_t e = 0; e < state.empties; ++e) emit(kEmptySet);
    for (size_t i = nonneg; i < state.sets.size(); ++i) emit(state.sets[i]);
    return result;
  }

 private:
  std::span<const int64_t> values_;
  int64_t k_;
  std::vector<int64_t> next_;
  std::vector<WeightedSet> merged_;
};

}  // namespace

DifferencingResult largest_differencing(std::span<const int64_t> values, std::span<const int64_t> ascending, int64_t k,
                                        DifferencingStart start) {
  const auto n = static_cast<int64_t>(values.size());
  if (k <= 0) throw_invalid("k must be positive, got " + std::to_string(k));
  if (n == 0) throw_invalid("values must not be empty");
  if (n > INT32_MAX) throw_invalid("too many items: " + std::to_string(n));

  Differencer differencer(values, k);
  std::vector<State> states;
  std::span<const int64_t> sorted = ascending;
  if (start == DifferencingStart::kOneItemPerState) {
    states.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) states.push_back(differencer.make_state(sorted.subspan(i, 1)));
  } else {
    // A short first chunk (n % k items) keeps counts within one of each other.
    int64_t offset = n % k;
    states.reserve(static_cast<size_t>(n / k + 1));
    if (offset > 0) states.push_back(differencer.make_state(sorted.subspan(0, offset)));
    for (; offset < n; offset += k) {
      states.push_back(differencer.make_state(sorted.subspan(offset, k)));
    }
  }

  StateHeap heap(states);
  for (int32_t id = 0; id < static_cast<int32_t>(states.size()); ++id) heap.push(id);
  while (heap.size() > 1) {
    int32_t first = heap.pop();
    int32_t second = heap.pop();
    differencer.merge(states[first], states[second]);
    heap.push(first);
  }
  return differencer.unpack(states[heap.front()]);
}

}  // namespace seqflow::balance::detail
