// ThreadSanitizer suppressions for the test binary, compiled in because CI
// runs the tests under TSan with no suppressions file.
//
// libzmq is not instrumented: its threads hand messages and commands over
// through lock-free pipes whose ordering TSan cannot see, so it reports races
// between ZeroMQ's own I/O thread and a socket's user inside libzmq's frames.
// Only stacks that pass through libzmq are suppressed; seqflow's own
// hand-overs (service queues, pool) stay checked.
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_suppressions() { return "race:libzmq.so\n"; }
#endif
