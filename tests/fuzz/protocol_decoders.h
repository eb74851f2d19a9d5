// Every request and reply decoder of the controller's and the storage units'
// protocols, by name, with one valid message each (made by the encoders):
// the wire decoder fuzz target runs the entry its input picks on the
// message's frames, and seeds each entry with its valid message.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "transport/frames.h"

namespace seqflow::test {

struct ProtocolDecoder {
  std::string_view name;
  // Decodes `frames` (header first, then data) as this entry's message. A
  // decoder that checks counts against what its caller knows is given
  // `rows` samples and `fields` fields (load_storage: `fields` units).
  void (*decode)(transport::Frames& frames, size_t rows, size_t fields);
  // A valid message for `decode`, with the rows and fields it is read with.
  transport::Frames (*seed)();
  size_t rows = 0;
  size_t fields = 0;
};

const std::vector<ProtocolDecoder>& protocol_decoders();

}  // namespace seqflow::test
