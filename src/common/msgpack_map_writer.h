// A MessagePack map written member by member and put out with its keys in
// byte order, as the JSON library of earlier builds wrote every map: the
// wire's headers and the controller checkpoint keep the bytes earlier builds
// wrote. Setting a key again replaces its value.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "common/msgpack_writer.h"

namespace seqflow {

class MsgpackMapWriter {
 public:
  // The writer of the value of `key`, empty: write exactly one value into it.
  MsgpackWriter& set(std::string_view key);

  bool empty() const { return members_.empty(); }
  // The map, written into `out`.
  void write(MsgpackWriter& out) const;
  std::string bytes() const;

 private:
  std::map<std::string, MsgpackWriter, std::less<>> members_;
};

}  // namespace seqflow
