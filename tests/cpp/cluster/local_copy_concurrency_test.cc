// Same-host copies under threads: frame leases held and given back by many
// threads are never lost or shared, and clients on several threads put and
// get their own data through memory.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "local_copy_test_support.h"
#include "remote_cluster.h"
#include "storage_test_support.h"
#include "transport/frame_leases.h"
#include "transport/local_copy_session.h"

namespace seqflow::test {
namespace {

TEST(FrameLeasesConcurrency, ThreadsHoldingAndGivingBackNeverLoseOrShareALease) {
  transport::FrameLeases leases(std::chrono::seconds(60));
  constexpr int kThreads = 4, kRounds = 300;
  std::atomic<int> given_back{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<uint64_t> mine;
      for (int r = 0; r < kRounds; ++r) {
        mine.push_back(leases.hold(data_frames({64})));
        if (r % 2 == 1) {
          given_back += leases.release(mine.back()) ? 1 : 0;
          mine.pop_back();
        }
      }
      for (const uint64_t id : mine) given_back += leases.release(id) ? 1 : 0;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(given_back.load(), kThreads * kRounds);
  EXPECT_EQ(leases.held(), 0u);
}

// Reads what `fd` holds now, without waiting, adding its byte count to
// `total`; false once the peer has closed it (end of file).
bool still_open(int fd, ssize_t& total) {
  std::array<uint8_t, 128> bytes{};
  while (true) {
    const ssize_t got = ::recv(fd, bytes.data(), bytes.size(), MSG_DONTWAIT);
    if (got == 0) return false;
    if (got < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
    total += got;
  }
}

// Local processes that connect to a unit's session socket and then send
// nothing hold up no one: other clients open their sessions while the
// stalled handshakes wait out their timeout, which then closes them.
TEST(LocalCopySessionConcurrency, StalledHandshakesDelayNoOtherClient) {
  transport::local_copy::SessionListener listener;
  std::vector<int> stalled;
  for (int i = 0; i < 8; ++i) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path + 1, listener.address().data(), listener.address().size());
    const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + listener.address().size());
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&address), length), 0);
    stalled.push_back(fd);
  }
  std::vector<std::thread> clients;
  std::atomic<int> opened{0};
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      // 20 s, only the test's deadline: a client served after the stalled
      // ones would open too, once their handshakes were dropped.
      if (transport::local_copy::Session::open(listener.address(), std::chrono::seconds(20))) ++opened;
    });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(opened.load(), 4);
  // Every client opened before any stalled handshake reached its deadline
  // (SessionListener::kHandshakeTimeout): none waited behind them.
  std::vector<ssize_t> received(stalled.size(), 0);
  for (size_t s = 0; s < stalled.size(); ++s) {
    EXPECT_TRUE(still_open(stalled[s], received[s])) << "stalled handshake " << s << " ended before the clients opened";
  }
  // The stalled ones are closed at their deadline (end of file on our side).
  for (size_t s = 0; s < stalled.size(); ++s) {
    const int fd = stalled[s];
    pollfd item{fd, POLLIN, 0};
    EXPECT_EQ(::poll(&item, 1, 10000), 1);
    std::array<uint8_t, 128> hello{};
    ssize_t& total = received[s];
    for (ssize_t got = 1; got > 0;) {
      got = ::recv(fd, hello.data(), hello.size(), 0);
      if (got > 0) total += got;
    }
    EXPECT_EQ(total, 56) << "the unit's hello, then end of file";
    ::close(fd);
  }
  EXPECT_EQ(listener.open_sessions(), 0u);
}

TEST_P(LocalCopyCluster, ConcurrentClientsPutAndGetTheirOwnDataThroughMemory) {
  RemoteCluster cluster(GetParam());
  std::vector<std::thread> threads;
  std::atomic<int> rounds_ok{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      auto client = cluster.client();
      const std::string partition = "p" + std::to_string(t);
      for (int r = 0; r < 3; ++r) {
        const Column column = wide_column("a", 32 + t, 4096 + 1024 * r);  // each thread and round its own shape
        const BatchMeta meta = client->put_new(partition, {column}, {});
        const std::vector<std::string> fields{"a"};
        const auto rows = client->get_data(meta, fields);
        bool same = rows.size() == column.sample_count();
        for (size_t i = 0; same && i < rows.size(); ++i) {
          same = to_bytes(rows[i][0].bytes()) == to_bytes(column.sample(i).bytes());
        }
        rounds_ok += same ? 1 : 0;
        client->clear_partition(partition);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(rounds_ok.load(), 9);
  EXPECT_GT(local_copy_bytes(cluster, "get"), 0.0);
  for (size_t u = 0; u < cluster.unit_count(); ++u) {
    EXPECT_NE(cluster.unit(u).metrics().render().find("seqflow_storage_leases 0"), std::string::npos);
  }
}

}  // namespace
}  // namespace seqflow::test
