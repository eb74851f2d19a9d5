#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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

TEST(CheckpointRoot, WithoutARootAnyPathIsMadeAbsolute) {
  const CheckpointRoot anywhere("");
  EXPECT_EQ(anywhere.resolve("/tmp/../tmp/x.bin", "save request"), "/tmp/x.bin");
  EXPECT_EQ(anywhere.resolve("x.bin", "save request"), (fs::current_path() / "x.bin").string());
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
