// An in-memory Store for tests and tools that need no files, as LevelDB keeps
// an in-memory Env beside the POSIX one: same contract as the RocksDB store,
// nothing is durable, and it vanishes with the object. Thread-safe.
#ifndef CONVTUNE_STORAGE_MEMORY_STORE_H_
#define CONVTUNE_STORAGE_MEMORY_STORE_H_

#include <memory>

#include "storage/store.h"

namespace convtune::storage {

// An empty store with every Column. Scan iterates a snapshot taken when it
// starts, as RocksDB does: fn may call back into the store (Get, Put, Delete,
// even Scan) without deadlock, and writes it makes are not seen by that scan.
// path() is empty; Sync() and WriteOptions::sync have nothing to flush.
std::unique_ptr<Store> NewMemoryStore();

}  // namespace convtune::storage

#endif  // CONVTUNE_STORAGE_MEMORY_STORE_H_
