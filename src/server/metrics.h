// Counters, gauges and histograms with labels, rendered in the Prometheus
// text exposition format (version 0.0.4) for a scrape of /metrics.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace seqflow::server {

// Label name -> value. Order does not matter: series are keyed by sorted labels.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Upper bounds, in seconds, of request latency buckets: 100 us .. 60 s.
const std::vector<double>& latency_buckets_seconds();

// One series: a metric name plus one set of label values.
class Metric {
 public:
  virtual ~Metric() = default;
  // Appends this series' sample lines; `labels` is rendered, e.g. op="get".
  virtual void render(const std::string& name, const std::string& labels, std::string& out) const = 0;
};

class Counter final : public Metric {
 public:
  void increment(double amount = 1);  // throws kInvalidArgument when amount < 0
  double value() const { return value_.load(std::memory_order_relaxed); }
  void render(const std::string& name, const std::string& labels, std::string& out) const override;

 private:
  std::atomic<double> value_{0};
};

class Gauge final : public Metric {
 public:
  void set(double value) { value_.store(value, std::memory_order_relaxed); }
  void add(double amount) { value_.fetch_add(amount, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }
  void render(const std::string& name, const std::string& labels, std::string& out) const override;

 private:
  std::atomic<double> value_{0};
};

class Histogram final : public Metric {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // strictly increasing, finite
  void observe(double value);
  uint64_t count() const;
  double sum() const;
  void render(const std::string& name, const std::string& labels, std::string& out) const override;

 private:
  // A mutex, not atomics: a scrape must see buckets, sum and count that agree.
  mutable std::mutex mutex_;
  std::vector<double> upper_bounds_;
  std::vector<uint64_t> bucket_counts_;  // not cumulative; one more than bounds: +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Thread-safe. The returned references stay valid as long as the registry;
// asking again for the same name and labels returns the same series. Names
// must start with "seqflow_"; a name keeps the type it was first given
// (kInvalidArgument otherwise).
class MetricsRegistry {
 public:
  Counter& counter(const std::string& name, const std::string& help, const MetricLabels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const MetricLabels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const MetricLabels& labels = {},
                       const std::vector<double>& upper_bounds = latency_buckets_seconds());

  // Called at every render(), after the registry's own series, to append
  // complete metric families (# HELP, # TYPE and samples) computed at scrape
  // time. Collectors run without the registry's lock held.
  void add_collector(std::function<void(std::string& out)> collector);

  std::string render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    Type type;
    std::string help;
    std::map<std::string, std::unique_ptr<Metric>> series;  // by rendered labels
  };
  Metric& series(const std::string& name, const std::string& help, const MetricLabels& labels, Type type,
                 const std::function<std::unique_ptr<Metric>()>& make);

  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
  std::vector<std::function<void(std::string&)>> collectors_;
};

// Prometheus text helpers, for collectors that render their own lines.
std::string escape_label_value(const std::string& value);
std::string format_metric_value(double value);
// "# HELP name help" and "# TYPE name type" lines.
void append_metric_family(std::string& out, const char* name, const char* type, const char* help);
// "name{labels} value" (labels rendered, e.g. task="actor"; empty: none).
void append_metric_sample(std::string& out, const char* name, const std::string& labels, double value);

}  // namespace seqflow::server
