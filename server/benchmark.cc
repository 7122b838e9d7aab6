#include "server/benchmark.h"

#include <algorithm>
#include <chrono>

#include "common/status_macros.h"
#include "kernels/plan_executor.h"
#include "kernels/reference.h"

namespace convtune {
namespace {

Measurement MedianOf(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  Measurement m;
  m.repeats = static_cast<int>(n);
  if (n > 0) {
    m.median_ms =
        n % 2 == 1 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  }
  return m;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BenchmarkSession>> BenchmarkSession::Create(
    Device* device, const ConvProblem& p, int64_t workspace_bytes,
    uint64_t seed) {
  std::unique_ptr<BenchmarkSession> s(new BenchmarkSession(device, p));
  s->rng_.seed(seed);
  ASSIGN_OR_RETURN(s->x_, device->Allocate(p.x_bytes()));
  ASSIGN_OR_RETURN(s->w_, device->Allocate(p.w_bytes()));
  ASSIGN_OR_RETURN(s->y_, device->Allocate(p.y_bytes()));
  ASSIGN_OR_RETURN(s->workspace_, device->Allocate(workspace_bytes));
  s->host_x_.resize(p.x_bytes());
  s->host_w_.resize(p.w_bytes());
  s->host_y_.resize(p.y_bytes());
  // Inputs of the direction get random values; the output role is poisoned
  // before each checked run.
  const bool x_in = p.direction != Direction::kBackwardData;
  const bool w_in = p.direction != Direction::kBackwardWeights;
  const bool y_in = p.direction != Direction::kForward;
  if (x_in) FillRandom(s->host_x_.data(), p.type, p.x_elements(), s->rng_);
  if (w_in) FillRandom(s->host_w_.data(), p.type, p.w_elements(), s->rng_);
  if (y_in) FillRandom(s->host_y_.data(), p.type, p.y_elements(), s->rng_);
  RETURN_IF_ERROR(
      device->CopyToDevice(s->x_.get(), s->host_x_.data(), p.x_bytes()));
  RETURN_IF_ERROR(
      device->CopyToDevice(s->w_.get(), s->host_w_.data(), p.w_bytes()));
  RETURN_IF_ERROR(
      device->CopyToDevice(s->y_.get(), s->host_y_.data(), p.y_bytes()));
  return s;
}

DeviceBuffer* BenchmarkSession::output_buffer() {
  switch (problem_.output()) {
    case Tensor::kX:
      return x_.get();
    case Tensor::kW:
      return w_.get();
    case Tensor::kY:
      return y_.get();
  }
  return nullptr;
}

absl::Status BenchmarkSession::Run(const v1::ExecutionPlan& plan) {
  PlanBuffers b{x_->data(), w_->data(), y_->data(), workspace_->data(),
                workspace_->size()};
  return ExecutePlan(*device_, plan, b);
}

absl::StatusOr<Measurement> BenchmarkSession::Measure(
    const v1::ExecutionPlan& plan, const TimingOptions& options, double best_ms,
    bool cold_run_is_timing) {
  // Poisoned and read back on the device side: only the sampled elements
  // cross to the host, however large the output.
  const auto started = std::chrono::steady_clock::now();
  DeviceBuffer* out = output_buffer();
  const int element_bytes = static_cast<int>(ElementBytes(problem_.type));
  RETURN_IF_ERROR(device_->Fill(out, NaNBits(problem_.type), element_bytes,
                                problem_.output_elements()));
  ASSIGN_OR_RETURN(const double checked_run_ms,
                   device_->TimeMs([&] { return Run(plan); }));
  RETURN_IF_ERROR(device_->Synchronize());
  if (samples_.empty()) {
    HostTensors t{host_x_.data(), host_w_.data(), host_y_.data()};
    samples_ =
        SampleReference(problem_, t, std::max(1, options.verify_samples), rng_);
  }
  std::vector<double> values;
  values.reserve(samples_.size());
  for (const ReferenceSample& s : samples_) {
    uint32_t element = 0;
    RETURN_IF_ERROR(device_->CopyFromDeviceAt(
        &element, *out, s.index * element_bytes, element_bytes));
    values.push_back(LoadElement(&element, problem_.type, 0));
  }
  RETURN_IF_ERROR(CheckSamples(problem_, samples_, values));
  const double check_ms = std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - started)
                              .count();
  if (cold_run_is_timing && best_ms > 0 && options.slow_factor > 0 &&
      checked_run_ms > options.slow_factor * best_ms &&
      checked_run_ms >= options.first_run_trusted_ms) {
    return Measurement{checked_run_ms, 1, check_ms};
  }
  TimingOptions warm = options;
  warm.warmup_runs = 0;
  ASSIGN_OR_RETURN(Measurement m, TimeOnly(plan, warm, best_ms));
  m.check_ms = check_ms;
  return m;
}

absl::StatusOr<Measurement> BenchmarkSession::TimeOnly(
    const v1::ExecutionPlan& plan, const TimingOptions& options,
    double best_ms) {
  const double inf = std::numeric_limits<double>::infinity();
  const double cutoff_ms = best_ms > 0 && options.slow_factor > 0
                               ? best_ms * options.slow_factor
                               : inf;
  const double hopeless_ms = best_ms > 0 && options.hopeless_factor > 0
                                 ? best_ms * options.hopeless_factor
                                 : inf;
  double fastest = inf;
  for (int i = 0; i < options.warmup_runs; ++i) {
    ASSIGN_OR_RETURN(double ignored,
                     device_->TimeMs([&] { return Run(plan); }));
    (void)ignored;
  }
  std::vector<double> times;
  double spent = 0;
  int beyond_cutoff = 0;
  while (static_cast<int>(times.size()) < options.max_repeats &&
         (static_cast<int>(times.size()) < options.min_repeats ||
          spent < options.budget_ms)) {
    ASSIGN_OR_RETURN(double ms, device_->TimeMs([&] { return Run(plan); }));
    times.push_back(ms);
    spent += ms;
    fastest = std::min(fastest, ms);
    // Two runs beyond the cutoff end it: one alone may be a stall (a
    // library loading its kernels on first use) of a plan that is fast.
    if (ms > cutoff_ms && ++beyond_cutoff >= 2) break;
    if (static_cast<int>(times.size()) >= options.min_repeats &&
        fastest > hopeless_ms) {
      break;
    }
  }
  return MedianOf(std::move(times));
}

absl::StatusOr<std::vector<Measurement>> BenchmarkSession::TimeSideBySide(
    const std::vector<const v1::ExecutionPlan*>& plans,
    const TimingOptions& options) {
  std::vector<std::vector<double>> times(plans.size());
  double spent = 0;  // over all plans
  for (int round = 0;
       round < options.max_repeats &&
       (round < options.min_repeats ||
        spent < options.budget_ms * static_cast<double>(plans.size()));
       ++round) {
    for (size_t j = 0; j < plans.size(); ++j) {
      const size_t i = round % 2 == 0 ? j : plans.size() - 1 - j;
      ASSIGN_OR_RETURN(double ms,
                       device_->TimeMs([&] { return Run(*plans[i]); }));
      times[i].push_back(ms);
      spent += ms;
    }
  }
  std::vector<Measurement> out;
  out.reserve(plans.size());
  for (std::vector<double>& t : times) out.push_back(MedianOf(std::move(t)));
  return out;
}

}  // namespace convtune
