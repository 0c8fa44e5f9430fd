// Human-readable durations, sizes and kernel names.
#include <cxxabi.h>
#include <fmt/format.h>

#include <cstdlib>

#include "kprof/analysis.h"

namespace kprof {

std::string Demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d != nullptr ? d : name;
  std::free(d);
  return out;
}

std::string FormatDuration(uint64_t ns) {
  const auto v = static_cast<double>(ns);
  if (ns < 1'000) return fmt::format("{} ns", ns);
  if (ns < 1'000'000) return fmt::format("{:.2f} us", v / 1e3);
  if (ns < 1'000'000'000) return fmt::format("{:.2f} ms", v / 1e6);
  return fmt::format("{:.3f} s", v / 1e9);
}

std::string FormatBytes(uint64_t bytes) {
  const auto v = static_cast<double>(bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (1u << 20)) return fmt::format("{:.1f} KiB", v / 1024);
  if (bytes < (1ull << 30)) return fmt::format("{:.1f} MiB", v / (1 << 20));
  return fmt::format("{:.2f} GiB", v / (1ull << 30));
}

}  // namespace kprof
