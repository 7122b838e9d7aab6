// The learned immediate-mode model of one device: predicts each solver's time
// for a problem from its shape, trained on the device's FindDb records, so a
// FindDb miss is answered without timing. Two model kinds: per-solver ridge
// regression of log2(time) and k-nearest-neighbours. Immutable once built;
// thread-safe.
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

enum class ModelKind { kRidge, kKnn };
absl::string_view ModelKindName(ModelKind kind);  // "ridge", "knn"

// The model's inputs: logs of the sizes, then one-hot direction, type, layout
// and a 3-D flag (the binary features, from kFirstBinaryFeature on).
inline constexpr int kFeatureCount = 31;
inline constexpr int kFirstBinaryFeature = 22;
using Features = std::array<float, kFeatureCount>;
Features ProblemFeatures(const ConvProblem& p);
absl::string_view FeatureName(int i);

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
  // kNN generalizes better on the leave-one-network-out benchmark
  // (tests/bench/heuristic_accuracy.cc).
  ModelKind kind = ModelKind::kKnn;
  // Fewer training records than this: the model is not applicable.
  int min_records = 8;
  // Ridge penalty on the standardized weights (the bias is not penalized).
  double ridge_lambda = 0.5;
  // Neighbours averaged by the kNN model.
  int knn_k = 3;
  // How far (in log2 units) a size feature may lie outside the trained range.
  double range_margin_log2 = 2.0;
};

class LearnedRanker final : public Ranker {
 public:
  // InvalidArgument when there are no samples.
  static absl::StatusOr<std::unique_ptr<LearnedRanker>> Train(
      const std::vector<TrainingSample>& samples, std::string device_key,
      const SolverRegistry& registry, const WtiEstimator& wti,
      const LearnedOptions& options);

  // DataLoss when the model is inconsistent (sizes disagree, unknown kind,
  // another schema version).
  static absl::StatusOr<std::unique_ptr<LearnedRanker>> FromProto(
      v1::HeuristicModel model, const SolverRegistry& registry,
      const WtiEstimator& wti, const LearnedOptions& options);
  const v1::HeuristicModel& proto() const { return model_; }

  absl::string_view name() const override { return "heuristic"; }
  // FailedPrecondition: too few training records, a direction, type, layout
  // or dimensionality never seen in training, or a size feature far outside
  // the trained range (named).
  absl::Status IsApplicable(const ConvProblem& p) const override;
  // Known solvers by predicted time; solvers absent from training after
  // them, by the weighted-throughput estimate (each time raised to at least
  // the slowest prediction so the list stays sorted).
  std::vector<Estimate> Rank(
      const ConvProblem& p,
      const std::vector<const Solver*>& candidates) const override;

  // Fraction of samples whose measured fastest solver this model ranks first
  // among the solvers measured in that sample.
  double Accuracy(const std::vector<TrainingSample>& samples) const;

  int64_t record_count() const { return model_.record_count(); }

 private:
  LearnedRanker(v1::HeuristicModel model, const SolverRegistry& registry,
                const WtiEstimator& wti, const LearnedOptions& options);
  Features Standardize(const Features& f) const;
  // Index into model_.solvers(), or -1.
  int SolverIndex(uint32_t id) const;
  // The kNN query of one problem: squared distances from z to every
  // training point, and the points nearest z, closest first. Empty for ridge.
  struct Neighbourhood {
    std::vector<float> dist;
    std::vector<int> nearest;
  };
  Neighbourhood Neighbours(const Features& z) const;
  void BuildColumns();
  // Predicted log2(ms) of solver model `index`; `hood` from Neighbours(z).
  double PredictLog2(int index, const Features& f, const Features& z,
                     const Neighbourhood& hood) const;
  void FitRidge(const std::vector<TrainingSample>& samples,
                const std::vector<Features>& z);
  void StoreKnn(const std::vector<TrainingSample>& samples,
                const std::vector<Features>& z);

  v1::HeuristicModel model_;
  const SolverRegistry& registry_;
  WtiEstimator wti_;
  LearnedOptions options_;
  ModelKind kind_;
  Features mean_{}, scale_{}, min_{}, max_{};
  std::vector<uint32_t> solver_ids_;
  // kNN points: the size features feature-major, so the distance loop runs
  // over points and vectorizes; the binary features as an index into
  // categories_ (the distinct direction/type/layout/3-D combinations, few).
  std::vector<float> columns_;
  std::vector<uint16_t> category_;
  std::vector<std::array<float, kFeatureCount - kFirstBinaryFeature>>
      categories_;
  // Per solver model: each training point's index among the solver's own
  // points, or -1 where the solver was not measured.
  std::vector<std::vector<int32_t>> slot_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_HEURISTICS_LEARNED_H_
