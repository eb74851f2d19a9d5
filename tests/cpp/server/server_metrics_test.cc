#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <vector>

#include "server/metrics.h"
#include "server/metrics_http.h"
#include "service_test_support.h"

namespace seqflow::server {
namespace {

using namespace seqflow::server::test;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Metrics, RendersHelpTypeAndEscapedLabels) {
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

TEST(Metrics, HistogramBucketsAreCumulative) {
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

TEST(Metrics, CollectorsAppendAtScrapeTime) {
  MetricsRegistry registry;
  int partitions = 1;
  registry.add_collector([&](std::string& out) {
    out += "# HELP seqflow_partitions Partitions.\n# TYPE seqflow_partitions gauge\n";
    out +=
        "seqflow_partitions{name=\"" + escape_label_value("tr\"ain") + "\"} " + format_metric_value(partitions) + "\n";
  });
  EXPECT_TRUE(contains(registry.render(), "seqflow_partitions{name=\"tr\\\"ain\"} 1\n"));
  partitions = 5;
  const std::string text = registry.render();
  EXPECT_TRUE(contains(text, "seqflow_partitions{name=\"tr\\\"ain\"} 5\n"));
  EXPECT_TRUE(is_prometheus_text(text)) << text;
}

TEST(Metrics, RejectsBadNamesLabelsAndTypeChanges) {
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

TEST(Metrics, ServiceCountsRequestsPerOp) {
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

TEST(MetricsHttp, ServesMetricsAndHealthOnAFreeLoopbackPort) {
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

}  // namespace
}  // namespace seqflow::server
