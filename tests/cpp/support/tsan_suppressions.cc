// ThreadSanitizer suppressions for the test binary, compiled in because CI
// runs the tests under TSan with no suppressions file.
//
// libzmq is not instrumented: its threads hand messages and commands over
// through lock-free pipes whose ordering TSan cannot see, so it reports races
// between ZeroMQ's own I/O thread and a socket's user inside libzmq's frames.
// Only stacks that pass through libzmq are suppressed; seqflow's own
// hand-overs (service queues, pool) stay checked. With CURVE, ZeroMQ's I/O
// thread decrypts each frame with libsodium (also not instrumented, and its
// stack shows no libzmq frame) into the message it then hands over the same
// way: stacks through libsodium are suppressed for the same reason.
// ZeroMQ's I/O thread formats a new connection's address with a string stream
// from the address object the connecting thread allocated; with no
// instrumented frame between, that stack shows only libstdc++'s
// basic_streambuf::xsputn. The rule also hides a race on anything written
// into a stream (xsputn copies it): seqflow streams only what its own thread
// owns (error texts, key files, checkpoint names).
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_suppressions() {
  return "race:libzmq.so\nrace:libsodium.so\nrace:std::basic_streambuf*::xsputn\n";
}
#endif
