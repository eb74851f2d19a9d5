// Why: ZeroMQ allocates each received message with malloc; glibc maps one
// above 32 MiB afresh and the kernel faults it in 4 KiB page by page as the
// bytes arrive. A storage unit receiving 64 MiB puts over a 10 Gbit/s link
// moved them at 0.90x the link so, 0.93x with the pages huge (glibc's tunable
// madvises its mappings; docs/benchmarks.md, "Hosts apart"). glibc reads
// tunables only at start, hence the exec.
#include "cli/huge_page_buffers.h"

#include <sys/auxv.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

namespace seqflow::cli {

namespace {

constexpr const char* kTunables = "GLIBC_TUNABLES";
constexpr const char* kHugeTlb = "glibc.malloc.hugetlb";
// Set across the exec: the restarted process never execs again, whatever
// glibc left of GLIBC_TUNABLES (it strips tunables in secure mode).
constexpr const char* kRestarted = "SEQFLOW_SERVE_RESTARTED";

bool transparent_huge_pages_off() {
  std::ifstream setting("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(setting, modes);
  return !setting || modes.find("[never]") != std::string::npos;
}

// This process's arguments as the kernel holds them (NUL-separated).
std::vector<std::string> own_arguments() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  for (size_t begin = 0; begin < all.size();) {
    const size_t end = all.find('\0', begin);
    out.push_back(all.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return out;
}

}  // namespace

void rerun_with_huge_page_buffers() {
#ifdef __GLIBC__
  if (std::getenv(kRestarted) != nullptr) {
    unsetenv(kRestarted);  // not inherited by anything this process starts
    return;
  }
  // Secure mode (setuid, setgid or file capabilities): glibc ignores the
  // tunable there, so restarting would change nothing.
  if (getauxval(AT_SECURE) != 0) return;
  const char* tunables = std::getenv(kTunables);
  const std::string current = tunables == nullptr ? "" : tunables;
  if (current.find(kHugeTlb) != std::string::npos || transparent_huge_pages_off()) return;
  std::vector<std::string> arguments = own_arguments();
  if (arguments.empty()) return;
  const std::string wanted = (current.empty() ? "" : current + ":") + kHugeTlb + "=1";
  if (setenv(kTunables, wanted.c_str(), 1) != 0 || setenv(kRestarted, "1", 1) != 0) return;
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  // Still here: serve without; GLIBC_TUNABLES goes back to what it was.
  const int error = errno;
  unsetenv(kRestarted);
  if (tunables == nullptr) {
    unsetenv(kTunables);
  } else {
    setenv(kTunables, current.c_str(), 1);
  }
  std::cerr << "seqflow serve: note: could not restart with " << kHugeTlb << "=1 (" << std::strerror(error)
            << "); serving with 4 KiB pages for large buffers\n";
#endif
}

}  // namespace seqflow::cli
