// The calls behind device memory: src/analysis/memory_calls.h.
#include "analysis/memory_calls.h"

#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "kprof/memory.h"

namespace kprof::memory_calls {
namespace {

constexpr std::string_view kThread = "[thread] ";

// A call's name without CUPTI's version suffix: "cuMemAlloc_v2" -> "cuMemAlloc".
std::string_view BaseName(std::string_view name) {
  const size_t v = name.rfind("_v");
  if (v == std::string_view::npos || v + 2 == name.size()) return name;
  for (size_t i = v + 2; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return name;
  return name.substr(0, v);
}

std::string Key(uint32_t tid, std::string_view name) {
  return std::to_string(tid) + ":" + std::string(BaseName(name));
}

}  // namespace

uint32_t CallerOf(const Record& r) {
  return r.Kind() == RecordKind::DriverApi && (r.flags & kApiMemoryCaller) != 0 ? r.e : 0;
}

bool IsLibrary(const std::string& caller) {
  return !caller.empty() && !caller.starts_with(kThread);
}

std::string CallerOwner(const std::string& caller) {
  if (!caller.starts_with(kThread)) return LibraryOwner(caller);
  const std::string thread = caller.substr(kThread.size());
  if (thread.starts_with("NCCL")) return "NCCL (thread " + thread + ")";
  return "(library not recorded) on thread " + thread;
}

Mappings::Mappings(const ProcessTrace& p) {
  for (const Record& r : p.records) {
    if (CallerOf(r) != 0 && MappedAddress(r) != 0)
      by_address_[MappedAddress(r)].calls.push_back(&r);
  }
  for (auto& [address, c] : by_address_)
    std::stable_sort(c.calls.begin(), c.calls.end(),
                     [](const Record* a, const Record* b) { return a->start_ns < b->start_ns; });
}

const Record* Mappings::Claim(const Record& alloc) {
  const auto m = by_address_.find(Address(alloc));
  if (m == by_address_.end()) return nullptr;
  Calls& c = m->second;
  const auto from = c.calls.begin() + static_cast<std::ptrdiff_t>(c.next);
  auto it = std::upper_bound(from, c.calls.end(), alloc.start_ns,
                             [](uint64_t t, const Record* call) { return t < call->start_ns; });
  if (it == from) return nullptr;  // every mapping began after it, or was claimed
  --it;
  // The calls before it are passed over: memory made here later is not theirs either.
  c.next = static_cast<size_t>(it - c.calls.begin()) + 1;
  return alloc.start_ns - (*it)->start_ns <= kMapToRecordNs ? *it : nullptr;
}

Retries::Retries(const ProcessTrace& p, const std::vector<const Record*>& failed) {
  if (failed.empty()) return;
  std::unordered_set<std::string> names;
  for (const Record* f : failed) names.insert(std::string(BaseName(p.Name(*f))));
  for (const Record& r : p.records) {
    if ((r.Kind() != RecordKind::RuntimeApi && r.Kind() != RecordKind::DriverApi) || r.b != 0)
      continue;
    const std::string_view name = BaseName(p.Name(r));
    if (names.contains(std::string(name))) ok_[Key(r.tid, name)].push_back(r.start_ns);
  }
  for (auto& [key, starts] : ok_) std::sort(starts.begin(), starts.end());
  p_ = &p;
}

bool Retries::Succeeded(const Record& f) const {
  if (p_ == nullptr) return false;
  const auto it = ok_.find(Key(f.tid, p_->Name(f)));
  if (it == ok_.end()) return false;
  // The failure is stamped at the call's exit: a retry begins at or after it.
  const auto next = std::lower_bound(it->second.begin(), it->second.end(), f.start_ns);
  return next != it->second.end() && *next - f.start_ns <= FailedAllocation::kRetryNs;
}

}  // namespace kprof::memory_calls
