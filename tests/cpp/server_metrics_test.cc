#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/metrics.h"
#include "server/metrics_http.h"
#include "service_test_support.h"

namespace seqflow::server {
namespace {

using namespace seqflow::server::test;

// Every line is a # HELP, a # TYPE or a sample of the text exposition format.
::testing::AssertionResult is_prometheus_text(const std::string& text) {
  static const std::regex help(R"(# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*)");
  static const std::regex type(R"(# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram|summary|untyped))");
  static const std::regex sample(
      R"([a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")"
      R"((,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*\})? (NaN|[+-]Inf|-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?))");
  if (text.empty() || text.back() != '\n') return ::testing::AssertionFailure() << "must end with a newline";
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!std::regex_match(line, help) && !std::regex_match(line, type) && !std::regex_match(line, sample)) {
      return ::testing::AssertionFailure() << "bad line: " << line;
    }
  }
  return ::testing::AssertionSuccess();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(NetMetrics, RendersHelpTypeAndEscapedLabels) {
  MetricsRegistry registry;
  registry.counter("seqflow_things_total", "Things.\nSecond line \\ backslash", {{"kind", "a\"b\\c\nd"}}).increment(3);
  registry.gauge("seqflow_level", "A level.").set(-2.5);
  registry.counter("seqflow_things_total", "ignored", {{"kind", "plain"}}).increment();
  const std::string text = registry.render();
  EXPECT_TRUE(is_prometheus_text(text)) << text;
  EXPECT_TRUE(contains(text, "# HELP seqflow_things_total Things.\\nSecond line \\\\ backslash\n")) << text;
  EXPECT_TRUE(contains(text, "# TYPE seqflow_things_total counter\n"));
  EXPECT_TRUE(contains(text, "seqflow_things_total{kind=\"a\\\"b\\\\c\\nd\"} 3\n")) << text;
  EXPECT_TRUE(contains(text, "seqflow_things_total{kind=\"plain\"} 1\n"));
  EXPECT_TRUE(contains(text, "# TYPE seqflow_level gauge\nseqflow_level -2.5\n")) << text;
}

TEST(NetMetrics, HistogramBucketsAreCumulative) {
  MetricsRegistry registry;
  auto& histogram = registry.histogram("seqflow_wait_seconds", "Waits.", {{"op", "get"}}, {0.1, 1});
  for (double value : {0.05, 0.1, 0.5, 7.0}) histogram.observe(value);
  const std::string text = registry.render();
  EXPECT_TRUE(is_prometheus_text(text)) << text;
  EXPECT_TRUE(contains(text, "seqflow_wait_seconds_bucket{op=\"get\",le=\"0.10000000000000001\"} 2\n") ||
              contains(text, "seqflow_wait_seconds_bucket{op=\"get\",le=\"0.1\"} 2\n"))
      << text;
  EXPECT_TRUE(contains(text, "seqflow_wait_seconds_bucket{op=\"get\",le=\"1\"} 3\n")) << text;
  EXPECT_TRUE(contains(text, "seqflow_wait_seconds_bucket{op=\"get\",le=\"+Inf\"} 4\n"));
  EXPECT_TRUE(contains(text, "seqflow_wait_seconds_sum{op=\"get\"} 7.65"));
  EXPECT_TRUE(contains(text, "seqflow_wait_seconds_count{op=\"get\"} 4\n"));
  EXPECT_EQ(histogram.count(), 4u);
}

TEST(NetMetrics, CollectorsAppendAtScrapeTime) {
  MetricsRegistry registry;
  int partitions = 1;
  registry.add_collector([&](std::string& out) {
    out += "# HELP seqflow_partitions Partitions.\n# TYPE seqflow_partitions gauge\n";
    out += "seqflow_partitions{name=\"" + escape_label_value("tr\"ain") + "\"} " + format_metric_value(partitions) +
           "\n";
  });
  EXPECT_TRUE(contains(registry.render(), "seqflow_partitions{name=\"tr\\\"ain\"} 1\n"));
  partitions = 5;
  const std::string text = registry.render();
  EXPECT_TRUE(contains(text, "seqflow_partitions{name=\"tr\\\"ain\"} 5\n"));
  EXPECT_TRUE(is_prometheus_text(text)) << text;
}

TEST(NetMetrics, RejectsBadNamesLabelsAndTypeChanges) {
  MetricsRegistry registry;
  EXPECT_TRUE(throws_invalid([&] { registry.counter("requests_total", "x"); }, {"'requests_total'", "seqflow_"}));
  EXPECT_TRUE(throws_invalid([&] { registry.counter("seqflow_a-b", "x"); }, {"'seqflow_a-b'"}));
  EXPECT_TRUE(throws_invalid([&] { registry.counter("seqflow_c", "x", {{"bad-label", "v"}}); }, {"'bad-label'"}));
  EXPECT_TRUE(throws_invalid([&] { registry.histogram("seqflow_h", "x", {{"le", "1"}}); }, {"'le'"}));
  EXPECT_TRUE(throws_invalid([&] { registry.histogram("seqflow_h2", "x", {}, {1, 1}); }, {"bucket bound 1"}));
  registry.counter("seqflow_d", "x");
  EXPECT_TRUE(throws_invalid([&] { registry.gauge("seqflow_d", "x"); }, {"'seqflow_d'", "counter", "gauge"}));
  EXPECT_TRUE(throws_invalid([&] { registry.counter("seqflow_d", "x").increment(-1); }, {">= 0", "-1"}));
  EXPECT_TRUE(is_prometheus_text(registry.render()));
}

TEST(NetMetrics, ServiceCountsRequestsPerOp) {
  auto service = echo_service({}, [](Service& s) {
    s.handle("fail", [](Frames&) -> Frames { throw Error(ErrorCode::kNotFound, "key 'k' not found"); });
  });
  zmq::context_t context;
  Connection connection(context, service->endpoint(), timeout_of(5s));
  for (int i = 0; i < 3; ++i) connection.call("echo", {});
  EXPECT_THROW(connection.call("fail", {}), Error);
  EXPECT_THROW(connection.call("nope", {}), Error);
  connection.call("ping", {});
  const std::string text = service->metrics().render();
  EXPECT_TRUE(is_prometheus_text(text)) << text;
  EXPECT_TRUE(contains(text, "seqflow_requests_total{op=\"echo\"} 3\n")) << text;
  EXPECT_TRUE(contains(text, "seqflow_requests_total{op=\"fail\"} 1\n"));
  EXPECT_TRUE(contains(text, "seqflow_requests_total{op=\"ping\"} 1\n"));
  EXPECT_TRUE(contains(text, "seqflow_request_errors_total{op=\"fail\"} 1\n"));
  EXPECT_TRUE(contains(text, "seqflow_request_errors_total{op=\"echo\"} 0\n"));
  EXPECT_TRUE(contains(text, "seqflow_request_duration_seconds_count{op=\"echo\"} 3\n"));
  EXPECT_TRUE(contains(text, "seqflow_rejected_requests_total{reason=\"unknown_op\"} 1\n"));
  EXPECT_TRUE(contains(text, "seqflow_requests_in_flight 0\n"));
  EXPECT_TRUE(contains(text, "# TYPE seqflow_request_duration_seconds histogram\n"));
  EXPECT_TRUE(contains(text, "seqflow_dropped_messages_total 0\n"));
}

TEST(NetMetricsHttp, ServesMetricsAndHealthOnAFreeLoopbackPort) {
  MetricsRegistry registry;
  registry.counter("seqflow_scrapes_total", "Scrapes.").increment(7);
  MetricsHttpServer server("127.0.0.1", 0, [&] { return registry.render(); });
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
  EXPECT_EQ(metrics->status, 200);
  EXPECT_TRUE(contains(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4"));
  EXPECT_TRUE(contains(metrics->body, "seqflow_scrapes_total 7\n"));
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok");
  EXPECT_EQ(client.Get("/nothing")->status, 404);
  // Another server cannot take the same port; the error names it.
  EXPECT_TRUE(throws_invalid([&] { MetricsHttpServer("127.0.0.1", server.port(), [] { return ""; }); },
                             {"127.0.0.1", std::to_string(server.port())}));
  server.stop();
  server.stop();
}

TEST(NetMetricsConcurrency, CountersAndHistogramsFromManyThreads) {
  MetricsRegistry registry;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        registry.counter("seqflow_hits_total", "Hits.", {{"thread", std::to_string(t % 2)}}).increment();
        registry.histogram("seqflow_latency_seconds", "Latency.").observe(0.001 * (i % 10));
        if (i % 1000 == 0) (void)registry.render();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(registry.counter("seqflow_hits_total", "", {{"thread", "0"}}).value(), 10000);
  EXPECT_EQ(registry.histogram("seqflow_latency_seconds", "").count(), 20000u);
  EXPECT_TRUE(is_prometheus_text(registry.render()));
}

}  // namespace
}  // namespace seqflow::server
