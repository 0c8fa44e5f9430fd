// PyTorch's categories (include/kprof/memory.h, docs/memory.md "PyTorch's categories"): the
// payloads kprof's PyTorch layer writes as NVTX marks, read back, and joined with the driver-level
// owners so that the caching allocator's share is split into what its blocks held.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "analysis/accumulators.h"
#include "kprof/analysis.h"
#include "kprof/memory.h"

namespace kprof {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kCategoryKeys[kTorchCategories] = {
    "parameters", "gradients", "optimizer_state", "activations", "other"};
constexpr std::string_view kCategoryNames[kTorchCategories] = {
    "parameters", "gradients", "optimizer state", "activations", "other tensors"};
// Bounds on what one payload may carry (the layer writes at most 16 segment moments plus three,
// 1024 steps and 5 largest blocks a moment): a hostile mark costs the report nothing more.
constexpr size_t kMaxMoments = 64, kMaxSteps = 4096, kMaxLargest = 16, kMaxSegments = 8192;
constexpr std::string_view kTorchOwner = "PyTorch caching allocator";

// A non-negative integer member, clamped to int64 (0 when absent or of another type).
int64_t Int(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return 0;
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
               ? std::numeric_limits<int64_t>::max()
               : static_cast<int64_t>(v);
  }
  if (it->is_number_integer()) return std::max<int64_t>(0, it->get<int64_t>());
  return 0;
}

std::string Str(const Json& j, const char* key, size_t max = 64) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  std::string s = it->get<std::string>();
  if (s.size() > max) s.resize(max);
  return s;
}

// Microseconds of the realtime clock to the run's nanoseconds (CUPTI's clock on Linux is the
// same realtime clock), saturating.
uint64_t Ns(int64_t us) {
  const auto u = static_cast<uint64_t>(us);
  return u > UINT64_MAX / 1000 ? UINT64_MAX : u * 1000;
}

TorchMoment Moment(const Json& m) {
  TorchMoment t;
  t.kind = Str(m, "kind");
  t.t_ns = Ns(Int(m, "t_us"));
  t.allocated = Int(m, "allocated");
  t.reserved = Int(m, "reserved");
  if (const auto c = m.find("categories"); c != m.end() && c->is_object())
    for (size_t i = 0; i < kTorchCategories; ++i)
      t.bytes[i] = Int(*c, std::string(kCategoryKeys[i]).c_str());
  if (const auto l = m.find("largest"); l != m.end() && l->is_array())
    for (const Json& x : *l) {
      if (t.largest.size() == kMaxLargest) break;
      if (!x.is_array() || x.size() != 2 || !x[0].is_number_integer() || !x[1].is_string())
        continue;
      const std::string key = x[1].get<std::string>();
      std::string name = key;
      for (size_t i = 0; i < kTorchCategories; ++i)
        if (key == kCategoryKeys[i]) name = kCategoryNames[i];
      t.largest.emplace_back(std::max<int64_t>(0, x[0].get<int64_t>()), name.substr(0, 64));
    }
  return t;
}

const MemoryOwner* TorchOwner(const MemoryState& s) {
  for (const MemoryOwner& o : s.by_library)
    if (std::string_view(o.name).starts_with(kTorchOwner)) return &o;
  return nullptr;
}

}  // namespace

std::string_view TorchCategoryName(size_t i) {
  return i < kTorchCategories ? kCategoryNames[i] : std::string_view("?");
}

bool TorchMoment::Is(std::string_view k) const {
  std::string_view rest = kind;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    if (rest.substr(0, comma) == k) return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

std::string TorchMoment::Categories(size_t skip) const {
  std::string out;
  for (size_t i = 0; i < kTorchCategories; ++i)
    if (i != skip && bytes[i] > 0)
      out += fmt::format("{}{} {}", out.empty() ? "" : ", ", kCategoryNames[i],
                         FormatBytes(static_cast<uint64_t>(bytes[i])));
  return out;
}

const TorchMoment* TorchMemory::Find(std::string_view kind) const {
  for (const TorchMoment& m : moments)
    if (m.Is(kind)) return &m;
  return nullptr;
}

std::optional<TorchMemory> ParseTorchMemory(std::string_view mark) {
  if (!mark.starts_with(kTorchMemoryMark)) return std::nullopt;
  mark.remove_prefix(kTorchMemoryMark.size());
  const Json j = Json::parse(mark.begin(), mark.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || Int(j, "v") != 1) return std::nullopt;
  TorchMemory t;
  const int64_t dev = Int(j, "device");
  if (dev > UINT16_MAX) return std::nullopt;
  t.device = static_cast<uint16_t>(dev);
  t.when = Str(j, "when");
  t.alloc_conf = Str(j, "alloc_conf", 256);
  t.t_ns = Ns(Int(j, "now_us"));
  t.max_allocated = Int(j, "max_allocated");
  t.max_reserved = Int(j, "max_reserved");
  t.allocated = Int(j, "allocated");
  t.reserved = Int(j, "reserved");
  t.inactive_split = Int(j, "inactive_split");
  t.requested = Int(j, "requested");
  t.replayed_max_allocated = Int(j, "replayed_max_allocated");
  t.replayed_max_reserved = Int(j, "replayed_max_reserved");
  t.expandable_max_reserved = Int(j, "expandable_max_reserved");
  const auto complete = j.find("complete");
  t.complete = complete != j.end() && complete->is_boolean() && complete->get<bool>();
  t.entries = static_cast<uint64_t>(Int(j, "entries"));
  t.windows = static_cast<uint64_t>(Int(j, "windows"));
  t.unrecorded_steps = static_cast<uint64_t>(Int(j, "unrecorded_steps"));
  t.optimizer_steps = static_cast<uint64_t>(Int(j, "optimizer_steps"));
  t.backward_passes = static_cast<uint64_t>(Int(j, "backward_passes"));
  t.steps_total = static_cast<uint64_t>(Int(j, "steps_total"));
  if (const auto s = j.find("steps"); s != j.end() && s->is_array())
    for (const Json& x : *s) {
      if (t.steps.size() == kMaxSteps) break;
      if (x.is_number_integer()) t.steps.push_back(std::max<int64_t>(0, x.get<int64_t>()));
    }
  if (const auto s = j.find("segments"); s != j.end() && s->is_array())
    for (const Json& x : *s) {
      if (t.segments.size() == kMaxSegments) break;
      if (x.is_array() && x.size() == 2 && x[0].is_number_unsigned() && x[1].is_number_unsigned())
        t.segments.emplace_back(x[0].get<uint64_t>(), x[1].get<uint64_t>());
    }
  if (const auto m = j.find("moments"); m != j.end() && m->is_array())
    for (const Json& x : *m) {
      if (t.moments.size() == kMaxMoments) break;
      if (x.is_object()) t.moments.push_back(Moment(x));
    }
  return t;
}

namespace detail {

void JoinTorchMemory(MemoryState& s, const std::vector<TorchMemory>& torch) {
  const MemoryOwner* lib = TorchOwner(s);
  if (lib == nullptr) return;
  // The moment of the same process and device whose reserved bytes are what CUPTI saw the
  // allocator hold, nearest in time. One that holds other bytes (a history that lost that part)
  // says nothing about these: no split then.
  const TorchMoment* best = nullptr;
  uint64_t best_dt = UINT64_MAX;
  for (const TorchMemory& t : torch) {
    if (t.pid != s.pid || t.device != s.device) continue;
    for (const TorchMoment& m : t.moments) {
      const uint64_t dt = m.t_ns > s.t_ns ? m.t_ns - s.t_ns : s.t_ns - m.t_ns;
      if (m.reserved == lib->live_bytes && dt < best_dt) {
        best = &m;
        best_dt = dt;
      }
    }
  }
  if (best == nullptr) return;
  s.torch_moment = best->kind;
  s.torch_matched = true;
  for (const MemoryOwner& o : s.by_library)
    if (&o != lib) s.by_owner.push_back(o);
  const std::string tag = " (PyTorch)";
  for (size_t i = 0; i < kTorchCategories; ++i) {
    if (best->bytes[i] <= 0) continue;
    MemoryOwner o;
    o.name = std::string(kCategoryNames[i]) + tag;
    o.live_bytes = best->bytes[i];
    s.by_owner.push_back(std::move(o));
  }
  MemoryOwner cached;
  cached.name = "cached, unused (PyTorch caching allocator)";
  cached.live_bytes = std::max<int64_t>(0, best->reserved - best->allocated);
  if (cached.live_bytes > 0) s.by_owner.push_back(std::move(cached));
  std::stable_sort(
      s.by_owner.begin(), s.by_owner.end(), [](const MemoryOwner& a, const MemoryOwner& b) {
        return a.live_bytes != b.live_bytes ? a.live_bytes > b.live_bytes : a.name < b.name;
      });
}

}  // namespace detail
}  // namespace kprof
