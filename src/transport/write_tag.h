// A storage unit takes the commit or the discard of a staged write only
// with the write's tag: a SipHash-2-4 of its version under the unit's admin
// token, which only the unit and its controller know. The controller hands
// the writer the tags with the version it draws (sample_production), so a
// client can settle versions the controller drew for it, and no peer can
// promote, drop or pin a version of its own making on a unit.
#pragma once

#include <cstdint>
#include <string_view>

namespace seqflow::transport {

// `unit_token`: the unit's admin token (32 hex digits, 128 random bits).
uint64_t write_tag(std::string_view unit_token, uint64_t version);

}  // namespace seqflow::transport
