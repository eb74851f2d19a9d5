#include <gtest/gtest.h>

#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "server/checkpoint_root.h"
#include "storage_test_support.h"
#include "test_support.h"

namespace seqflow::server {
namespace {

namespace fs = std::filesystem;
using seqflow::test::TempDir;
using seqflow::test::throws_invalid;

TEST(CheckpointRoot, PathsInsideTheRootResolveToThemselves) {
  TempDir dir;
  fs::create_directory(dir.file("root"));
  const CheckpointRoot root(dir.file("root"));
  EXPECT_EQ(root.resolve(dir.file("root/run/step_10/controller.bin"), "save request"),
            dir.file("root/run/step_10/controller.bin"));
  EXPECT_EQ(root.resolve(dir.file("root/a/../b.bin"), "save request"), dir.file("root/b.bin"));
}

TEST(CheckpointRoot, PathsOutsideTheRootAreRefusedNamingBoth) {
  TempDir dir;
  fs::create_directory(dir.file("root"));
  fs::create_directory(dir.file("elsewhere"));
  const CheckpointRoot root(dir.file("root"));
  for (const std::string& outside :
       {std::string("/etc/passwd"), dir.file("root/../elsewhere/x.bin"), dir.file("root2/x.bin"), dir.file("")}) {
    EXPECT_TRUE(throws_invalid([&] { root.resolve(outside, "load request"); },
                               {"load request", "'" + outside + "'", "outside", dir.file("root"), "--checkpoint-root"}))
        << outside;
  }
  // A symlink inside the root that leads out of it is followed, then refused.
  fs::create_directory_symlink(dir.file("elsewhere"), dir.file("root/link"));
  EXPECT_TRUE(throws_invalid([&] { root.resolve(dir.file("root/link/x.bin"), "save request"); }, {"outside"}));
  EXPECT_TRUE(throws_invalid([&] { root.resolve("", "save request"); }, {"save request", "empty"}));
}

// Sets an environment variable for one test (ctest runs each test in a
// process of its own) and puts the old value back.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnvironment() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CheckpointRoot, WithoutARootTheDefaultIsADirectoryOfTheServicesOwn) {
  TempDir dir;
  const ScopedEnvironment no_override("SEQFLOW_CHECKPOINT_ROOT", nullptr);
  const ScopedEnvironment state("XDG_STATE_HOME", dir.file("state").c_str());
  const CheckpointRoot root("");
  const std::string expected = dir.file("state/seqflow/checkpoints");
  EXPECT_EQ(root.directory(), fs::path(expected));
  EXPECT_EQ(fs::status(expected).permissions() & (fs::perms::group_all | fs::perms::others_all), fs::perms::none);
  // Relative paths lie under it; nothing outside it is written or read.
  EXPECT_EQ(root.resolve("run/step_1", "save request"), expected + "/run/step_1");
  EXPECT_TRUE(throws_invalid([&] { root.resolve("/tmp/x.bin", "save request"); }, {"outside", expected}));
  EXPECT_TRUE(throws_invalid([&] { root.resolve("../x.bin", "save request"); }, {"outside"}));
  // A default others may write to is not trusted.
  fs::permissions(expected, fs::perms::others_write, fs::perm_options::add);
  EXPECT_TRUE(throws_invalid([&] { CheckpointRoot(""); }, {"checkpoint_root", expected, "no one else"}));
  // SEQFLOW_CHECKPOINT_ROOT names it instead.
  fs::create_directory(dir.file("chosen"));
  const ScopedEnvironment chosen("SEQFLOW_CHECKPOINT_ROOT", dir.file("chosen").c_str());
  EXPECT_EQ(CheckpointRoot("").directory(), fs::path(dir.file("chosen")));
}

TEST(CheckpointRoot, TheRootMustBeAnExistingDirectory) {
  TempDir dir;
  EXPECT_TRUE(throws_invalid([&] { CheckpointRoot(dir.file("missing")); },
                             {"checkpoint_root", "existing directory", dir.file("missing")}));
  const std::string file = dir.file("file");
  { std::ofstream(file) << "x"; }
  EXPECT_TRUE(throws_invalid([&] { CheckpointRoot{file}; }, {"checkpoint_root", file}));
}

}  // namespace
}  // namespace seqflow::server
