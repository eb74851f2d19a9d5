#include "server/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "seqflow/error.h"

namespace seqflow::server {
namespace {

bool is_name(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

void check_metric_name(const std::string& name) {
  if (!is_name(name, true) || name.rfind("seqflow_", 0) != 0) {
    throw_invalid("metric name '" + name + "' must start with seqflow_ and hold only [a-zA-Z0-9_:]");
  }
}

// Sorted and rendered once at registration: `a="x",b="y"`.
std::string render_labels(const std::string& metric, MetricLabels labels, bool histogram) {
  std::sort(labels.begin(), labels.end());
  std::string out;
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto& [name, value] = labels[i];
    if (!is_name(name, false) || name.rfind("__", 0) == 0 || (histogram && name == "le")) {
      throw_invalid("metric '" + metric + "': label name '" + name + "' is not allowed");
    }
    if (i > 0 && labels[i - 1].first == name) {
      throw_invalid("metric '" + metric + "': label '" + name + "' is given twice");
    }
    if (!out.empty()) out += ',';
    out += name + "=\"" + escape_label_value(value) + '"';
  }
  return out;
}

std::string escape_help(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void append_sample(std::string& out, const std::string& name, const std::string& labels, double value) {
  out += name;
  if (!labels.empty()) out += '{' + labels + '}';
  out += ' ';
  out += format_metric_value(value);
  out += '\n';
}

const char* type_name(int type) {
  static const char* const kNames[] = {"counter", "gauge", "histogram"};
  return kNames[type];
}

}  // namespace

const std::vector<double>& latency_buckets_seconds() {
  static const std::vector<double> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                               0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
  return kBuckets;
}

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[32];
  // Whole numbers (counts, bytes) print without an exponent up to 2^53.
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
    std::snprintf(text, sizeof text, "%.0f", value);
  } else {
    std::snprintf(text, sizeof text, "%.17g", value);
  }
  return text;
}

void append_metric_family(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void append_metric_sample(std::string& out, const char* name, const std::string& labels, double value) {
  out += std::string(name) + (labels.empty() ? " " : "{" + labels + "} ") + format_metric_value(value) + "\n";
}

void Counter::increment(double amount) {
  if (!(amount >= 0)) throw_invalid("counter increment must be >= 0, got " + format_metric_value(amount));
  value_.fetch_add(amount, std::memory_order_relaxed);
}

void Counter::render(const std::string& name, const std::string& labels, std::string& out) const {
  append_sample(out, name, labels, value());
}

void Gauge::render(const std::string& name, const std::string& labels, std::string& out) const {
  append_sample(out, name, labels, value());
}

Histogram::Histogram(std::vector<double> upper_bounds) : upper_bounds_(std::move(upper_bounds)) {
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    if (!std::isfinite(upper_bounds_[i]) || (i > 0 && upper_bounds_[i] <= upper_bounds_[i - 1])) {
      throw_invalid("histogram bucket bound " + std::to_string(i) + " (" + format_metric_value(upper_bounds_[i]) +
                    ") must be finite and above the previous one");
    }
  }
  bucket_counts_.assign(upper_bounds_.size() + 1, 0);
}

void Histogram::observe(double value) {
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin());
  std::lock_guard lock(mutex_);
  ++bucket_counts_[bucket];
  sum_ += value;
  ++count_;
}

uint64_t Histogram::count() const {
  std::lock_guard lock(mutex_);
  return count_;
}

double Histogram::sum() const {
  std::lock_guard lock(mutex_);
  return sum_;
}

void Histogram::render(const std::string& name, const std::string& labels, std::string& out) const {
  std::lock_guard lock(mutex_);
  const std::string prefix = labels.empty() ? "" : labels + ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    cumulative += bucket_counts_[i];
    append_sample(out, name + "_bucket", prefix + "le=\"" + format_metric_value(upper_bounds_[i]) + '"',
                  static_cast<double>(cumulative));
  }
  append_sample(out, name + "_bucket", prefix + "le=\"+Inf\"", static_cast<double>(count_));
  append_sample(out, name + "_sum", labels, sum_);
  append_sample(out, name + "_count", labels, static_cast<double>(count_));
}

Metric& MetricsRegistry::series(const std::string& name, const std::string& help, const MetricLabels& labels, Type type,
                                const std::function<std::unique_ptr<Metric>()>& make) {
  check_metric_name(name);
  const std::string key = render_labels(name, labels, type == Type::kHistogram);
  auto fresh = make();  // validates (histogram bounds) before anything is registered
  std::lock_guard lock(mutex_);
  auto [family, inserted] = families_.try_emplace(name, Family{type, help, {}});
  if (!inserted && family->second.type != type) {
    throw_invalid("metric '" + name + "' is a " + type_name(static_cast<int>(family->second.type)) + ", not a " +
                  type_name(static_cast<int>(type)));
  }
  return *family->second.series.try_emplace(key, std::move(fresh)).first->second;
}

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help, const MetricLabels& labels) {
  return static_cast<Counter&>(series(name, help, labels, Type::kCounter, [] { return std::make_unique<Counter>(); }));
}

Gauge& MetricsRegistry::gauge(const std::string& name, const std::string& help, const MetricLabels& labels) {
  return static_cast<Gauge&>(series(name, help, labels, Type::kGauge, [] { return std::make_unique<Gauge>(); }));
}

Histogram& MetricsRegistry::histogram(const std::string& name, const std::string& help, const MetricLabels& labels,
                                      const std::vector<double>& upper_bounds) {
  return static_cast<Histogram&>(
      series(name, help, labels, Type::kHistogram, [&] { return std::make_unique<Histogram>(upper_bounds); }));
}

void MetricsRegistry::add_collector(std::function<void(std::string& out)> collector) {
  std::lock_guard lock(mutex_);
  collectors_.push_back(std::move(collector));
}

std::string MetricsRegistry::render() const {
  std::string out;
  std::vector<std::function<void(std::string&)>> collectors;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, family] : families_) {
      out += "# HELP " + name + ' ' + escape_help(family.help) + '\n';
      out += "# TYPE " + name + ' ' + type_name(static_cast<int>(family.type)) + '\n';
      for (const auto& [labels, metric] : family.series) metric->render(name, labels, out);
    }
    collectors = collectors_;
  }
  for (const auto& collect : collectors) collect(out);
  return out;
}

}  // namespace seqflow::server
