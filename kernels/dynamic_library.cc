#include "kernels/dynamic_library.h"

#include <dlfcn.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace convtune {

absl::StatusOr<DynamicLibrary> DynamicLibrary::Open(
    absl::Span<const char* const> names) {
  std::string tried;
  for (const char* name : names) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL); handle != nullptr) {
      return DynamicLibrary(handle);
    }
    absl::StrAppend(&tried, tried.empty() ? "" : "; ", dlerror());
  }
  return absl::UnavailableError(tried);
}

void* DynamicLibrary::Symbol(const char* name) const {
  return dlsym(handle_, name);
}

void* DynamicLibrary::FirstSymbol(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* fn = Symbol(name); fn != nullptr) return fn;
  }
  if (names.size() > 0) {
    absl::StrAppend(&missing_, missing_.empty() ? "" : ", ", *names.begin());
  }
  return nullptr;
}

}  // namespace convtune
