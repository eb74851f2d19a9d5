// CURVE keys: ZeroMQ's encryption and authentication for the controller and
// storage services (ServerCurve in server.h) and their clients (the keys of
// RemoteOptions in client.h). Keys are Z85 text, 40 characters each.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace seqflow {

inline constexpr size_t kCurveKeyChars = 40;  // Z85 text of a 32-byte key

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters; empty when read from a .pub file
};

CurveKeyPair generate_curve_keys();
// Throws kInvalidArgument naming `what` (e.g. "server_public_key") unless
// `key` is 40 characters of valid Z85.
void check_curve_key(std::string_view key, std::string_view what);
// Writes `prefix.key` (public and secret key, mode 0600) and `prefix.pub`
// (public key only, mode 0644) in ZeroMQ's certificate text format.
void write_key_files(const std::string& prefix, const CurveKeyPair& keys);
// Reads a .key or .pub file written by write_key_files or ZeroMQ's zcert:
// `public-key = "..."` and optional `secret-key = "..."` lines; '#' starts a
// comment. Throws seqflow::Error naming the path and what is wrong (kNotFound
// when it cannot be opened, kInvalidArgument when its content is bad).
CurveKeyPair read_key_file(const std::string& path);

}  // namespace seqflow
