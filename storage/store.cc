#include "storage/store.h"

#include "absl/strings/str_cat.h"

namespace convtune::storage {

absl::string_view ColumnName(Column c) {
  switch (c) {
    case Column::kFindDb:
      return "find_db";
    case Column::kPerfDb:
      return "perf_db";
    case Column::kKernelCache:
      return "kernel_cache";
    case Column::kMeta:
      return "meta";
  }
  return "?";
}

absl::StatusOr<Column> ColumnFromName(absl::string_view name) {
  for (Column c : kAllColumns) {
    if (ColumnName(c) == name) return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("column_family: unknown '", name, "'"));
}

}  // namespace convtune::storage
