#include "server/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <exception>

#include "absl/strings/str_cat.h"

namespace convtune {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void AddSample(MetricFamily* f, double value,
               std::vector<ClientMetric::Label> labels = {}) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f->type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f->metric.push_back(std::move(m));
}

// Engine counters kept in milliseconds, exported in seconds.
bool IsMilliseconds(absl::string_view name) {
  return name.size() > 3 && name.substr(name.size() - 3) == "_ms";
}

}  // namespace

// Figures owned elsewhere, read at each scrape.
class Metrics::Scraped : public prometheus::Collectable {
 public:
  explicit Scraped(MetricsSources sources) : sources_(std::move(sources)) {}

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> out;
    if (sources_.counters) {
      for (const auto& [name, value] : NamedCounters(sources_.counters())) {
        const absl::string_view n(name);
        if (IsMilliseconds(n)) {
          MetricFamily f =
              Family(absl::StrCat("convtune_", n.substr(0, n.size() - 3),
                                  "_seconds_total"),
                     absl::StrCat("Find engine counter ", n, ", in seconds."),
                     MetricType::Counter);
          AddSample(&f, static_cast<double>(value) / 1000.0);
          out.push_back(std::move(f));
        } else {
          MetricFamily f = Family(absl::StrCat("convtune_", n, "_total"),
                                  absl::StrCat("Find engine counter ", n, "."),
                                  MetricType::Counter);
          AddSample(&f, static_cast<double>(value));
          out.push_back(std::move(f));
        }
      }
    }
    if (sources_.tunings_in_flight) {
      MetricFamily f =
          Family("convtune_tunings_in_flight",
                 "Tuning runs started and not finished.", MetricType::Gauge);
      AddSample(&f, static_cast<double>(sources_.tunings_in_flight()));
      out.push_back(std::move(f));
    }
    if (sources_.calls_in_flight) {
      MetricFamily f =
          Family("convtune_calls_in_flight",
                 "RPCs being served, health checks aside.", MetricType::Gauge);
      AddSample(&f, static_cast<double>(sources_.calls_in_flight()));
      out.push_back(std::move(f));
    }
    MetricFamily queued = Family(
        "convtune_queue_waiting",
        "Tasks waiting in a queue, by queue and priority.", MetricType::Gauge);
    for (const auto& [name, pool] : sources_.pools) {
      for (const auto& [priority, p] :
           {std::pair<const char*, ThreadPool::Priority>{
                "normal", ThreadPool::Priority::kNormal},
            {"low", ThreadPool::Priority::kLow}}) {
        AddSample(&queued, pool->queued(p),
                  {{"priority", priority}, {"queue", name}});
      }
    }
    out.push_back(std::move(queued));
    if (sources_.storage) {
      const storage::StoreHealth health = sources_.storage();
      MetricFamily writable = Family(
          "convtune_storage_writable",
          "1 while the database takes writes; 0 while finds answer but store "
          "nothing (a full disk, the free-space floor, a failed write).",
          MetricType::Gauge);
      AddSample(&writable, health.writable ? 1 : 0);
      out.push_back(std::move(writable));
      MetricFamily failed =
          Family("convtune_storage_failed_writes_total",
                 "Database writes refused or failed.", MetricType::Counter);
      AddSample(&failed, static_cast<double>(health.failed_writes));
      out.push_back(std::move(failed));
      MetricFamily recovered =
          Family("convtune_storage_recoveries_total",
                 "Times the database took writes again after stopping.",
                 MetricType::Counter);
      AddSample(&recovered, static_cast<double>(health.recoveries));
      out.push_back(std::move(recovered));
    }
    if (sources_.devices) {
      MetricFamily waiting = Family(
          "convtune_device_tunings_waiting",
          "Tuning runs queued or being timed, by device.", MetricType::Gauge);
      MetricFamily done =
          Family("convtune_device_tunings_total",
                 "Tuning runs timed, by device.", MetricType::Counter);
      MetricFamily busy = Family("convtune_device_busy_seconds_total",
                                 "Device time of the tuning runs, by device.",
                                 MetricType::Counter);
      for (const MetricsSources::DeviceFigures& d : sources_.devices()) {
        const std::vector<ClientMetric::Label> label = {
            {"device", absl::StrCat(d.ordinal)}};
        AddSample(&waiting, static_cast<double>(d.jobs_waiting), label);
        AddSample(&done, static_cast<double>(d.jobs_done), label);
        AddSample(&busy, d.busy_ms / 1000.0, label);
      }
      out.push_back(std::move(waiting));
      out.push_back(std::move(done));
      out.push_back(std::move(busy));
    }
    if (sources_.kernel_cache) {
      for (const auto& [name, value] : sources_.kernel_cache()) {
        const bool entries = name == "entries";
        MetricFamily f =
            Family(absl::StrCat("convtune_kernel_cache_", name,
                                entries ? "" : "_total"),
                   entries ? "Code objects in the kernel cache."
                           : absl::StrCat("Kernel cache lookups: ", name, "."),
                   entries ? MetricType::Gauge : MetricType::Counter);
        AddSample(&f, static_cast<double>(value));
        out.push_back(std::move(f));
      }
    }
    return out;
  }

 private:
  const MetricsSources sources_;
};

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(
    const std::string& address, MetricsSources sources) {
  std::unique_ptr<Metrics> m(new Metrics());
  m->registry_ = std::make_shared<prometheus::Registry>();
  m->rpcs_ = &prometheus::BuildCounter()
                  .Name("convtune_rpcs_total")
                  .Help("RPCs served, by method, status code and tenant.")
                  .Register(*m->registry_);
  m->latency_ = &prometheus::BuildHistogram()
                     .Name("convtune_rpc_seconds")
                     .Help("RPC latency, by method.")
                     .Register(*m->registry_);
  m->scraped_ = std::make_shared<Scraped>(std::move(sources));
  try {
    m->exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "metrics: cannot listen on ", address.substr(0, 64), ": ", e.what()));
  }
  m->exposer_->RegisterCollectable(m->registry_);
  m->exposer_->RegisterCollectable(m->scraped_);
  const std::vector<int> ports = m->exposer_->GetListeningPorts();
  m->port_ = ports.empty() ? 0 : ports[0];
  return m;
}

Metrics::~Metrics() {
  // The exposer's threads read the collectables: they stop first.
  exposer_.reset();
}

void Metrics::CountRpc(absl::string_view rpc, absl::string_view code,
                       absl::string_view tenant, double seconds) {
  rpcs_
      ->Add({{"rpc", std::string(rpc)},
             {"code", std::string(code)},
             {"tenant", std::string(tenant)}})
      .Increment();
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30};
  latency_->Add({{"rpc", std::string(rpc)}}, kBuckets).Observe(seconds);
}

}  // namespace convtune
