#include "server/heuristics/learned.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/keys.h"

namespace convtune {

namespace {

constexpr int kSchemaVersion = 2;
constexpr int kClassFeatures = kFeatureCount - kFirstBinaryFeature;
constexpr int kDimensionalityFeature = 30;
constexpr int kFirstStructureFeature = 31;

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
    "3-D",
    "dense",
    "grouped",
    "depthwise"};

float Log2(double v) {
  return static_cast<float>(std::log2(std::max(v, 1e-30)));
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int StructureIndex(const ConvProblem& p) {
  if (p.groups <= 1) return 0;
  return p.c_per_group() == 1 ? 2 : 1;
}

// REQUIRES: !v.empty().
float Median(std::vector<float> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// A neighbour's weight in the average: nearer counts more.
double NeighbourWeight(float squared_distance) {
  return 1.0 / (std::sqrt(squared_distance) + 0.05);
}

}  // namespace

absl::string_view FeatureName(int i) { return kFeatureNames[i]; }

absl::string_view GroupStructure(const ConvProblem& p) {
  return kFeatureNames[kFirstStructureFeature + StructureIndex(p)];
}

std::string ProblemClassName(const ConvProblem& p) {
  const bool nchw = p.layout == Layout::kNCHW;
  return absl::StrCat(
      DirectionName(p.direction), " ", DataTypeName(p.type), " ",
      p.is_3d() ? (nchw ? "NCDHW" : "NDHWC") : (nchw ? "NCHW" : "NHWC"), " ",
      GroupStructure(p));
}

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
  f[19] = Log2(p.macs());
  f[20] = Log2(bytes);
  f[21] = Log2(p.macs() / bytes);
  f[22 + static_cast<int>(p.direction) - 1] = 1;
  f[25 + static_cast<int>(p.type) - 1] = 1;
  f[28 + static_cast<int>(p.layout) - 1] = 1;
  f[kDimensionalityFeature] = p.is_3d() ? 1 : 0;
  f[kFirstStructureFeature + StructureIndex(p)] = 1;
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
      options_(options) {
  if (model_.feature_count() == kFeatureCount) {
    for (int i = 0; i < kFeatureCount; ++i) {
      mean_[i] = model_.feature_mean(i);
      scale_[i] = model_.feature_scale(i);
    }
  }
  for (const v1::HeuristicSolverModel& s : model_.solvers())
    solver_ids_.push_back(s.solver_id());
  BuildColumns();
}

void LearnedRanker::BuildColumns() {
  const size_t n = model_.record_count();
  columns_.assign(n * kFirstBinaryFeature, 0);
  category_.assign(n, 0);
  categories_.clear();
  by_category_.clear();
  if (model_.points_size() != static_cast<int64_t>(n) * kFeatureCount) return;
  for (size_t i = 0; i < n; ++i) {
    const float* row = model_.points().data() + i * kFeatureCount;
    for (int j = 0; j < kFirstBinaryFeature; ++j) columns_[j * n + i] = row[j];
    std::array<float, kClassFeatures> binary;
    // The class features are stored standardized; the category is their raw
    // 0/1 pattern.
    for (int j = 0; j < kClassFeatures; ++j) {
      const int f = kFirstBinaryFeature + j;
      binary[j] = std::round(row[f] * scale_[f] + mean_[f]);
    }
    auto it = std::find(categories_.begin(), categories_.end(), binary);
    if (it == categories_.end())
      it = categories_.insert(categories_.end(), binary);
    category_[i] = static_cast<uint16_t>(it - categories_.begin());
  }
  families_.clear();
  std::vector<int> family_of_category;
  for (const auto& c : categories_) {
    std::array<float, kClassFeaturesWithoutStructure> f;
    std::copy(c.begin(), c.begin() + kClassFeaturesWithoutStructure, f.begin());
    auto it = std::find(families_.begin(), families_.end(), f);
    if (it == families_.end()) it = families_.insert(families_.end(), f);
    family_of_category.push_back(static_cast<int>(it - families_.begin()));
  }
  family_median_.clear();
  median_.clear();
  for (const v1::HeuristicSolverModel& s : model_.solvers()) {
    auto& lists = by_category_.emplace_back(categories_.size());
    std::vector<std::vector<float>> residuals(families_.size());
    for (int i = 0; i < s.point_index_size(); ++i) {
      const int c = category_[s.point_index(i)];
      lists[c].push_back(i);
      residuals[family_of_category[c]].push_back(s.log2_residual(i));
    }
    std::vector<float>& medians = family_median_.emplace_back(
        families_.size(), std::numeric_limits<float>::quiet_NaN());
    for (size_t f = 0; f < families_.size(); ++f) {
      if (!residuals[f].empty()) medians[f] = Median(residuals[f]);
    }
    median_.push_back(
        s.log2_residual().empty()
            ? 0.0f
            : Median({s.log2_residual().begin(), s.log2_residual().end()}));
  }
}

absl::StatusOr<std::unique_ptr<LearnedRanker>> LearnedRanker::Train(
    const std::vector<TrainingSample>& samples, std::string device_key,
    const SolverRegistry& registry, const WtiEstimator& wti,
    const LearnedOptions& options) {
  if (samples.empty()) return absl::InvalidArgumentError("no training samples");
  v1::HeuristicModel m;
  m.set_schema_version(kSchemaVersion);
  m.set_device_key(std::move(device_key));
  m.set_kind("knn");
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
    for (const Features& f : raw) {
      sum += f[i];
      sq += static_cast<double>(f[i]) * f[i];
    }
    const double mean = sum / raw.size();
    const double sd = std::sqrt(std::max(0.0, sq / raw.size() - mean * mean));
    // The class features only select a category; they are kept unscaled so
    // that category is recovered exactly. A constant size feature carries
    // nothing; scale 1 keeps it at 0.
    const bool binary = i >= kFirstBinaryFeature;
    m.add_feature_mean(binary ? 0.0f : static_cast<float>(mean));
    m.add_feature_scale(binary || sd <= 1e-3 ? 1.0f : static_cast<float>(sd));
  }
  std::unique_ptr<LearnedRanker> r(
      new LearnedRanker(std::move(m), registry, wti, options));
  std::vector<Features> z;
  z.reserve(raw.size());
  for (const Features& f : raw) z.push_back(r->Standardize(f));
  r->StorePoints(samples, z);
  r->solver_ids_.clear();
  for (const v1::HeuristicSolverModel& s : r->model_.solvers())
    r->solver_ids_.push_back(s.solver_id());
  r->BuildColumns();
  r->model_.set_train_accuracy(static_cast<float>(r->Accuracy(samples)));
  return r;
}

void LearnedRanker::StorePoints(const std::vector<TrainingSample>& samples,
                                const std::vector<Features>& z) {
  for (const Features& f : z) {
    for (float v : f) model_.add_points(v);
  }
  // Per solver id: (point, residual, regret), in point order.
  struct Row {
    size_t point;
    float residual, regret;
  };
  std::vector<std::pair<uint32_t, std::vector<Row>>> rows;
  for (size_t i = 0; i < samples.size(); ++i) {
    double fastest = std::numeric_limits<double>::infinity();
    for (const auto& [id, ms] : samples[i].times) {
      if (registry_.Find(id) != nullptr) fastest = std::min(fastest, ms);
    }
    for (const auto& [id, ms] : samples[i].times) {
      const Solver* solver = registry_.Find(id);
      if (solver == nullptr) continue;  // a solver this build no longer has
      auto it = std::find_if(rows.begin(), rows.end(),
                             [&](const auto& e) { return e.first == id; });
      if (it == rows.end()) it = rows.insert(rows.end(), {id, {}});
      const double prior = wti_.EstimateMs(*solver, samples[i].problem);
      it->second.push_back({i, static_cast<float>(std::log2(ms / prior)),
                            static_cast<float>(std::log2(ms / fastest))});
    }
  }
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [id, points] : rows) {
    v1::HeuristicSolverModel* s = model_.add_solvers();
    s->set_solver_id(id);
    s->set_solver_name(std::string(registry_.Find(id)->name()));
    s->set_samples(static_cast<uint32_t>(points.size()));
    for (const Row& r : points) {
      s->add_point_index(static_cast<uint32_t>(r.point));
      s->add_log2_residual(r.residual);
      s->add_log2_regret(r.regret);
    }
  }
}

absl::StatusOr<std::unique_ptr<LearnedRanker>> LearnedRanker::FromProto(
    v1::HeuristicModel model, const SolverRegistry& registry,
    const WtiEstimator& wti, const LearnedOptions& options) {
  auto bad = [](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("heuristic model: ", what));
  };
  if (model.schema_version() != kSchemaVersion) {
    return bad("another schema version");
  }
  if (model.kind() != "knn") return bad("unknown kind");
  if (model.feature_count() != kFeatureCount ||
      model.feature_mean_size() != kFeatureCount ||
      model.feature_scale_size() != kFeatureCount) {
    return bad("feature count");
  }
  if (model.knn_k() == 0 ||
      model.points_size() !=
          static_cast<int64_t>(model.record_count()) * kFeatureCount) {
    return bad("points");
  }
  for (const v1::HeuristicSolverModel& s : model.solvers()) {
    if (s.point_index_size() != s.log2_residual_size() ||
        s.point_index_size() != s.log2_regret_size()) {
      return bad("residuals");
    }
    for (uint32_t i : s.point_index()) {
      if (i >= model.record_count()) return bad("point index");
    }
  }
  for (float v : model.feature_scale()) {
    if (!(v > 0)) return bad("feature scale");
  }
  LearnedOptions o = options;
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

int LearnedRanker::CategoryOf(const Features& f) const {
  std::array<float, kClassFeatures> binary;
  std::copy(f.begin() + kFirstBinaryFeature, f.end(), binary.begin());
  auto it = std::find(categories_.begin(), categories_.end(), binary);
  return it == categories_.end() ? -1
                                 : static_cast<int>(it - categories_.begin());
}

int LearnedRanker::FamilyOf(const Features& f) const {
  std::array<float, kClassFeaturesWithoutStructure> family;
  std::copy(f.begin() + kFirstBinaryFeature,
            f.begin() + kFirstBinaryFeature + kClassFeaturesWithoutStructure,
            family.begin());
  auto it = std::find(families_.begin(), families_.end(), family);
  return it == families_.end() ? -1 : static_cast<int>(it - families_.begin());
}

absl::Status LearnedRanker::IsApplicable(const ConvProblem& p) const {
  if (model_.record_count() < static_cast<uint32_t>(options_.min_records)) {
    return absl::FailedPreconditionError(
        absl::StrCat("heuristic: trained on ", model_.record_count(),
                     " records, needs at least ", options_.min_records));
  }
  if (CategoryOf(ProblemFeatures(p)) < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "heuristic: no training record of class ", ProblemClassName(p), " (",
        model_.record_count(), " records)"));
  }
  return absl::OkStatus();
}

std::vector<float> LearnedRanker::Distances(const Features& z,
                                            int category) const {
  const int n = static_cast<int>(model_.record_count());
  std::vector<float> d(n, 0.0f);
  float* out = d.data();
  for (int j = 0; j < kFirstBinaryFeature; ++j) {
    const float* col = columns_.data() + static_cast<size_t>(j) * n;
    const float zj = z[j];
    for (int i = 0; i < n; ++i) out[i] += (col[i] - zj) * (col[i] - zj);
  }
  for (int i = 0; i < n; ++i) {
    if (category_[i] != category) out[i] = std::numeric_limits<float>::max();
  }
  return d;
}

Estimate LearnedRanker::Predict(const Solver& solver, const ConvProblem& p,
                                int category, int family,
                                const std::vector<float>& dist) const {
  Estimate e{&solver, wti_.EstimateMs(solver, p), v1::ESTIMATED, 0};
  const int index = SolverIndex(solver.id());
  if (index < 0) return e;
  const v1::HeuristicSolverModel& s = model_.solvers(index);
  const std::vector<int32_t>* own =
      category >= 0 ? &by_category_[index][category] : nullptr;
  if (own == nullptr || own->empty()) {
    // Measured elsewhere on this device, never in this class: its rate on
    // the same direction, type and layout (else anywhere) is all that is
    // known.
    const float rate = family >= 0 ? family_median_[index][family]
                                   : std::numeric_limits<float>::quiet_NaN();
    e.time_ms *= std::exp2(std::isnan(rate) ? median_[index] : rate);
    return e;
  }
  // The solver's k nearest measured points of this class.
  const int k = std::min<int>(
      {static_cast<int>(model_.knn_k()), static_cast<int>(own->size()), 16});
  std::pair<float, int> best[16];
  int have = 0;
  for (int32_t i : *own) {
    const float d = dist[s.point_index(i)];
    if (have < k) {
      best[have++] = {d, i};
      std::push_heap(best, best + have);
    } else if (d < best[0].first) {
      std::pop_heap(best, best + have);
      best[have - 1] = {d, i};
      std::push_heap(best, best + have);
    }
  }
  std::sort(best, best + have);
  double wsum = 0, rsum = 0, rsq = 0, regret = 0;
  for (int h = 0; h < have; ++h) {
    const double w = NeighbourWeight(best[h].first);
    const double r = s.log2_residual(best[h].second);
    wsum += w;
    rsum += w * r;
    rsq += w * r * r;
    regret += w * s.log2_regret(best[h].second);
  }
  e.regret = static_cast<float>(regret / wsum);
  const double mean = rsum / wsum;
  const double spread = std::sqrt(std::max(0.0, rsq / wsum - mean * mean));
  e.time_ms *= std::exp2(mean);
  e.provenance = v1::LEARNED;
  // Support falls with the distance to the nearest measurement, and with
  // disagreement between the neighbours (in octaves of time).
  const double radius = options_.support_radius;
  const double near = std::exp(-0.5 * best[0].first / (radius * radius));
  const double fill = static_cast<double>(have) / std::max(1, k);
  e.confidence = static_cast<float>(near * fill / (1.0 + spread));
  return e;
}

std::vector<Estimate> LearnedRanker::Rank(
    const ConvProblem& p, const std::vector<const Solver*>& candidates) const {
  const Features f = ProblemFeatures(p);
  const int category = CategoryOf(f);
  const int family = FamilyOf(f);
  std::vector<float> dist;
  if (category >= 0) dist = Distances(Standardize(f), category);
  std::vector<Estimate> learned, estimated;
  learned.reserve(candidates.size());
  for (const Solver* s : candidates) {
    Estimate e = Predict(*s, p, category, family, dist);
    (e.provenance == v1::LEARNED ? learned : estimated).push_back(e);
  }
  auto by_time = [](const Estimate& a, const Estimate& b) {
    return a.time_ms < b.time_ms;
  };
  const double alpha = options_.regret_weight;
  const double beta = options_.doubt_weight;
  // Pessimistic: each octave of doubt (-log2 confidence) adds beta octaves.
  auto key = [alpha, beta](const Estimate& e) {
    const double doubt = -std::log2(std::max(1e-6f, e.confidence));
    return std::log2(e.time_ms) + alpha * e.regret + beta * doubt;
  };
  std::stable_sort(
      learned.begin(), learned.end(),
      [&key](const Estimate& a, const Estimate& b) { return key(a) < key(b); });
  std::stable_sort(estimated.begin(), estimated.end(), by_time);
  double floor_ms = 0;
  for (const Estimate& e : learned) floor_ms = std::max(floor_ms, e.time_ms);
  for (Estimate& e : estimated) {
    e.time_ms = std::max(e.time_ms, floor_ms);
    learned.push_back(e);
  }
  return learned;
}

double LearnedRanker::Accuracy(
    const std::vector<TrainingSample>& samples) const {
  if (samples.empty()) return 0;
  int64_t right = 0;
  for (const TrainingSample& s : samples) {
    std::vector<const Solver*> candidates;
    uint32_t measured_best = 0;
    double best_ms = 0;
    for (const auto& [id, ms] : s.times) {
      const Solver* solver = registry_.Find(id);
      if (solver == nullptr) continue;
      candidates.push_back(solver);
      if (candidates.size() == 1 || ms < best_ms)
        measured_best = id, best_ms = ms;
    }
    if (candidates.empty()) continue;
    right += Rank(s.problem, candidates)[0].solver->id() == measured_best;
  }
  return static_cast<double>(right) / samples.size();
}

}  // namespace convtune
