// Offline merge of convtune export files (pure protobuf: no daemon, no
// database). Stateless; thread-safe.
#ifndef CONVTUNE_CLIENT_CLI_DB_MERGE_H_
#define CONVTUNE_CLIENT_CLI_DB_MERGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "convtune/v1/records.pb.h"

namespace convtune::cli {

struct MergeInput {
  std::string name;   // for messages (the path)
  std::string bytes;  // a serialized v1.ExportFile
};

struct MergeStats {
  int64_t files = 0;
  int64_t entries_in = 0;
  int64_t entries_out = 0;
  int64_t identical = 0;      // same family, key and bytes seen again
  int64_t find_replaced = 0;  // a newer find record won over an earlier one
  int64_t find_kept = 0;      // an older (or as old) find record lost
  int64_t conflicts = 0;      // other families: differing values, first kept
};

// The union of the inputs' entries, one per (column family, key): for
// find_db the record with the newest created_unix_ms (the first on a tie),
// for other families the first, counting the others as conflicts. The
// output carries the inputs' device_key. DataLoss for an input that does not
// parse; InvalidArgument for a wrong magic or mixed schema versions;
// FailedPrecondition for system files of different devices, or a system file
// mixed with a full export.
absl::StatusOr<v1::ExportFile> MergeExportFiles(
    const std::vector<MergeInput>& inputs, MergeStats* stats);

}  // namespace convtune::cli

#endif  // CONVTUNE_CLIENT_CLI_DB_MERGE_H_
