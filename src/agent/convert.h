// Conversion of CUPTI activity records into kprof records: the only place that names CUPTI's
// versioned record structs (CUDA 13.0: Kernel10, Memcpy6, Memset4, Synchronization2, Marker2,
// API, Memory4, Overhead3, Device5, GraphTrace2). Runs on the agent's writer thread.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kprof/record.h"

namespace kprof::agent {

/// Interns strings for the file's string table; remembers which ids are not yet written.
/// Single-threaded (writer thread).
class Interner {
 public:
  uint32_t Intern(std::string_view s);
  /// Moves out the strings added since the last call, as (id, text) pairs.
  std::vector<std::pair<uint32_t, std::string>> TakeNew();

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> ids_;
  std::vector<std::pair<uint32_t, std::string>> new_;
  uint32_t next_ = 1;
};

/// Device properties from a DEVICE record, as meta key/values.
using MetaList = std::vector<std::pair<std::string, std::string>>;

/// What ConvertRecord did with a CUPTI record.
enum class ConvertResult {
  Converted,         ///< `out` holds a kprof record
  MissingTimestamp,  ///< a start or end was 0: counted, not written (a kernel: `out` is filled,
                     ///< its times 0)
  Meta,              ///< device properties appended to `meta`
  Skipped,           ///< a kind kprof does not convert
};

/// Converts one CUPTI record. API names are resolved once per callback id.
ConvertResult ConvertRecord(const CUpti_Activity* rec, Interner& strings, Record& out,
                            MetaList& meta);

/// The (mangled) name of a kernel activity record; "" for any other record.
const char* KernelActivityName(const CUpti_Activity* rec);

/// Callback name without CUPTI's version suffix ("cudaLaunchKernel_v7000" -> "cudaLaunchKernel").
std::string_view ApiBaseName(std::string_view name);

}  // namespace kprof::agent
