// seqflow serve asks glibc for transparent huge pages for its large buffers.
#pragma once

namespace seqflow::cli {

// Before the service starts any thread: unless GLIBC_TUNABLES already says
// glibc.malloc.hugetlb (the operator's choice, kept), or the kernel has
// transparent huge pages off, runs this same command again (execv of
// /proc/self/exe, same pid and arguments) with glibc.malloc.hugetlb=1 added.
// Returns when nothing was to be done or the exec failed (said on stderr).
void rerun_with_huge_page_buffers();

}  // namespace seqflow::cli
