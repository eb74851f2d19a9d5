// Drops of released samples' data that storage units did not confirm (a
// unit silent, cut off or failing), kept per unit until it registers again.
// Per global index only the highest released generation is kept: an
// index's generations only grow, so every generation up to a released one
// is released too, and a unit drops what it holds at or below it. A unit
// that never returns thus costs one entry per index routed to it, however
// many clears pass meanwhile.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace seqflow::server {

class OwedDrops {
 public:
  // The indexes and, for each, the highest generation released there.
  struct Debt {
    std::vector<int64_t> indexes;
    std::vector<uint64_t> generations;
  };

  // `unit` owes the drop of these indexes up to these generations (one per index).
  void add(const std::string& unit, std::span<const int64_t> indexes, std::span<const uint64_t> generations);
  // What `unit` owes, no longer kept (sent now; add() it back if that fails).
  Debt take(const std::string& unit);
  // `unit` restarted: its data went with it.
  void forget(const std::string& unit) { owed_.erase(unit); }
  // Indexes owed, over every unit (a gauge for operators).
  size_t size() const;

 private:
  std::map<std::string, std::map<int64_t, uint64_t>> owed_;
};

}  // namespace seqflow::server
