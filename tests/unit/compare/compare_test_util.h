// Synthetic runs for the diff/check tests: a training-step-like workload (100 steps) whose
// per-run totals carry deterministic multiplicative jitter, and its JSON summary (schema v1).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "kprof/compare.h"

namespace kprof::test {

struct Spec {
  double gemm_scale = 1.0;      ///< planted slowdown of gemm_kernel
  uint64_t syncs_per_step = 1;  ///< each sync comes with a 4-byte DtoH copy (.item())
  bool extra_kernel = false;    ///< one more kernel per step
  uint64_t peak_bytes = 4ull << 30;
  double jitter = 0.05;  ///< run-to-run noise of timings: uniform in [-jitter, +jitter]
};

inline constexpr uint64_t kSteps = 100;

/// One run of the workload; `seed` picks its noise.
inline RunDigest Synthetic(const Spec& s, uint64_t seed, int index = 0) {
  std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(index));
  auto noisy = [&](double ns) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)
    return static_cast<uint64_t>(ns * (1 + s.jitter * (2 * u - 1)));
  };
  RunDigest d;
  d.source = "synthetic-" + std::to_string(seed) + "-" + std::to_string(index);
  d.kernels["gemm_kernel"] = {kSteps, noisy(200e6 * s.gemm_scale)};  // 2 ms per step
  d.kernels["softmax_kernel"] = {kSteps, noisy(30e6)};
  d.kernels["elementwise_kernel"] = {2 * kSteps, noisy(10e6)};
  if (s.extra_kernel) d.kernels["extra_kernel"] = {kSteps, noisy(5e6)};
  uint64_t kernel_ns = 0, kernels = 0;
  for (const auto& [name, k] : d.kernels) {
    kernel_ns += k.total_ns;
    kernels += k.calls;
  }
  auto& fwd = d.ops["forward"];
  fwd.calls = kSteps;
  fwd.gpu_ns = d.kernels["gemm_kernel"].total_ns + d.kernels["softmax_kernel"].total_ns +
               (s.extra_kernel ? d.kernels["extra_kernel"].total_ns : 0);
  d.ops["optimizer"] = {kSteps, d.kernels["elementwise_kernel"].total_ns};
  RunTotals& t = d.totals;
  t.kernel_ns = kernel_ns;
  t.kernels = kernels;
  t.launches = kernels;
  t.syncs = kSteps * s.syncs_per_step;
  t.memcpys = kSteps * s.syncs_per_step;
  t.memcpy_bytes = 4 * t.memcpys;
  t.memcpy_ns = noisy(2e3 * static_cast<double>(t.memcpys));
  t.sync_ns = noisy(10e3 * static_cast<double>(t.syncs));
  t.gpu_busy_ns = kernel_ns + t.memcpy_ns;
  t.wall_ns = t.gpu_busy_ns + noisy(100e6);
  t.peak_memory_bytes = s.peak_bytes;
  t.processes = 1;
  return d;
}

inline std::vector<RunDigest> SyntheticRuns(const Spec& s, int n, uint64_t seed) {
  std::vector<RunDigest> runs;
  for (int i = 0; i < n; ++i) runs.push_back(Synthetic(s, seed, i));
  return runs;
}

/// The JSON summary (schema v1, the fields diff/check read) of a digest.
inline std::string SummaryJson(const RunDigest& d) {
  using nlohmann::ordered_json;
  const RunTotals& t = d.totals;
  ordered_json j;
  j["schema"] = "kprof.summary";
  j["schema_version"] = 1;
  j["kprof_version"] = "0.1.0";
  j["view"] = "op";
  j["inputs"] = ordered_json::array();
  j["summary"] = {{"wall_ns", t.wall_ns},
                  {"gpu_busy_ns", t.gpu_busy_ns},
                  {"kernel_ns", t.kernel_ns},
                  {"kernels", t.kernels},
                  {"memcpys", t.memcpys},
                  {"memcpy_ns", t.memcpy_ns},
                  {"memcpy_bytes", {{"HtoD", 0}, {"DtoH", t.memcpy_bytes}, {"DtoD", 0}}},
                  {"memsets", t.memsets},
                  {"syncs", t.syncs},
                  {"sync_ns", t.sync_ns},
                  {"launches", t.launches},
                  {"peak_memory_bytes", t.peak_memory_bytes},
                  {"processes", t.processes},
                  {"incomplete_processes", t.incomplete_processes},
                  {"dropped_records", t.dropped_records}};
  ordered_json ops = ordered_json::array(), kernels = ordered_json::array(),
               hints = ordered_json::array();
  for (const auto& [name, op] : d.ops)
    ops.push_back({{"key", name}, {"calls", op.calls}, {"gpu_ns", op.gpu_ns}});
  for (const auto& [name, k] : d.kernels)
    kernels.push_back({{"name", name}, {"calls", k.calls}, {"total_ns", k.total_ns}});
  for (const auto& h : d.hints)
    hints.push_back({{"id", h.id}, {"severity", SeverityName(h.severity)}, {"summary", h.summary}});
  j["rows"] = ops;
  j["ops"] = ops;
  j["kernels"] = kernels;
  j["hints"] = hints;
  return j.dump(1);
}

/// A fresh, empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& name) {
    path_ = std::filesystem::temp_directory_path() /
            ("kprof_compare_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string p = *this / name;
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace kprof::test
