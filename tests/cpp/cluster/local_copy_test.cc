// Same-host copies: descriptions of frames read back byte for byte (also by
// another process), peers that are not where they claim detected, bad
// descriptions refused; leases that keep a get's frames until given back;
// and the storage service and remote client moving large puts and gets
// through memory, with small ones and opted-out clients on TCP. Threads
// sharing leases or a cluster: local_copy_concurrency_test.cc.
#include "transport/local_copy.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <thread>

#include "common/aligned_buffer.h"
#include "common/siphash.h"
#include "transport/connection.h"
#include "transport/frame_leases.h"
#include "transport/local_copy_session.h"
#include "transport/storage_protocol.h"
#include "eventually.h"
#include "remote_cluster.h"
#include "local_copy_test_support.h"
#include "sample_keys_support.h"
#include "storage_test_support.h"
#include "wire_test_support.h"
#include "transport/storage_routing.h"

namespace seqflow::test {
namespace {

using transport::Frames;

void expect_same_frames(const Frames& sent, size_t first, const Frames& read) {
  ASSERT_EQ(read.size(), sent.size() - first);
  for (size_t i = 0; i < read.size(); ++i) {
    EXPECT_EQ(transport::as_string_view(read[i]), transport::as_string_view(sent[first + i])) << "frame " << i;
  }
}

constexpr size_t kNoLimit = SIZE_MAX;

TEST(LocalCopy, DescribedFramesAreReadBackByteForByte) {
  // Sizes around ZeroMQ's inline-message and frame_of's copy thresholds, and a huge-page buffer.
  const Frames sent = data_frames({0, 1, 33, 34, 1023, 1024, 3 << 20});
  const std::string description = transport::local_copy::describe(sent, 1);
  expect_same_frames(sent, 1, transport::local_copy::read(getpid(), description, "test", sent.size() - 1, kNoLimit));
  EXPECT_TRUE(
      throws_error(ErrorCode::kInvalidArgument,
                   [&] { transport::local_copy::read(getpid(), description, "put request local_frames", 2, kNoLimit); },
                   {"put request local_frames", "frames", "describes 7 frames, not the 2"}));
  EXPECT_EQ(transport::local_copy::data_bytes(sent, 1), size_t{0 + 1 + 33 + 34 + 1023 + 1024 + (3 << 20)});
}

TEST(LocalCopy, ALargeCopySplitBetweenThreadsComesBackWhole) {
  // 80 MiB: split in parts that cut frames at odd offsets.
  Frames sent(1);
  for (const size_t size : {(size_t{33} << 20) + 7, size_t{1}, (size_t{47} << 20) + 13}) {
    WritableBuffer buffer = allocate_buffer(size);
    for (size_t i = 0; i < size; ++i) buffer.data[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
    sent.push_back(transport::frame_of(std::move(buffer.buffer), 0, size));
  }
  expect_same_frames(sent, 1,
                     transport::local_copy::read(getpid(), transport::local_copy::describe(sent, 1), "test",
                                                 sent.size() - 1, kNoLimit));
}

TEST(LocalCopy, MoreFramesThanOneSystemCallTakesAreAllRead) {
  Frames sent(1);
  for (size_t i = 0; i < 3 * IOV_MAX + 7; ++i)
    sent.push_back(transport::frame_of(random_buffer(40 + i % 3000, i), 0, 40 + i % 3000));
  expect_same_frames(sent, 1,
                     transport::local_copy::read(getpid(), transport::local_copy::describe(sent, 1), "test",
                                                 sent.size() - 1, kNoLimit));
}

TEST(LocalCopy, PlaceholdersStandForTheDescribedFramesAndPiecesAreCopiedFromThem) {
  const Frames sent = data_frames({0, 100, 5000, 70000});
  const std::string description = transport::local_copy::describe(sent, 1);
  const Frames stand_ins = transport::local_copy::placeholders(description, "test");
  ASSERT_EQ(stand_ins.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(stand_ins[i].size(), sent[i + 1].size());
    if (sent[i + 1].size() != 0) {
      EXPECT_EQ(stand_ins[i].data(), sent[i + 1].data());
    }
  }
  // Scattered pieces, in an order unlike the source's, and two adjacent ones.
  const auto* big = static_cast<const std::byte*>(stand_ins[3].data());
  const auto* mid = static_cast<const std::byte*>(stand_ins[2].data());
  std::vector<std::byte> out(70000 + 300);
  const std::vector<transport::local_copy::Piece> pieces = {
      {big + 100, out.data(), 30000},
      {big + 30100, out.data() + 30000, 39900},  // adjacent both sides
      {mid + 7, out.data() + 69900, 300},
      {big, out.data() + 70200, 0}};
  transport::local_copy::read_pieces(getpid(), pieces, "test");
  const auto expected_big = transport::as_bytes(sent[4]);
  const auto expected_mid = transport::as_bytes(sent[3]);
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 69900, expected_big.begin() + 100));
  EXPECT_TRUE(std::equal(out.begin() + 69900, out.begin() + 70200, expected_mid.begin() + 7));
  EXPECT_TRUE(throws_error(
      ErrorCode::kInvalidArgument,
      [&] {
        const transport::local_copy::Piece unmapped{reinterpret_cast<const std::byte*>(4096), out.data(), 10};
        transport::local_copy::read_pieces(getpid(), {&unmapped, 1}, "get reply local_frames");
      },
      {"get reply local_frames", "cannot be read from process"}));
}

TEST(LocalCopy, FramesDescribedAsPiecesAreAssembledByTheReader) {
  const Frames source = data_frames({10000, 70000});
  const auto a = transport::as_bytes(source[1]);
  const auto b = transport::as_bytes(source[2]);
  // Frame 0: two scattered pieces of b and one of a; frame 1: empty; frame 2: all of a.
  const std::vector<std::vector<std::span<const std::byte>>> frames = {
      {b.subspan(500, 3000), a.subspan(9000, 1000), b.subspan(60000, 10000)}, {}, {a}};
  const std::string description = transport::local_copy::describe(frames);
  const Frames read = transport::local_copy::read(getpid(), description, "test", 3, kNoLimit);
  ASSERT_EQ(read.size(), 3u);
  std::vector<std::byte> expected;
  for (const auto& piece : frames[0]) expected.insert(expected.end(), piece.begin(), piece.end());
  EXPECT_EQ(to_bytes(transport::as_bytes(read[0])), expected);
  EXPECT_EQ(read[1].size(), 0u);
  EXPECT_EQ(to_bytes(transport::as_bytes(read[2])), to_bytes(a));
  // A frame of several pieces has no single range a placeholder could stand for.
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] { transport::local_copy::placeholders(description, "get reply local_frames"); },
                           {"get reply local_frames", "pieces", "one per frame"}));
  Tree miscounted = Tree::read(description);
  miscounted["pieces"] = Tree::numbers(std::vector<uint32_t>{3, 0, 2});
  EXPECT_TRUE(throws_error(
      ErrorCode::kInvalidArgument,
      [&] { transport::local_copy::read(getpid(), miscounted.bytes(), "put request local_frames", 3, kNoLimit); },
      {"put request local_frames", "pieces", "every range"}));
}

TEST(LocalCopy, AnotherProcessReadsTheFramesOfItsParent) {
  const Frames sent = data_frames({5000, 1 << 20});
  const std::string description = transport::local_copy::describe(sent, 1);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    bool same = false;
    try {
      same = transport::as_string_view(transport::local_copy::read(getppid(), description, "child", 2, kNoLimit)[1]) ==
             transport::as_string_view(sent[2]);
    } catch (...) {
    }
    _exit(same ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

TEST(LocalCopy, AProcessThatIsGoneCannotBeRead) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // reaped: the pid names no process now
  const Frames sent = data_frames({4096});
  EXPECT_TRUE(throws_error(
      ErrorCode::kInvalidArgument,
      [&] { transport::local_copy::read(child, transport::local_copy::describe(sent, 1), "test", 1, kNoLimit); },
      {"test", "cannot be read from process " + std::to_string(child)}));
}

TEST(LocalCopy, MalformedDescriptionsAreRefusedNamingTheKey) {
  const Frames sent = data_frames({4096});
  const Tree good = Tree::read(transport::local_copy::describe(sent, 1));
  const auto refused = [&](const Tree& description, std::vector<std::string> fragments) {
    EXPECT_TRUE(throws_error(
        ErrorCode::kInvalidArgument,
        [&] { transport::local_copy::read(getpid(), description.bytes(), "put request local_frames", 1, kNoLimit); },
        fragments))
        << fragments.front();
  };
  // What descriptions used to carry: a peer that names a process (the unit's
  // own, to read its memory back) is refused, not obeyed.
  Tree naming_a_process = good;
  naming_a_process["pid"] = int64_t{getpid()};
  refused(naming_a_process, {"pid"});
  Tree with_token = good;
  with_token["token"] = Tree::binary(std::vector<uint8_t>(16));
  refused(with_token, {"token"});
  Tree session_as_text = good;
  session_as_text["session"] = "0123456789abcdef";
  session_as_text["sequence"] = 1;
  session_as_text["tag"] = 1;
  transport::local_copy::SessionListener listener;
  EXPECT_TRUE(throws_error(
      ErrorCode::kInvalidArgument,
      [&] { transport::local_copy::sealed_reader(listener, session_as_text.bytes(), "put request local_frames"); },
      {"put request local_frames", "session", "binary"}));
  Tree unknown = good;
  unknown["checksum"] = 1;
  refused(unknown, {"checksum"});
  Tree missing = good;
  missing.erase("frames");
  refused(missing, {"frames"});
  Tree not_binary = good;
  not_binary["frames"] = "everything";
  refused(not_binary, {"frames"});
}

TEST(LocalCopy, BadFrameListsAreRefusedBeforeAnythingIsAllocated) {
  const Frames sent = data_frames({4096});
  const Tree good = Tree::read(transport::local_copy::describe(sent, 1));
  const auto with_ranges = [&](std::vector<uint64_t> ranges) {
    Tree out = good;
    out["frames"] = Tree::numbers(ranges);
    out.erase("pieces");  // one range per frame
    return out.bytes();
  };
  const auto address = reinterpret_cast<uintptr_t>(sent[1].data());
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] { transport::local_copy::read(getpid(), with_ranges({address}), "test", 1, kNoLimit); },
                           {"frames", "(address, size) pairs"}));
  EXPECT_TRUE(throws_error(
      ErrorCode::kInvalidArgument,
      [&] {
        transport::local_copy::read(getpid(), with_ranges({address, uint64_t{1} << 50}), "test", 1, 1 << 20);
      },
      {"frames", "limit of 1048576 bytes"}));
  // Two sizes that wrap around size_t when added.
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             transport::local_copy::read(getpid(),
                                                         with_ranges({address, 4096, address, UINT64_MAX - 100}),
                                                         "test", 2, kNoLimit - 1);
                           },
                           {"frames", "limit"}));
  // Memory the peer does not have: the page at address 4096 is never mapped.
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             transport::local_copy::read(getpid(), with_ranges({4096, 100}), "test", 1, kNoLimit);
                           },
                           {"frames", "cannot be read from process"}));
}

TEST(FrameLeases, AHeldLeaseKeepsItsFramesUntilGivenBackOnce) {
  transport::FrameLeases leases(std::chrono::seconds(60));
  auto buffer = random_buffer(4096, 7);
  const std::weak_ptr<const Buffer> watch = buffer;
  Frames frames;
  frames.push_back(transport::frame_of(std::move(buffer), 0, 4096));
  const uint64_t id = leases.hold(std::move(frames));
  EXPECT_EQ(leases.held(), 1u);
  EXPECT_FALSE(watch.expired());
  EXPECT_TRUE(leases.release(id));
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(leases.held(), 0u);
  EXPECT_FALSE(leases.release(id));
  EXPECT_FALSE(leases.release(id + 1));
}

TEST(FrameLeases, ALeaseRunsOutAfterItsLifetime) {
  transport::FrameLeases leases(std::chrono::milliseconds(20));
  const uint64_t first = leases.hold(data_frames({100}));
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const uint64_t second = leases.hold(data_frames({100}));  // drops the first, which ran out
  EXPECT_EQ(leases.held(), 1u);
  EXPECT_FALSE(leases.release(first));
  EXPECT_TRUE(leases.release(second));
}

TEST(FrameLeases, ALifetimeMustBePositive) {
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [] { transport::FrameLeases(std::chrono::milliseconds(0)); },
                           {"lease lifetime", "0 ms"}));
}

INSTANTIATE_TEST_SUITE_P(Units, LocalCopyCluster, ::testing::ValuesIn(kLocalCopyUnitCounts));

// Puts and gets samples*width floats in two fields; the values come back.
void round_trip(Client& client, size_t samples, size_t width) {
  const std::vector<Column> columns{wide_column("a", samples, width), wide_column("b", samples, width)};
  const BatchMeta meta = client.put_new("p", columns, {});
  const std::vector<std::string> fields{"b", "a"};
  const auto rows = client.get_data(meta, fields);
  ASSERT_EQ(rows.size(), samples);
  for (size_t i = 0; i < samples; ++i) {
    for (size_t f = 0; f < 2; ++f) {
      const Column& column = columns[1 - f];
      EXPECT_EQ(to_bytes(rows[i][f].bytes()), to_bytes(column.sample(i).bytes())) << "sample " << i;
    }
  }
}

TEST_P(LocalCopyCluster, LargePutsAndGetsTravelThroughMemory) {
  RemoteCluster cluster(GetParam());
  round_trip(*cluster.client(), 96, 8192);  // 3 MiB per field
  const double moved = 2.0 * 96 * 8192 * sizeof(float);
  EXPECT_EQ(local_copy_bytes(cluster, "put"), moved);
  EXPECT_EQ(local_copy_bytes(cluster, "get"), moved);
  for (size_t u = 0; u < cluster.unit_count(); ++u) {
    EXPECT_NE(cluster.unit(u).metrics().render().find("seqflow_storage_leases 0"), std::string::npos);
  }
}

TEST_P(LocalCopyCluster, EachFieldOfAGetIsOneRunOfBytesInRequestOrder) {
  RemoteCluster cluster(GetParam());
  auto client = cluster.client();
  const BatchMeta meta = client->put_new("p", {wide_column("a", 64, 8192), wide_column("b", 64, 8192)}, {});
  // Every other sample, backwards: rows of every unit, interleaved.
  BatchMeta picked;
  for (size_t i = meta.size(); i >= 2; i -= 2) {
    picked.global_indexes.push_back(meta.global_indexes[i - 1]);
    picked.generations.push_back(meta.generations[i - 1]);
    picked.partition_ids.push_back("p");
  }
  const std::vector<std::string> fields{"a", "b"};
  const auto rows = client->get_data(picked, fields);
  ASSERT_EQ(rows.size(), 32u);
  for (size_t f = 0; f < 2; ++f) {
    for (size_t i = 1; i < rows.size(); ++i) {
      EXPECT_EQ(rows[i][f].buffer, rows[0][f].buffer) << "field " << f << " row " << i;
      EXPECT_EQ(rows[i][f].offset, rows[i - 1][f].offset + rows[i - 1][f].nbytes);
    }
  }
  EXPECT_GT(local_copy_bytes(cluster, "get"), 0.0);
}

TEST_P(LocalCopyCluster, SmallTransfersAndOptedOutClientsSendTheBytes) {
  RemoteCluster cluster(GetParam());
  round_trip(*cluster.client(), 4, 64);  // 1 KiB per field: below the threshold
  round_trip(*cluster.client(std::chrono::seconds(20), /*local_copy=*/false), 96, 8192);
  EXPECT_EQ(local_copy_bytes(cluster, "put"), 0.0);
  EXPECT_EQ(local_copy_bytes(cluster, "get"), 0.0);
}

TEST_P(LocalCopyCluster, AGetWhoseLeaseRanOutIsATimeoutNotTornData) {
  RemoteCluster cluster(GetParam(), {}, {}, std::chrono::milliseconds(1));
  auto client = cluster.client();
  // 64 MiB: copying it takes longer than the 1 ms lease even in an optimized build.
  const BatchMeta meta = client->put_new("p", {wide_column("a", 2048, 8192)}, {});
  const std::vector<std::string> fields{"a"};
  EXPECT_TRUE(throws_error(ErrorCode::kTimeout, [&] { client->get_data(meta, fields); },
                           {"let go of a get's values", "call get again"}));
}

TEST(LocalCopyService, AGetThatFailsOnOneUnitGivesTheOtherUnitsLeasesBack) {
  RemoteCluster cluster(3);
  auto client = cluster.client(std::chrono::seconds(2));
  // A block of samples on each unit.
  const BatchMeta meta = client->put_new("p", {wide_column("a", 3 * transport::kPlacementBlock, 8192)}, {});
  cluster.stop_unit(2);
  const std::vector<std::string> fields{"a"};
  EXPECT_TRUE(throws_error(ErrorCode::kTimeout, [&] { client->get_data(meta, fields); }, {}));
  for (size_t u = 0; u < 2; ++u) {
    EXPECT_GT(
        cluster.unit(u).metrics().counter("seqflow_storage_local_copy_bytes_total", "", {{"direction", "get"}}).value(),
        0.0);
    EXPECT_NE(cluster.unit(u).metrics().render().find("seqflow_storage_leases 0"), std::string::npos) << u;
  }
}

// What the unit reads for a request signed with `key` under `sequence`
// (SessionListener::reader_of with a tag made as the client makes it).
std::optional<pid_t> signed_reader(transport::local_copy::SessionListener& listener, std::span<const uint8_t> id,
                                   const SipKey& key, uint64_t sequence) {
  std::vector<uint8_t> message(sizeof(sequence));
  std::memcpy(message.data(), &sequence, sizeof(sequence));
  return listener.reader_of(id, sequence, message, siphash24(key, message));
}

std::optional<pid_t> signed_reader(transport::local_copy::SessionListener& listener,
                                   const transport::local_copy::Session& session) {
  return signed_reader(listener, session.id(), session.key(), session.next_sequence());
}

TEST(LocalCopySession, TheKernelNamesEachEndAndTheSessionEndsWithItsSocket) {
  transport::local_copy::SessionListener listener;
  auto session = transport::local_copy::Session::open(listener.address(), std::chrono::seconds(5));
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->unit_pid(), getpid());
  EXPECT_TRUE(session->reads_unit());
  EXPECT_TRUE(session->unit_reads_us());
  EXPECT_TRUE(session->usable());
  const std::span<const uint8_t> id(session->id());
  // Known to the unit by the time the client has its answer: the client's
  // first request may follow at once.
  EXPECT_TRUE(listener.is_open(id));
  EXPECT_EQ(signed_reader(listener, *session), getpid());
  for (int i = 0; i < 200; ++i) {
    const auto another = transport::local_copy::Session::open(listener.address(), std::chrono::seconds(5));
    ASSERT_NE(another, nullptr);
    ASSERT_EQ(signed_reader(listener, *another), getpid()) << "open " << i;
  }
  // An id nobody was given, or of the wrong size, names no session.
  auto guessed = session->id();
  guessed[0] ^= 1;
  EXPECT_EQ(signed_reader(listener, guessed, session->key(), session->next_sequence()), std::nullopt);
  EXPECT_EQ(signed_reader(listener, id.first(15), session->key(), session->next_sequence()), std::nullopt);
  const auto kept = session->id();
  const auto key = session->key();
  session.reset();
  EXPECT_TRUE(eventually([&] { return !listener.is_open(kept); }));
  EXPECT_EQ(signed_reader(listener, kept, key, 1000), std::nullopt);
}

// The session's process exits while a child it forked keeps the socket: the
// pid may now name anyone, so the unit reads it no more.
TEST(LocalCopySession, ASessionWhoseProcessIsGoneIsNotReadEvenWhileItsSocketLives) {
  transport::local_copy::SessionListener listener;
  int ids[2];
  int hold[2];
  ASSERT_EQ(pipe(ids), 0);
  ASSERT_EQ(pipe(hold), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto session = transport::local_copy::Session::open(listener.address(), std::chrono::seconds(5));
    const auto id = session ? session->id() : transport::local_copy::SessionId{};
    const auto key = session ? session->key() : SipKey{};
    const bool sent = write(ids[1], id.data(), id.size()) == static_cast<ssize_t>(id.size()) &&
                      write(ids[1], key.data(), key.size()) == static_cast<ssize_t>(key.size());
    if (fork() == 0) {  // keeps the session's socket open until the test closes `hold`
      close(hold[1]);
      char byte = 0;
      [[maybe_unused]] const ssize_t got = read(hold[0], &byte, 1);
      _exit(0);
    }
    _exit(session && sent ? 0 : 1);
  }
  close(hold[0]);
  transport::local_copy::SessionId id{};
  SipKey key{};
  ASSERT_EQ(read(ids[0], id.data(), id.size()), static_cast<ssize_t>(id.size()));
  ASSERT_EQ(read(ids[0], key.data(), key.size()), static_cast<ssize_t>(key.size()));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(listener.is_open(id)) << "the grandchild holds the socket";
  EXPECT_EQ(signed_reader(listener, id, key, 1), std::nullopt) << "the process that opened it is gone";
  for (const int fd : {ids[0], ids[1], hold[1]}) close(fd);
  EXPECT_TRUE(eventually([&] { return !listener.is_open(id); }));
}

// A peer that saw a client's session id (a hostile endpoint the client put
// to over TCP) cannot make the unit read other ranges of the client, nor
// the same ones again later: only descriptions the client sealed, once each.
TEST(LocalCopySession, OnlyRangesTheClientSealedAreReadAndEachOnlyOnce) {
  transport::local_copy::SessionListener listener;
  auto session = transport::local_copy::Session::open(listener.address(), std::chrono::seconds(5));
  ASSERT_NE(session, nullptr);
  const std::vector<std::byte> mine(64, std::byte{7});
  const std::vector<std::byte> secret(64, std::byte{9});
  const auto described = [](const std::vector<std::byte>& bytes) {
    const std::vector<std::vector<std::span<const std::byte>>> frames = {{std::span(bytes)}};
    return transport::local_copy::describe(frames);
  };
  const std::string sealed = transport::local_copy::seal(described(mine), *session);
  EXPECT_EQ(transport::local_copy::sealed_reader(listener, sealed, "put"), getpid());
  EXPECT_EQ(transport::local_copy::sealed_reader(listener, sealed, "put"), std::nullopt) << "a replay was read";

  Tree forged = Tree::read(transport::local_copy::seal(described(mine), *session));
  // The id, sequence and tag of a real one, other ranges.
  forged["frames"] = Tree::read(described(secret)).at("frames");
  EXPECT_EQ(transport::local_copy::sealed_reader(listener, forged.bytes(), "put"), std::nullopt);
  // Bytes moved from one signed field to the other, under the same tag.
  Tree shifted = Tree::read(transport::local_copy::seal(described(mine), *session));
  const std::string pieces = shifted["pieces"].binary_bytes();
  shifted["frames"].binary_bytes() += pieces;
  shifted.erase("pieces");
  EXPECT_EQ(transport::local_copy::sealed_reader(listener, shifted.bytes(), "put"), std::nullopt);
  Tree unsigned_description = Tree::read(described(secret));
  unsigned_description["session"] = Tree::binary(std::vector<uint8_t>(session->id().begin(), session->id().end()));
  EXPECT_EQ(transport::local_copy::sealed_reader(listener, unsigned_description.bytes(), "put"), std::nullopt);

  // Puts of several threads arrive out of order: any unseen sequence within
  // the window is taken; older ones are not.
  const uint64_t first = session->next_sequence();
  for (uint64_t step = 0; step < 10; ++step) (void)session->next_sequence();
  const uint64_t last = session->next_sequence();
  EXPECT_EQ(signed_reader(listener, session->id(), session->key(), last), getpid());
  EXPECT_EQ(signed_reader(listener, session->id(), session->key(), first), getpid());
  EXPECT_EQ(signed_reader(listener, session->id(), session->key(), first), std::nullopt);
  const uint64_t far = last + transport::local_copy::SessionListener::kReplayWindow + 5;
  EXPECT_EQ(signed_reader(listener, session->id(), session->key(), far), getpid());
  EXPECT_EQ(signed_reader(listener, session->id(), session->key(), last + 1), std::nullopt) << "older than the window";
}

TEST(LocalCopySession, AnAddressNoUnitListensOnGivesNoSession) {
  std::string why;
  EXPECT_EQ(transport::local_copy::Session::open("seqflow-local-copy-nobody", std::chrono::seconds(2), &why), nullptr);
  EXPECT_NE(why.find("cannot reach"), std::string::npos) << why;
}

// A put's local frames, sealed for `session` with `key` when given.
Tree put_request(const Frames& message, const std::string& columns,
                 std::optional<transport::local_copy::SessionId> session, const SipKey& key = {}) {
  Tree header = test::storage_request({0, 1});
  header["columns"] = Tree::read(columns);
  std::string description = transport::local_copy::describe(message, 1);
  if (session) description = transport::local_copy::seal(description, *session, key, 1);
  header["local_frames"] = Tree::read(description);
  return header;
}

TEST(LocalCopyService, APutNamingNoOpenSessionIsRefusedAndStoresNothing) {
  RemoteCluster cluster(1);
  zmq::context_t context(1);
  transport::Connection unit(context, cluster.unit(0).endpoint(), transport::ConnectionOptions{});
  Frames message(1);
  const std::string entries = transport::wire::append_columns({wide_column("a", 2, 100000)}, {}, message);
  transport::local_copy::SessionId made_up{};
  made_up.fill(7);
  for (const auto& session : {std::optional<transport::local_copy::SessionId>(), std::optional(made_up)}) {
    const Frames reply = unit.call("put", message_of(put_request(message, entries, session)));
    const std::optional<std::string> refused = transport::storage_protocol::decode_put_reply(reply).local_copy_refused;
    ASSERT_TRUE(refused.has_value());
    EXPECT_NE(refused->find("no open local-copy session of this unit signed"), std::string::npos);
  }
  EXPECT_EQ(cluster.unit(0).storage().stats().samples, 0u);
  // The old way of naming a process (pid, token) is an error reply, and the
  // unit keeps serving.
  Tree naming_the_unit = put_request(message, entries, std::nullopt);
  naming_the_unit["local_frames"]["pid"] = int64_t{getpid()};
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.call("put", message_of(naming_the_unit)); },
                           {"put request local_frames", "pid"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             unit.call("release", message_of(Tree{{"lease", "one"}}));
                           },
                           {"release request", "lease"}));
  const Frames released = unit.call("release", message_of(Tree{{"lease", 12345}}));
  EXPECT_FALSE(transport::storage_protocol::decode_release_reply(released));
}

TEST(LocalCopyService, AGetWithoutAnOpenSessionIsAnsweredWithTheBytes) {
  RemoteCluster cluster(1);
  auto client = cluster.client(std::chrono::seconds(20), /*local_copy=*/false);
  const BatchMeta meta = client->put_new("p", {wide_column("a", 96, 8192)}, {});
  zmq::context_t context(1);
  transport::Connection unit(context, cluster.unit(0).endpoint(), transport::ConnectionOptions{});
  transport::local_copy::SessionId made_up{};
  for (const Tree& asked : {Tree(true), Tree::numbers(std::span<const uint8_t>(made_up))}) {
    MsgpackMapWriter keys;
    std::vector<size_t> all(meta.size());
    std::iota(all.begin(), all.end(), size_t{0});
    transport::wire::add_sample_keys(keys, SampleKeys{meta.global_indexes, meta.partition_ids, meta.generations}, all);
    Tree request = tree_of(keys);
    request["fields"] = Tree::array({"a"});
    request["local_copy"] = asked;
    const Frames reply = unit.call("get", message_of(request));
    const Tree header = tree_of(reply[0]);
    // No description of the unit's memory, no lease: the bytes themselves.
    EXPECT_FALSE(header.contains("local_frames")) << (asked.is_binary() ? "a made-up session" : "no binary");
    EXPECT_FALSE(header.contains("lease"));
    EXPECT_EQ(transport::local_copy::data_bytes(reply, 1), size_t{96} * 8192 * sizeof(float));
  }
  EXPECT_EQ(local_copy_bytes(cluster, "get"), 0.0);
}

TEST(LocalCopyService, AUnitReadsOnlyTheProcessThatOpenedTheSession) {
  // The child opens a session and changes its copy of a buffer; this process
  // then puts naming that buffer's address and the child's session: the
  // unit copies the child's bytes, never this process's (nor its own).
  RemoteCluster cluster(1);
  zmq::context_t context(1);
  transport::Connection unit(context, cluster.unit(0).endpoint(), transport::ConnectionOptions{});
  const Frames reply = unit.call("local_copy_session", message_of(Tree::map()));
  const std::string address = transport::storage_protocol::decode_local_copy_session_reply(reply);
  Frames message(1);
  const std::string entries = transport::wire::append_columns({wide_column("a", 2, 100000)}, {}, message);
  auto* bytes = static_cast<std::byte*>(message[1].data());
  int ids[2];
  int done[2];
  ASSERT_EQ(pipe(ids), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::fill(bytes, bytes + message[1].size(), std::byte{0x5a});
    auto session = transport::local_copy::Session::open(address, std::chrono::seconds(5));
    const auto id = session ? session->id() : transport::local_copy::SessionId{};
    const auto key = session ? session->key() : SipKey{};
    const bool sent = write(ids[1], id.data(), id.size()) == static_cast<ssize_t>(id.size()) &&
                      write(ids[1], key.data(), key.size()) == static_cast<ssize_t>(key.size());
    char byte = 0;
    const bool waited = read(done[0], &byte, 1) == 1;  // keep the session open until the parent is done
    _exit(session && sent && waited ? 0 : 1);
  }
  transport::local_copy::SessionId child_session{};
  SipKey child_key{};
  ASSERT_EQ(read(ids[0], child_session.data(), child_session.size()), static_cast<ssize_t>(child_session.size()));
  ASSERT_EQ(read(ids[0], child_key.data(), child_key.size()), static_cast<ssize_t>(child_key.size()));
  std::fill(bytes, bytes + message[1].size(), std::byte{0x11});
  // Joined: a unit drops what it holds of another controller incarnation
  // before the controller lists it, which would drop this put's data too.
  cluster.client();
  const Frames put = unit.call("put", message_of(put_request(message, entries, child_session, child_key)));
  EXPECT_FALSE(transport::storage_protocol::decode_put_reply(put).local_copy_refused.has_value());
  ASSERT_EQ(write(done[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  for (const int fd : {ids[0], ids[1], done[0], done[1]}) close(fd);
  const std::vector<std::string> fields{"a"};
  const std::vector<int64_t> indexes{0, 1};
  const auto rows = cluster.unit(0).storage().get(samples_of(indexes), fields);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    const auto stored = row[0].bytes();
    EXPECT_TRUE(std::all_of(stored.begin(), stored.end(), [](std::byte b) { return b == std::byte{0x5a}; }));
  }
}

}  // namespace
}  // namespace seqflow::test
