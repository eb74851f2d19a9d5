// Files written for peers' requests: the temporary file of an atomic write
// never follows a symlink planted at its name, and a checkpoint never
// replaces a file that is not a checkpoint of its kind.
#include "durable/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>

#include "durable/framed_file.h"
#include "storage_test_support.h"
#include "error_matchers.h"

namespace seqflow::test {
namespace {

std::string contents(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(AtomicFile, ASymlinkAtTheTemporaryNameIsNotFollowed) {
  TempDir dir;
  const std::string victim = dir.file("victim");
  { std::ofstream(victim) << "keep me"; }
  const std::string path = dir.file("checkpoint");
  std::filesystem::create_symlink(victim, path + ".tmp");
  durable::AtomicFileWriter writer(path);
  const std::string text = "written";
  writer.write(std::as_bytes(std::span(text)));
  writer.commit();
  EXPECT_EQ(contents(victim), "keep me");
  EXPECT_EQ(contents(path), "written");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(FramedFile, ACheckpointReplacesOnlyACheckpointOfItsKind) {
  TempDir dir;
  constexpr durable::FileKind kKind{"SEQFTEST", "test checkpoint", 1, 1};
  constexpr durable::FileKind kOther{"SEQFOTHR", "other checkpoint", 1, 1};
  const std::string path = dir.file("file");
  { std::ofstream(path) << "not a checkpoint"; }
  EXPECT_TRUE(throws_invalid([&] { durable::FramedFileWriter writer(path, kKind); },
                             {"refusing to write test checkpoint", path, "never replaces"}));
  EXPECT_EQ(contents(path), "not a checkpoint");
  std::filesystem::remove(path);
  durable::FramedFileWriter(path, kKind).commit();
  durable::FramedFileWriter(path, kKind).commit();  // its own kind: replaced
  EXPECT_TRUE(throws_invalid([&] { durable::FramedFileWriter writer(path, kOther); }, {"never replaces"}));
  std::filesystem::create_directory(dir.file("directory"));
  EXPECT_TRUE(
      throws_invalid([&] { durable::FramedFileWriter writer(dir.file("directory"), kKind); }, {"never replaces"}));
}

}  // namespace
}  // namespace seqflow::test
