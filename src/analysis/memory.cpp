// Device memory by owner (include/kprof/memory.h, docs/memory.md). Per process and device, the
// allocations are replayed in time order: the moment the memory held was highest is found, then
// the replay is made again up to that moment (and up to each failed allocation) and what was
// live then is grouped by the library that asked for it and by the op range of its call.
#include "kprof/memory.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "analysis/accumulators.h"
#include "analysis/memory_calls.h"
#include "analysis/views/view.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

// Libraries whose allocations have a name people know; matched in the file's base name.
struct KnownLibrary {
  std::string_view stem;
  std::string_view owner;
};
constexpr KnownLibrary kKnown[] = {
    {"libc10_cuda", "PyTorch caching allocator"},
    {"libnccl", "NCCL"},
    {"libcublasLt", "cuBLASLt"},
    {"libcublas", "cuBLAS"},
    {"libcudnn", "cuDNN"},
    {"libcufft", "cuFFT"},
    {"libcusparse", "cuSPARSE"},
    {"libcusolver", "cuSOLVER"},
    {"libcurand", "cuRAND"},
    {"libnvshmem", "NVSHMEM"},
    {"libcuda.so", "CUDA driver"},
    {"libcudart", "CUDA runtime"},
};

std::string Base(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

constexpr std::string_view kStaticOwner = "static memory (module globals)";
constexpr std::string_view kUnknownOwner = "(library not recorded)";
// The caching allocator lives in libc10_cuda.so in every PyTorch build.
constexpr std::string_view kTorchSegmentOwner = "PyTorch caching allocator (libc10_cuda.so)";
// The largest live allocations listed, however many owners are (PyTorch loads hundreds of
// static variables).
constexpr size_t kLargestShown = 10;
// PyTorch layer payloads read per process (the layer writes at most four per device).
constexpr size_t kMaxTorchPayloads = 16;

struct Alloc {
  uint64_t bytes = 0;
  uint64_t t_ns = 0;
  uint32_t library = 0;   // index into Replay::owners
  int range = -1;         // index into the process's op ranges
  uint32_t variable = 0;  // string id
};

// One memory event of one process on one device.
struct Event {
  const Record* r = nullptr;
  int64_t delta = 0;
  uint32_t library = 0;  // an allocation's owner (Replay::owners_), found once
  int range = -1;        // an allocation's op range, found once
};

// The caching allocator's segments on one device (address, bytes), from the PyTorch layer: an
// address the driver handed out again with another size is another segment.
using TorchSegments = std::set<std::pair<uint64_t, uint64_t>>;

using memory_calls::Address;

class Replay {
 public:
  // `claims`: the virtual-memory call that mapped each allocation that had one
  // (memory_calls::Mappings, claimed over the whole process in time order).
  Replay(const ProcessTimeline& t, std::vector<Event> events, const TorchSegments& torch,
         const std::unordered_map<const Record*, const Record*>& claims)
      : t_(t), p_(*t.process), events_(std::move(events)) {
    std::stable_sort(events_.begin(), events_.end(),
                     [](const Event& a, const Event& b) { return a.r->start_ns < b.r->start_ns; });
    for (Event& e : events_) {
      if (e.delta < 0) continue;
      const auto claim = claims.find(e.r);
      const Record* map = claim == claims.end() ? nullptr : claim->second;
      // A segment the allocator's history lists is the allocator's, whoever CUPTI named.
      e.library = torch.contains({Address(*e.r), static_cast<uint64_t>(e.delta)})
                      ? Intern(std::string(kTorchSegmentOwner))
                      : OwnerOf(*e.r, map);
      if (e.r->name != 0 || LibraryCaller(CallOf(*e.r, map))) ++sourced_;
      // The range open at the mapping call, else at the call CUPTI correlated.
      e.range = map != nullptr ? t_.index.OpRangeAt(map->tid, map->start_ns)
                               : RangeOf(e.r->correlation);
    }
  }

  // Allocations whose maker is known: CUPTI named a library, or kprof found the library whose
  // virtual-memory call made it.
  uint64_t Sourced() const { return sourced_; }

  // Replays the events before `end` (an index into the sorted events); the state afterwards.
  void Run(size_t end) {
    live_.clear();
    held_ = 0;
    made_.assign(owners_.size(), 0);
    made_range_.clear();
    for (size_t i = 0; i < end && i < events_.size(); ++i) Apply(events_[i]);
  }

  // The index of the event after which the memory held was highest, and that height.
  std::pair<size_t, int64_t> Peak() {
    live_.clear();
    held_ = 0;
    made_.assign(owners_.size(), 0);
    made_range_.clear();
    int64_t best = 0;
    size_t at = 0;
    for (size_t i = 0; i < events_.size(); ++i) {
      Apply(events_[i]);
      if (held_ > best) {
        best = held_;
        at = i + 1;
      }
    }
    return {at, best};
  }

  // The bytes held per owner over the whole replay into `out` (its owners: the names of
  // `s.by_library`'s first kSeriesOwners, then every other owner summed), thinned to kSeriesPoints
  // points: per time bin, the point at which the most was held (the peak is never thinned away).
  void Series(const MemoryState& s, MemorySeries& out) const {
    if (events_.empty()) return;
    std::vector<size_t> column(owners_.size(), SIZE_MAX);
    for (const MemoryOwner& o : s.by_library) {
      if (out.owners.size() == kSeriesOwners) break;
      const auto it = owner_ids_.find(o.name);
      if (it == owner_ids_.end()) continue;
      column[it->second] = out.owners.size();
      out.owners.push_back(o.name);
    }
    const size_t cols = out.owners.size() + 1;
    for (size_t& c : column) c = std::min(c, cols - 1);
    out.owners.emplace_back("other owners");
    const uint64_t t0 = events_.front().r->start_ns;
    // kSeriesPoints - 1 bins, then the state after the last event (what was still held).
    const uint64_t width = (events_.back().r->start_ns - t0) / (kSeriesPoints - 1) + 1;
    std::unordered_map<uint64_t, std::pair<int64_t, size_t>> live;  // address -> bytes, column
    std::vector<int64_t> held(cols, 0), best;
    int64_t total = 0, best_total = -1;
    uint64_t bin = 0, best_t = 0;
    const auto flush = [&] {
      if (best_total < 0) return;
      out.t_ns.push_back(best_t);
      out.bytes.insert(out.bytes.end(), best.begin(), best.end());
      best_total = -1;
    };
    for (const Event& e : events_) {
      const Record& r = *e.r;
      const uint64_t b = (r.start_ns - t0) / width;
      if (b != bin) flush();
      bin = b;
      const uint64_t addr = Address(r);
      if (e.delta >= 0) {
        auto [it, fresh] = live.try_emplace(addr, e.delta, column[e.library]);
        if (!fresh) {  // a second allocation at a live address, as Apply counts it
          detail::SatAdd(held[it->second.second], -it->second.first);
          detail::SatAdd(total, -it->second.first);
          it->second = {e.delta, column[e.library]};
        }
        detail::SatAdd(held[column[e.library]], e.delta);
        detail::SatAdd(total, e.delta);
      } else if (auto it = live.find(addr); it != live.end()) {
        detail::SatAdd(held[it->second.second], -it->second.first);
        detail::SatAdd(total, -it->second.first);
        live.erase(it);
      }
      if (total > best_total) {
        best_total = total;
        best = held;
        best_t = r.start_ns;
      }
    }
    flush();
    if (out.t_ns.back() != events_.back().r->start_ns ||
        !std::equal(held.begin(), held.end(),
                    out.bytes.end() - static_cast<std::ptrdiff_t>(cols))) {
      out.t_ns.push_back(events_.back().r->start_ns);
      out.bytes.insert(out.bytes.end(), held.begin(), held.end());
    }
  }

  // The number of events strictly before time `t`.
  size_t Before(uint64_t t) const {
    return static_cast<size_t>(
        std::lower_bound(events_.begin(), events_.end(), t,
                         [](const Event& e, uint64_t v) { return e.r->start_ns < v; }) -
        events_.begin());
  }
  const Event& At(size_t i) const { return events_[i]; }

  void Describe(MemoryState& s, size_t top) const {
    s.live_bytes = held_;
    std::vector<MemoryOwner> libs(owners_.size());
    for (size_t i = 0; i < owners_.size(); ++i) {
      libs[i].name = owners_[i];
      libs[i].allocations = made_[i];
    }
    std::map<std::string, MemoryOwner> ranges;
    for (const auto& [range, n] : made_range_) ranges[RangeName(range)].allocations += n;
    std::vector<std::pair<uint64_t, const Alloc*>> all;
    all.reserve(live_.size());
    for (const auto& [addr, a] : live_) {
      MemoryOwner& lib = libs[a.library];
      detail::SatAdd(lib.live_bytes, static_cast<int64_t>(a.bytes));
      ++lib.live_allocations;
      MemoryOwner& rg = ranges[RangeName(a.range)];
      detail::SatAdd(rg.live_bytes, static_cast<int64_t>(a.bytes));
      ++rg.live_allocations;
      all.emplace_back(addr, &a);
    }
    std::erase_if(libs, [](const MemoryOwner& o) { return o.live_allocations == 0; });
    for (auto& [name, o] : ranges) {
      if (o.live_allocations == 0) continue;
      o.name = name;
      s.by_range.push_back(o);
    }
    s.by_library = std::move(libs);
    const auto most = [](const MemoryOwner& a, const MemoryOwner& b) {
      return a.live_bytes != b.live_bytes ? a.live_bytes > b.live_bytes : a.name < b.name;
    };
    std::sort(s.by_library.begin(), s.by_library.end(), most);
    std::sort(s.by_range.begin(), s.by_range.end(), most);
    if (s.by_range.size() > top) s.by_range.resize(top);
    const size_t n = std::min({top, kLargestShown, all.size()});
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(),
                      [](const auto& a, const auto& b) {
                        return a.second->bytes != b.second->bytes
                                   ? a.second->bytes > b.second->bytes
                                   : a.first < b.first;
                      });
    for (size_t i = 0; i < n; ++i) {
      const Alloc& a = *all[i].second;
      s.largest.push_back({all[i].first, a.bytes, a.t_ns, owners_[a.library],
                           a.range < 0 ? std::string() : std::string(RangeName(a.range)),
                           a.variable != 0 ? p_.strings.Get(a.variable) : std::string()});
    }
  }

  std::string RangeName(int range) const {
    return range < 0 ? std::string(kOpNoRange)
                     : std::string(t_.index.Name(static_cast<size_t>(range)));
  }

  // The innermost op range open on the thread of the call with `correlation` when it began.
  int RangeOf(uint32_t correlation) const {
    const Record* api = t_.index.api_by_correlation.Find(correlation);
    return api == nullptr ? -1 : t_.index.OpRangeAt(api->tid, api->start_ns);
  }

 private:
  static bool IsStatic(const Record& r) {
    const auto mk = static_cast<MemKind>(r.c);
    return mk == MemKind::DeviceStatic || mk == MemKind::ManagedStatic;
  }

  // The call that tells who made allocation `r`, or null. `map`: the virtual-memory call that
  // mapped it (Mappings::Claim), or null. Memory a virtual-memory call mapped is its caller's:
  // CUPTI's record of it carries a correlation id of its own and a library that is not the
  // caller's (the last library that called the runtime on that thread: cuDNN's for PyTorch's
  // expandable segments, seen on an H200), so a library kprof found on the mapping call's stack
  // wins; a caller known only by its thread names memory CUPTI named no library for. An
  // allocation whose library is still not known is told apart by the call that made it.
  const Record* CallOf(const Record& r, const Record* map) const {
    if (IsStatic(r)) return nullptr;
    if (map != nullptr && (r.name == 0 || LibraryCaller(map))) return map;
    return r.name == 0 ? t_.index.api_by_correlation.Find(r.correlation) : nullptr;
  }

  // Whether `call` is a virtual-memory call whose caller kprof found as a library.
  bool LibraryCaller(const Record* call) const {
    const uint32_t caller = call != nullptr ? memory_calls::CallerOf(*call) : 0;
    return caller != 0 && memory_calls::IsLibrary(p_.strings.Get(caller));
  }

  uint32_t OwnerOf(const Record& r, const Record* map) {
    const bool is_static = IsStatic(r);
    const Record* api = CallOf(r, map);
    const uint32_t caller = api != nullptr ? memory_calls::CallerOf(*api) : 0;
    const uint64_t key = caller != 0      ? caller | 3ull << 32
                         : api != nullptr ? api->name | 2ull << 32
                                          : r.name | (is_static ? 1ull << 32 : 0);
    if (auto it = owner_of_.find(key); it != owner_of_.end()) return it->second;
    std::string name;
    if (is_static) {
      // A module's globals, loaded with its code: whose code, when CUPTI said.
      name = kStaticOwner;
      if (r.name != 0) name += " of " + Base(p_.Name(r));
    } else if (caller != 0) {
      name = memory_calls::CallerOwner(p_.strings.Get(caller));
    } else if (r.name != 0) {
      name = LibraryOwner(p_.Name(r));
    } else {
      name = kUnknownOwner;
      if (api != nullptr && api->name != 0) name += " from " + p_.Name(*api);
    }
    const uint32_t id = Intern(name);
    owner_of_.emplace(key, id);
    return id;
  }

  uint32_t Intern(const std::string& name) {
    auto [it, fresh] = owner_ids_.try_emplace(name, static_cast<uint32_t>(owners_.size()));
    if (fresh) {
      owners_.push_back(name);
      made_.push_back(0);
    }
    return it->second;
  }

  void Apply(const Event& e) {
    const Record& r = *e.r;
    const uint64_t addr = Address(r);
    if (e.delta >= 0) {
      // (The size as DeviceMemoryDelta clamped it: a hostile file's byte counts stay in range.)
      Alloc a{static_cast<uint64_t>(e.delta), r.start_ns, e.library, e.range, r.e};
      ++made_[a.library];
      ++made_range_[a.range];
      auto [it, fresh] = live_.try_emplace(addr, a);
      if (!fresh) {  // a second allocation at a live address: its release was not recorded
        detail::SatAdd(held_, -static_cast<int64_t>(it->second.bytes));
        it->second = a;
      }
      detail::SatAdd(held_, static_cast<int64_t>(a.bytes));
      return;
    }
    auto it = live_.find(addr);
    if (it == live_.end()) return;  // allocated before the recording began
    detail::SatAdd(held_, -static_cast<int64_t>(it->second.bytes));
    live_.erase(it);
  }

  const ProcessTimeline& t_;
  const ProcessTrace& p_;
  std::vector<Event> events_;
  std::unordered_map<uint64_t, Alloc> live_;
  int64_t held_ = 0;
  std::vector<std::string> owners_;
  std::unordered_map<std::string, uint32_t> owner_ids_;
  std::unordered_map<uint64_t, uint32_t> owner_of_;  // (string id, static) -> owners_ index
  uint64_t sourced_ = 0;
  std::vector<uint64_t> made_;
  std::unordered_map<int, uint64_t> made_range_;
};

// The owners by library and by owner cut to `top` once PyTorch's moment is joined (the join
// needs the caching allocator's share, wherever it ranks).
void Finish(MemoryState& s, const std::vector<TorchMemory>& torch, size_t top) {
  detail::JoinTorchMemory(s, torch);
  if (s.by_library.size() > top) s.by_library.resize(top);
  if (s.by_owner.size() > top) s.by_owner.resize(top);
}

uint64_t Capacity(const ProcessTrace& p, uint16_t device) {
  return p.MetaU64("device." + std::to_string(device) + ".memory_bytes");
}

// The device a failed allocation call was made on (MemAllocFailed.d).
uint16_t FailedDevice(const Record& r) {
  return r.d <= UINT16_MAX ? static_cast<uint16_t>(r.d) : kNoDevice;
}

}  // namespace

std::string LibraryOwner(const std::string& path) {
  if (path.empty()) return "";
  const std::string base = Base(path);
  for (const KnownLibrary& k : kKnown)
    if (std::string_view(base).starts_with(k.stem)) return std::string(k.owner) + " (" + base + ")";
  // CuPy's pool allocates from its Cython modules: cupy/cuda/memory.*.so in older releases,
  // cupy_backends/cuda/api/runtime.*.so in current ones.
  if (path.find("/cupy/") != std::string::npos || path.find("/cupy_backends/") != std::string::npos)
    return "CuPy memory pool (" + base + ")";
  return base;
}

MemorySummary SummarizeMemory(const Timeline& tl, size_t top) {
  MemorySummary out;
  out.top = top;
  for (const ProcessTimeline& t : tl.processes) {
    const ProcessTrace& p = *t.process;
    std::map<uint16_t, std::vector<Event>> by_device;
    std::vector<const Record*> failed;
    uint64_t first = UINT64_MAX;
    // Windows: memory is recorded inside them only, so what was held then is a part.
    bool windows = false;
    const size_t torch_from = out.torch.size();
    std::unordered_set<uint32_t> seen;  // string ids of marks read
    for (const Record& r : p.records) {
      if (r.start_ns != 0) first = std::min(first, r.start_ns);
      windows |= r.Kind() == RecordKind::CaptureWindow;
      if (r.Kind() == RecordKind::MarkerInstant && r.name != 0) {
        // Each payload string once, and a few per process: the layer writes one at exit and at
        // most three at out-of-memory errors per device; a hostile file's thousand marks naming
        // one large string cost one parse.
        if (out.torch.size() - torch_from < kMaxTorchPayloads && seen.insert(r.name).second)
          if (auto tm = ParseTorchMemory(p.Name(r))) {
            tm->pid = p.pid;
            tm->rank = p.rank;
            out.torch.push_back(std::move(*tm));
          }
        continue;
      }
      if (r.Kind() == RecordKind::MemAllocFailed) {
        failed.push_back(&r);
        continue;
      }
      const auto delta = detail::DeviceMemoryDelta(r);
      if (!delta || r.start_ns == 0) continue;
      by_device[r.device].push_back({&r, *delta});
      if (*delta >= 0) ++out.allocations;
    }
    for (size_t i = torch_from; i < out.torch.size(); ++i) detail::StepEndByOp(t, out.torch[i]);
    // This process's PyTorch findings, in time order.
    std::vector<TorchMemory> torch(out.torch.begin() + static_cast<std::ptrdiff_t>(torch_from),
                                   out.torch.end());
    std::map<uint16_t, TorchSegments> segments;
    for (const TorchMemory& tm : torch)
      segments[tm.device].insert(tm.segments.begin(), tm.segments.end());
    // Each mapping call claims its allocation in the process's time order, across devices.
    std::unordered_map<const Record*, const Record*> claims;
    {
      memory_calls::Mappings mappings(p);
      std::vector<const Record*> made;
      for (const auto& [device, events] : by_device)
        for (const Event& e : events)
          if (e.delta >= 0) made.push_back(e.r);
      std::stable_sort(made.begin(), made.end(),
                       [](const Record* a, const Record* b) { return a->start_ns < b->start_ns; });
      for (const Record* r : made)
        if (const Record* map = mappings.Claim(*r)) claims.emplace(r, map);
    }
    std::map<uint16_t, Replay> replays;
    for (auto& [device, events] : by_device) {
      Replay& rp =
          replays.try_emplace(device, t, std::move(events), segments[device], claims).first->second;
      out.sourced_allocations += rp.Sourced();
      const auto [at, height] = rp.Peak();
      if (height <= 0) continue;
      rp.Run(at);
      MemoryState s;
      s.pid = p.pid;
      s.rank = p.rank;
      s.device = device;
      s.t_ns = rp.At(at - 1).r->start_ns;
      s.since_start_ns = s.t_ns - std::min(first, s.t_ns);
      s.capacity_bytes = Capacity(p, device);
      s.partial = windows;
      const int range = rp.RangeOf(rp.At(at - 1).r->correlation);
      if (range >= 0) s.range = rp.RangeName(range);
      rp.Describe(s, top);
      MemorySeries series{s.pid, s.rank, s.device, {}, {}, {}, s.t_ns, s.live_bytes};
      rp.Series(s, series);
      Finish(s, torch, top);
      out.peaks.push_back(std::move(s));
      out.series.push_back(std::move(series));
    }
    std::sort(failed.begin(), failed.end(),
              [](const Record* a, const Record* b) { return a->start_ns < b->start_ns; });
    const memory_calls::Retries retries(p, failed);
    // Probes (retried with success) are not described, nor counted among the first failures.
    std::vector<bool> retried(failed.size());
    size_t last = SIZE_MAX, shortages = 0;
    for (size_t i = 0; i < failed.size(); ++i) {
      retried[i] =
          failed[i]->b != FailedAllocation::kOutOfMemoryCode && retries.Succeeded(*failed[i]);
      if (!retried[i]) last = i;
    }
    for (size_t i = 0; i < failed.size(); ++i) {
      const Record* r = failed[i];
      FailedAllocation f;
      f.call = p.Name(*r);
      if (f.call.empty()) f.call = "(allocation call)";
      f.bytes = r->bytes;
      f.code = r->b;
      f.pinned_host = static_cast<MemKind>(r->c) == MemKind::Pinned;
      f.tid = r->tid;
      f.retried = retried[i];
      const int range = t.index.OpRangeAt(r->tid, r->start_ns);
      if (range >= 0) f.range = std::string(t.index.Name(static_cast<size_t>(range)));
      MemoryState& s = f.state;
      s.pid = p.pid;
      s.rank = p.rank;
      s.device = FailedDevice(*r);
      s.t_ns = r->start_ns;
      s.since_start_ns = s.t_ns - std::min(first, s.t_ns);
      s.capacity_bytes = s.device == kNoDevice ? 0 : Capacity(p, s.device);
      s.partial = windows;
      // The state of the first failures and of the last (a replay each): a program that probes
      // with failing calls is not replayed once per call.
      auto it = replays.find(s.device);
      f.described = !f.pinned_host && !f.retried && it != replays.end() &&
                    (shortages < kDescribedFailures || i == last);
      if (!f.retried) ++shortages;
      if (f.described) {
        it->second.Run(it->second.Before(r->start_ns));
        it->second.Describe(s, top);
        Finish(s, torch, top);
      }
      out.failures.push_back(std::move(f));
    }
  }
  std::stable_sort(out.torch.begin(), out.torch.end(),
                   [](const TorchMemory& a, const TorchMemory& b) { return a.t_ns < b.t_ns; });
  // The peaks, highest first, each with its series at the same index.
  std::vector<size_t> order(out.peaks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return out.peaks[a].live_bytes > out.peaks[b].live_bytes;
  });
  std::vector<MemoryState> peaks;
  std::vector<MemorySeries> series;
  for (size_t i : order) {
    peaks.push_back(std::move(out.peaks[i]));
    series.push_back(std::move(out.series[i]));
  }
  out.peaks = std::move(peaks);
  out.series = std::move(series);
  std::stable_sort(out.failures.begin(), out.failures.end(),
                   [](const FailedAllocation& a, const FailedAllocation& b) {
                     return a.state.t_ns < b.state.t_ns;
                   });
  return out;
}

}  // namespace kprof
