// A vendor library opened at run time (GPU driver and runtime, run-time
// compiler, BLAS), so that binaries build against headers alone and run where
// the library is absent. Libraries stay open for the life of the process.
// Used while a loader fills its table of entry points; not thread-safe.
#ifndef CONVTUNE_KERNELS_DYNAMIC_LIBRARY_H_
#define CONVTUNE_KERNELS_DYNAMIC_LIBRARY_H_

#include <initializer_list>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace convtune {

class DynamicLibrary {
 public:
  // The first of `names` that opens. Unavailable otherwise, its message the
  // loader's error for each name, "; "-joined.
  static absl::StatusOr<DynamicLibrary> Open(
      absl::Span<const char* const> names);

  // Sets *fn to the first of `names` the library exports; when none is, *fn
  // is null and the first name is added to missing().
  template <typename Fn>
  void Require(Fn* fn, std::initializer_list<const char*> names) {
    *fn = reinterpret_cast<Fn>(FirstSymbol(names));
  }
  template <typename Fn>
  void Require(Fn* fn, const char* name) {
    Require(fn, {name});
  }

  // `name`, or null when the library lacks it (an optional entry point).
  template <typename Fn>
  Fn Find(const char* name) const {
    return reinterpret_cast<Fn>(Symbol(name));
  }

  // The required names the library lacks, ", "-joined; empty when none.
  const std::string& missing() const { return missing_; }

 private:
  explicit DynamicLibrary(void* handle) : handle_(handle) {}
  void* Symbol(const char* name) const;
  // The first of `names` exported, else null with the first name noted missing.
  void* FirstSymbol(std::initializer_list<const char*> names);

  void* handle_;
  std::string missing_;
};

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_DYNAMIC_LIBRARY_H_
