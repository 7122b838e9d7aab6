// The learned immediate-mode model of one device: predicts each solver's time
// for a problem from the device's own FindDb records, so a FindDb miss is
// answered without timing.
//
// Problems fall into classes: direction, data type, layout, dimensionality
// and group structure (dense, grouped, depthwise). Within a class, a solver's
// time is its weighted-throughput estimate (wti.h) corrected by the residuals
// of the solver's nearest measured problems of that class: the efficiency the
// device really reached there. A solver with no measurement in the problem's
// class is not extrapolated from that class's neighbours; it is estimated,
// with the solver's median residual over the problems of the same direction,
// type and layout (else over all) as its only measured input, and ranks
// behind every solver with measured support. Each estimate carries a
// confidence. Immutable once built; thread-safe.
#ifndef CONVTUNE_SERVER_HEURISTICS_LEARNED_H_
#define CONVTUNE_SERVER_HEURISTICS_LEARNED_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "convtune/v1/records.pb.h"
#include "server/heuristics/ranker.h"
#include "server/heuristics/wti.h"
#include "server/solver_registry.h"

namespace convtune {

// The model's inputs: logs of the sizes, then the one-hot class features
// (direction, type, layout, a 3-D flag, group structure), from
// kFirstBinaryFeature on.
inline constexpr int kFeatureCount = 34;
inline constexpr int kFirstBinaryFeature = 22;
inline constexpr int kClassFeaturesWithoutStructure = 9;
using Features = std::array<float, kFeatureCount>;
Features ProblemFeatures(const ConvProblem& p);
absl::string_view FeatureName(int i);

// "dense", "grouped" or "depthwise" (one input channel per group).
absl::string_view GroupStructure(const ConvProblem& p);
// The class of p, as the model keys it: "F FP32 NCHW depthwise".
std::string ProblemClassName(const ConvProblem& p);

// One problem with its measured solver times (ms).
struct TrainingSample {
  ConvProblem problem;
  std::vector<std::pair<uint32_t, double>> times;
};

// The sample of one unconstrained FindRecord. InvalidArgument for records
// tuned under a workspace limit (storage::IsWorkspaceLimited), unparsable
// keys, and records with no measured result.
absl::StatusOr<TrainingSample> SampleFromRecord(const v1::FindRecord& record);

struct LearnedOptions {
  // Fewer training records than this: the model is not applicable.
  int min_records = 8;
  // Measured neighbours (of one solver, in the problem's class) averaged.
  int knn_k = 5;
  // The standardized distance at which a neighbour's support has fallen to
  // exp(-1/2) of a neighbour at the problem itself.
  double support_radius = 2.0;
  // How much a solver's distance from the best at its neighbours (log2
  // regret) counts against its predicted time when ranking.
  double regret_weight = 1;
  // How much doubt (-log2 confidence) counts against a learned estimate when
  // ranking: an extrapolation far from its measurements ranks behind a
  // close prediction unless it is predicted much faster.
  double doubt_weight = 0.1;
};

class LearnedRanker final : public Ranker {
 public:
  // InvalidArgument when there are no samples.
  static absl::StatusOr<std::unique_ptr<LearnedRanker>> Train(
      const std::vector<TrainingSample>& samples, std::string device_key,
      const SolverRegistry& registry, const WtiEstimator& wti,
      const LearnedOptions& options);

  // DataLoss when the model is inconsistent (sizes disagree, another schema
  // version).
  static absl::StatusOr<std::unique_ptr<LearnedRanker>> FromProto(
      v1::HeuristicModel model, const SolverRegistry& registry,
      const WtiEstimator& wti, const LearnedOptions& options);
  const v1::HeuristicModel& proto() const { return model_; }

  absl::string_view name() const override { return "heuristic"; }
  // FailedPrecondition: too few training records, or no training record of
  // p's class (named).
  absl::Status IsApplicable(const ConvProblem& p) const override;
  // Solvers measured in p's class (LEARNED), best first: by predicted time
  // times 2^(regret_weight x regret + doubt_weight x -log2 confidence), so
  // that of two close predictions the solver nearer the best at its
  // neighbours, and nearer its measurements, leads. Then the others
  // (ESTIMATED) by time, each raised to at least the slowest learned one.
  std::vector<Estimate> Rank(
      const ConvProblem& p,
      const std::vector<const Solver*>& candidates) const override;

  // Fraction of samples whose measured fastest solver this model ranks first
  // among the solvers measured in that sample.
  double Accuracy(const std::vector<TrainingSample>& samples) const;

  int64_t record_count() const { return model_.record_count(); }
  // Records among record_count() that came from the system FindDb. Set by
  // the trainer before the model is shared.
  void SetSystemRecords(int64_t n) {
    model_.set_system_records(static_cast<uint32_t>(n));
  }

 private:
  LearnedRanker(v1::HeuristicModel model, const SolverRegistry& registry,
                const WtiEstimator& wti, const LearnedOptions& options);
  Features Standardize(const Features& f) const;
  // Index into model_.solvers(), or -1.
  int SolverIndex(uint32_t id) const;
  // Index into categories_ of the class features of f, or -1.
  int CategoryOf(const Features& f) const;
  // Index into families_ of the class features of f, or -1.
  int FamilyOf(const Features& f) const;
  // Squared standardized distances from z to every training point of
  // category `category` (other points: infinity).
  std::vector<float> Distances(const Features& z, int category) const;
  void BuildColumns();
  // One solver's estimate at p: learned from its measured neighbours in p's
  // category when it has any, else estimated. `category` and `family` are
  // p's (-1: none in training); `dist` from Distances.
  Estimate Predict(const Solver& solver, const ConvProblem& p, int category,
                   int family, const std::vector<float>& dist) const;
  void StorePoints(const std::vector<TrainingSample>& samples,
                   const std::vector<Features>& z);

  v1::HeuristicModel model_;
  const SolverRegistry& registry_;
  WtiEstimator wti_;
  LearnedOptions options_;
  Features mean_{}, scale_{};
  std::vector<uint32_t> solver_ids_;
  // The size features feature-major, so the distance loop runs over points
  // and vectorizes; the class features as an index into categories_ (the
  // distinct classes, few).
  std::vector<float> columns_;
  std::vector<uint16_t> category_;
  std::vector<std::array<float, kFeatureCount - kFirstBinaryFeature>>
      categories_;
  // Per solver: its measured points of each category (indices into its own
  // point list).
  std::vector<std::vector<std::vector<int32_t>>> by_category_;
  // The distinct classes with group structure left out (direction, type,
  // layout, dimensionality), and per solver the median residual of its
  // points in each (NaN where it has none): the solver's rate on this device
  // for a problem's direction, type and layout.
  std::vector<std::array<float, kClassFeaturesWithoutStructure>> families_;
  std::vector<std::vector<float>> family_median_;
  // Per solver: the median residual of all its points.
  std::vector<float> median_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_HEURISTICS_LEARNED_H_
