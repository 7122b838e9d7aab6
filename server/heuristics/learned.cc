#include "server/heuristics/learned.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "storage/keys.h"

namespace convtune {

namespace {

constexpr int kLog2MacsFeature = 19;
constexpr int kDimensionalityFeature = kFeatureCount - 1;

constexpr absl::string_view kFeatureNames[kFeatureCount] = {
    "log2_n",
    "log2_c",
    "log2_k",
    "log2_in_d",
    "log2_in_h",
    "log2_in_w",
    "log2_out_dhw",
    "log2_filter_d",
    "log2_filter_h",
    "log2_filter_w",
    "log2_stride_h",
    "log2_stride_w",
    "log2_pad_h+1",
    "log2_pad_w+1",
    "log2_dilation_h",
    "log2_dilation_w",
    "log2_groups",
    "log2_c_per_group",
    "log2_k_per_group",
    "log2_macs",
    "log2_bytes",
    "log2_macs_per_byte",
    "direction F",
    "direction B",
    "direction W",
    "type FP32",
    "type FP16",
    "type BF16",
    "layout NCHW",
    "layout NHWC",
    "3-D"};

float Log2(double v) {
  return static_cast<float>(std::log2(std::max(v, 1e-30)));
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Solves the symmetric positive-definite system a x = b in place (b becomes
// x). False if a is not positive definite.
bool CholeskySolve(std::vector<double>& a, std::vector<double>& b, int n) {
  for (int j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (int k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (d <= 0) return false;
    d = std::sqrt(d);
    a[j * n + j] = d;
    for (int i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (int k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / d;
    }
  }
  for (int i = 0; i < n; ++i) {
    double s = b[i];
    for (int k = 0; k < i; ++k) s -= a[i * n + k] * b[k];
    b[i] = s / a[i * n + i];
  }
  for (int i = n - 1; i >= 0; --i) {
    double s = b[i];
    for (int k = i + 1; k < n; ++k) s -= a[k * n + i] * b[k];
    b[i] = s / a[i * n + i];
  }
  return true;
}

}  // namespace

absl::string_view ModelKindName(ModelKind kind) {
  return kind == ModelKind::kRidge ? "ridge" : "knn";
}

absl::string_view FeatureName(int i) { return kFeatureNames[i]; }

Features ProblemFeatures(const ConvProblem& p) {
  const double bytes =
      static_cast<double>(p.x_bytes() + p.w_bytes() + p.y_bytes());
  Features f{};
  f[0] = Log2(p.n);
  f[1] = Log2(p.c);
  f[2] = Log2(p.k);
  f[3] = Log2(p.in[0]);
  f[4] = Log2(p.in[1]);
  f[5] = Log2(p.in[2]);
  f[6] = Log2(p.out_spatial());
  f[7] = Log2(p.filter[0]);
  f[8] = Log2(p.filter[1]);
  f[9] = Log2(p.filter[2]);
  f[10] = Log2(p.stride[1]);
  f[11] = Log2(p.stride[2]);
  f[12] = Log2(p.pad[1] + 1);
  f[13] = Log2(p.pad[2] + 1);
  f[14] = Log2(p.dilation[1]);
  f[15] = Log2(p.dilation[2]);
  f[16] = Log2(p.groups);
  f[17] = Log2(p.c_per_group());
  f[18] = Log2(p.k_per_group());
  f[kLog2MacsFeature] = Log2(p.macs());
  f[20] = Log2(bytes);
  f[21] = Log2(p.macs() / bytes);
  f[22 + static_cast<int>(p.direction) - 1] = 1;
  f[25 + static_cast<int>(p.type) - 1] = 1;
  f[28 + static_cast<int>(p.layout) - 1] = 1;
  f[kDimensionalityFeature] = p.is_3d() ? 1 : 0;
  return f;
}

absl::StatusOr<TrainingSample> SampleFromRecord(const v1::FindRecord& record) {
  if (storage::IsWorkspaceLimited(record)) {
    return absl::InvalidArgumentError(
        absl::StrCat(record.problem_key(), ": tuned under a workspace limit"));
  }
  TrainingSample s;
  ASSIGN_OR_RETURN(s.problem, ParseProblemKey(record.problem_key()));
  for (const v1::PerfResult& r : record.results()) {
    if (r.measured() && std::isfinite(r.time_ms()) && r.time_ms() > 0) {
      s.times.emplace_back(r.solver_id(), r.time_ms());
    }
  }
  if (s.times.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(record.problem_key(), ": nothing measured"));
  }
  return s;
}

LearnedRanker::LearnedRanker(v1::HeuristicModel model,
                             const SolverRegistry& registry,
                             const WtiEstimator& wti,
                             const LearnedOptions& options)
    : model_(std::move(model)),
      registry_(registry),
      wti_(wti),
      options_(options),
      kind_(model_.kind() == "knn" ? ModelKind::kKnn : ModelKind::kRidge) {
  if (model_.feature_count() == kFeatureCount) {
    for (int i = 0; i < kFeatureCount; ++i) {
      mean_[i] = model_.feature_mean(i);
      scale_[i] = model_.feature_scale(i);
      min_[i] = model_.feature_min(i);
      max_[i] = model_.feature_max(i);
    }
  }
  for (const v1::HeuristicSolverModel& s : model_.solvers())
    solver_ids_.push_back(s.solver_id());
  BuildColumns();
}

void LearnedRanker::BuildColumns() {
  const size_t n = model_.record_count();
  columns_.clear();
  category_.clear();
  categories_.clear();
  slot_.clear();
  if (kind_ != ModelKind::kKnn ||
      model_.points_size() != static_cast<int64_t>(n) * kFeatureCount) {
    return;
  }
  columns_.resize(n * kFirstBinaryFeature);
  category_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float* row = model_.points().data() + i * kFeatureCount;
    for (int j = 0; j < kFirstBinaryFeature; ++j) columns_[j * n + i] = row[j];
    std::array<float, kFeatureCount - kFirstBinaryFeature> binary;
    std::copy(row + kFirstBinaryFeature, row + kFeatureCount, binary.begin());
    auto it = std::find(categories_.begin(), categories_.end(), binary);
    if (it == categories_.end())
      it = categories_.insert(categories_.end(), binary);
    category_[i] = static_cast<uint16_t>(it - categories_.begin());
  }
  for (const v1::HeuristicSolverModel& s : model_.solvers()) {
    std::vector<int32_t>& slot = slot_.emplace_back(n, -1);
    for (int i = 0; i < s.point_index_size(); ++i) slot[s.point_index(i)] = i;
  }
}

absl::StatusOr<std::unique_ptr<LearnedRanker>> LearnedRanker::Train(
    const std::vector<TrainingSample>& samples, std::string device_key,
    const SolverRegistry& registry, const WtiEstimator& wti,
    const LearnedOptions& options) {
  if (samples.empty()) return absl::InvalidArgumentError("no training samples");
  v1::HeuristicModel m;
  m.set_schema_version(1);
  m.set_device_key(std::move(device_key));
  m.set_kind(std::string(ModelKindName(options.kind)));
  m.set_trained_unix_ms(NowMs());
  m.set_record_count(static_cast<uint32_t>(samples.size()));
  m.set_feature_count(kFeatureCount);
  m.set_knn_k(static_cast<uint32_t>(std::max(1, options.knn_k)));
  std::vector<Features> raw;
  raw.reserve(samples.size());
  for (const TrainingSample& s : samples)
    raw.push_back(ProblemFeatures(s.problem));
  for (int i = 0; i < kFeatureCount; ++i) {
    double sum = 0, sq = 0;
    float lo = raw[0][i], hi = raw[0][i];
    for (const Features& f : raw) {
      sum += f[i];
      sq += static_cast<double>(f[i]) * f[i];
      lo = std::min(lo, f[i]);
      hi = std::max(hi, f[i]);
    }
    const double mean = sum / raw.size();
    const double sd = std::sqrt(std::max(0.0, sq / raw.size() - mean * mean));
    m.add_feature_mean(static_cast<float>(mean));
    // A constant feature carries nothing; scale 1 keeps it at 0 in training.
    m.add_feature_scale(static_cast<float>(sd > 1e-3 ? sd : 1.0));
    m.add_feature_min(lo);
    m.add_feature_max(hi);
  }
  std::unique_ptr<LearnedRanker> r(
      new LearnedRanker(std::move(m), registry, wti, options));
  std::vector<Features> z;
  z.reserve(raw.size());
  for (const Features& f : raw) z.push_back(r->Standardize(f));
  if (options.kind == ModelKind::kRidge) {
    r->FitRidge(samples, z);
  } else {
    r->StoreKnn(samples, z);
    r->BuildColumns();
  }
  r->solver_ids_.clear();
  for (const v1::HeuristicSolverModel& s : r->model_.solvers()) {
    r->solver_ids_.push_back(s.solver_id());
  }
  r->model_.set_train_accuracy(static_cast<float>(r->Accuracy(samples)));
  return r;
}

namespace {

// Training rows per solver id, in first-seen order.
std::vector<std::pair<uint32_t, std::vector<std::pair<size_t, double>>>>
RowsBySolver(const std::vector<TrainingSample>& samples) {
  std::vector<std::pair<uint32_t, std::vector<std::pair<size_t, double>>>> out;
  for (size_t i = 0; i < samples.size(); ++i) {
    for (const auto& [id, ms] : samples[i].times) {
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const auto& e) { return e.first == id; });
      if (it == out.end()) it = out.insert(out.end(), {id, {}});
      it->second.emplace_back(i, std::log2(ms));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

void NameSolver(const SolverRegistry& registry, uint32_t id,
                v1::HeuristicSolverModel* s) {
  s->set_solver_id(id);
  if (const Solver* solver = registry.Find(id))
    s->set_solver_name(std::string(solver->name()));
}

}  // namespace

void LearnedRanker::FitRidge(const std::vector<TrainingSample>& samples,
                             const std::vector<Features>& z) {
  constexpr int kDim = kFeatureCount + 1;
  for (const auto& [id, rows] : RowsBySolver(samples)) {
    std::vector<double> a(kDim * kDim, 0.0), b(kDim, 0.0);
    double row[kDim];
    for (const auto& [i, log_ms] : rows) {
      row[0] = 1;
      for (int j = 0; j < kFeatureCount; ++j) row[j + 1] = z[i][j];
      for (int p = 0; p < kDim; ++p) {
        b[p] += row[p] * log_ms;
        for (int q = 0; q < kDim; ++q) a[p * kDim + q] += row[p] * row[q];
      }
    }
    for (int p = 1; p < kDim; ++p) a[p * kDim + p] += options_.ridge_lambda;
    // The tiny bias penalty keeps the system definite with a single row.
    a[0] += 1e-9;
    if (!CholeskySolve(a, b, kDim)) continue;
    v1::HeuristicSolverModel* s = model_.add_solvers();
    NameSolver(registry_, id, s);
    s->set_samples(static_cast<uint32_t>(rows.size()));
    for (double w : b) s->add_weights(static_cast<float>(w));
  }
}

void LearnedRanker::StoreKnn(const std::vector<TrainingSample>& samples,
                             const std::vector<Features>& z) {
  for (const Features& f : z) {
    for (float v : f) model_.add_points(v);
  }
  for (const auto& [id, rows] : RowsBySolver(samples)) {
    v1::HeuristicSolverModel* s = model_.add_solvers();
    NameSolver(registry_, id, s);
    s->set_samples(static_cast<uint32_t>(rows.size()));
    for (const auto& [i, log_ms] : rows) {
      s->add_point_index(static_cast<uint32_t>(i));
      s->add_log2_time_ms(static_cast<float>(log_ms));
    }
  }
}

absl::StatusOr<std::unique_ptr<LearnedRanker>> LearnedRanker::FromProto(
    v1::HeuristicModel model, const SolverRegistry& registry,
    const WtiEstimator& wti, const LearnedOptions& options) {
  auto bad = [](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("heuristic model: ", what));
  };
  if (model.schema_version() != 1) return bad("unknown schema version");
  if (model.kind() != "ridge" && model.kind() != "knn")
    return bad("unknown kind");
  if (model.feature_count() != kFeatureCount ||
      model.feature_mean_size() != kFeatureCount ||
      model.feature_scale_size() != kFeatureCount ||
      model.feature_min_size() != kFeatureCount ||
      model.feature_max_size() != kFeatureCount) {
    return bad("feature count");
  }
  const bool knn = model.kind() == "knn";
  if (knn && (model.knn_k() == 0 ||
              model.points_size() !=
                  static_cast<int64_t>(model.record_count()) * kFeatureCount)) {
    return bad("kNN points");
  }
  for (const v1::HeuristicSolverModel& s : model.solvers()) {
    if (!knn && s.weights_size() != kFeatureCount + 1)
      return bad("ridge weights");
    if (knn && s.point_index_size() != s.log2_time_ms_size())
      return bad("kNN times");
    for (uint32_t i : s.point_index()) {
      if (i >= model.record_count()) return bad("kNN point index");
    }
  }
  for (float v : model.feature_scale()) {
    if (!(v > 0)) return bad("feature scale");
  }
  ModelKind kind = knn ? ModelKind::kKnn : ModelKind::kRidge;
  LearnedOptions o = options;
  o.kind = kind;
  o.knn_k = static_cast<int>(model.knn_k());
  return std::unique_ptr<LearnedRanker>(
      new LearnedRanker(std::move(model), registry, wti, o));
}

Features LearnedRanker::Standardize(const Features& f) const {
  Features z;
  for (int i = 0; i < kFeatureCount; ++i) z[i] = (f[i] - mean_[i]) / scale_[i];
  return z;
}

int LearnedRanker::SolverIndex(uint32_t id) const {
  for (size_t i = 0; i < solver_ids_.size(); ++i) {
    if (solver_ids_[i] == id) return static_cast<int>(i);
  }
  return -1;
}

absl::Status LearnedRanker::IsApplicable(const ConvProblem& p) const {
  if (model_.record_count() < static_cast<uint32_t>(options_.min_records)) {
    return absl::FailedPreconditionError(
        absl::StrCat("heuristic: trained on ", model_.record_count(),
                     " records, needs at least ", options_.min_records));
  }
  const Features f = ProblemFeatures(p);
  for (int i = kFirstBinaryFeature; i < kFeatureCount; ++i) {
    // One-hot: the problem's category must have been seen. The 3-D flag is
    // checked both ways.
    const bool unseen =
        f[i] == 1 ? max_[i] < 1 : (i == kDimensionalityFeature && min_[i] > 0);
    if (unseen) {
      return absl::FailedPreconditionError(absl::StrCat(
          "heuristic: ",
          i == kDimensionalityFeature ? (p.is_3d() ? "3-D" : "2-D")
                                      : FeatureName(i),
          " never seen in training (", model_.record_count(), " records)"));
    }
  }
  const float margin = static_cast<float>(options_.range_margin_log2);
  for (int i = 0; i < kFirstBinaryFeature; ++i) {
    if (f[i] < min_[i] - margin || f[i] > max_[i] + margin) {
      return absl::FailedPreconditionError(
          absl::StrFormat("heuristic: %s = %.2f lies outside the trained range "
                          "[%.2f, %.2f] by more than %.1f",
                          FeatureName(i), f[i], min_[i], max_[i], margin));
    }
  }
  return absl::OkStatus();
}

namespace {

// Points examined in distance order before a solver's neighbours are
// searched among all of its points.
constexpr int kNearestPoints = 64;

}  // namespace

LearnedRanker::Neighbourhood LearnedRanker::Neighbours(
    const Features& z) const {
  Neighbourhood hood;
  if (kind_ != ModelKind::kKnn) return hood;
  const int n = static_cast<int>(model_.record_count());
  // The binary features take one value per category: their part of the
  // distance is computed once per category.
  std::vector<float> penalty(categories_.size());
  for (size_t c = 0; c < categories_.size(); ++c) {
    float sum = 0;
    for (int j = kFirstBinaryFeature; j < kFeatureCount; ++j) {
      const float d = categories_[c][j - kFirstBinaryFeature] - z[j];
      sum += d * d;
    }
    penalty[c] = sum;
  }
  hood.dist.resize(n);
  float* d = hood.dist.data();
  for (int i = 0; i < n; ++i) d[i] = penalty[category_[i]];
  for (int j = 0; j < kFirstBinaryFeature; ++j) {
    const float* col = columns_.data() + static_cast<size_t>(j) * n;
    const float zj = z[j];
    for (int i = 0; i < n; ++i) d[i] += (col[i] - zj) * (col[i] - zj);
  }
  // The nearest points, through a max-heap whose top is the farthest kept.
  std::vector<std::pair<float, int>> heap;
  const int keep = std::min(n, kNearestPoints);
  heap.reserve(keep);
  for (int i = 0; i < n; ++i) {
    if (static_cast<int>(heap.size()) < keep) {
      heap.emplace_back(d[i], i);
      std::push_heap(heap.begin(), heap.end());
    } else if (d[i] < heap.front().first) {
      std::pop_heap(heap.begin(), heap.end());
      heap.back() = {d[i], i};
      std::push_heap(heap.begin(), heap.end());
    }
  }
  std::sort_heap(heap.begin(), heap.end());
  hood.nearest.reserve(heap.size());
  for (const auto& [dist, i] : heap) hood.nearest.push_back(i);
  return hood;
}

double LearnedRanker::PredictLog2(int index, const Features& f,
                                  const Features& z,
                                  const Neighbourhood& hood) const {
  const v1::HeuristicSolverModel& s = model_.solvers(index);
  if (kind_ == ModelKind::kRidge) {
    double y = s.weights(0);
    for (int j = 0; j < kFeatureCount; ++j) y += s.weights(j + 1) * z[j];
    return y;
  }
  // The k nearest points where this solver was measured; each neighbour's
  // time is scaled by the ratio of multiply-accumulates, then averaged by
  // inverse distance. Usually all k lie among the nearest points overall;
  // otherwise every point of the solver is searched.
  const int m = s.point_index_size();
  const int k = std::min({static_cast<int>(model_.knn_k()), m, 16});
  std::pair<float, int> best[16];
  int have = 0;
  const std::vector<int32_t>& slot = slot_[index];
  for (int point : hood.nearest) {
    if (have == k) break;
    if (slot[point] >= 0) best[have++] = {hood.dist[point], slot[point]};
  }
  if (have < k) {
    have = 0;
    for (int i = 0; i < m; ++i) {
      const float d = hood.dist[s.point_index(i)];
      if (have < k) {
        best[have++] = {d, i};
        std::push_heap(best, best + have);
      } else if (d < best[0].first) {
        std::pop_heap(best, best + have);
        best[have - 1] = {d, i};
        std::push_heap(best, best + have);
      }
    }
  }
  double wsum = 0, ysum = 0;
  for (int h = 0; h < have; ++h) {
    const int i = best[h].second;
    const float* row =
        model_.points().data() + size_t{s.point_index(i)} * kFeatureCount;
    const float macs_i = row[kLog2MacsFeature] * scale_[kLog2MacsFeature] +
                         mean_[kLog2MacsFeature];
    const double w = 1.0 / (std::sqrt(best[h].first) + 0.05);
    wsum += w;
    ysum += w * (s.log2_time_ms(i) + (f[kLog2MacsFeature] - macs_i));
  }
  return ysum / wsum;
}

std::vector<Estimate> LearnedRanker::Rank(
    const ConvProblem& p, const std::vector<const Solver*>& candidates) const {
  const Features f = ProblemFeatures(p);
  const Features z = Standardize(f);
  const Neighbourhood hood = Neighbours(z);
  std::vector<Estimate> known, unknown;
  known.reserve(candidates.size());
  for (const Solver* s : candidates) {
    const int index = SolverIndex(s->id());
    if (index < 0) {
      unknown.push_back({s, wti_.EstimateMs(*s, p)});
    } else {
      known.push_back({s, std::exp2(PredictLog2(index, f, z, hood))});
    }
  }
  auto by_time = [](const Estimate& a, const Estimate& b) {
    return a.time_ms < b.time_ms;
  };
  std::stable_sort(known.begin(), known.end(), by_time);
  std::stable_sort(unknown.begin(), unknown.end(), by_time);
  const double floor_ms = known.empty() ? 0 : known.back().time_ms;
  for (Estimate& e : unknown) {
    e.time_ms = std::max(e.time_ms, floor_ms);
    known.push_back(e);
  }
  return known;
}

double LearnedRanker::Accuracy(
    const std::vector<TrainingSample>& samples) const {
  if (samples.empty()) return 0;
  int64_t right = 0;
  for (const TrainingSample& s : samples) {
    const Features f = ProblemFeatures(s.problem);
    const Features z = Standardize(f);
    const Neighbourhood hood = Neighbours(z);
    uint32_t measured_best = 0, predicted_best = 0;
    double best_ms = 0, best_pred = 0;
    bool first = true, any_pred = false;
    for (const auto& [id, ms] : s.times) {
      if (first || ms < best_ms) measured_best = id, best_ms = ms;
      first = false;
      const int index = SolverIndex(id);
      if (index < 0) continue;
      const double pred = PredictLog2(index, f, z, hood);
      if (!any_pred || pred < best_pred) predicted_best = id, best_pred = pred;
      any_pred = true;
    }
    right += any_pred && predicted_best == measured_best;
  }
  return static_cast<double>(right) / samples.size();
}

}  // namespace convtune
