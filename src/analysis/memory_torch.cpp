// PyTorch's categories (include/kprof/memory.h, docs/memory.md "PyTorch's categories"): the
// payloads kprof's PyTorch layer writes as NVTX marks, read back, and joined with the driver-level
// owners so that the caching allocator's share is split into what its blocks held.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "analysis/accumulators.h"
#include "analysis/views/view.h"
#include "kprof/analysis.h"
#include "kprof/memory.h"
#include "kprof/timeline.h"

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

// One listed block, [t0_us or null, bytes] or with its category [t0_us or null, bytes, "category"]
// (an unknown category, and every block listed without one, counts as other tensors); nothing
// when malformed.
std::optional<StepEndBlock> Block(const Json& x, bool with_category) {
  if (!x.is_array() || x.size() != (with_category ? 3u : 2u) || !x[1].is_number_integer() ||
      (with_category && !x[2].is_string()))
    return std::nullopt;
  StepEndBlock b;
  if (x[0].is_number_integer()) b.t_ns = Ns(std::max<int64_t>(0, x[0].get<int64_t>()));
  b.bytes = std::max<int64_t>(0, x[1].get<int64_t>());
  b.category = kTorchCategories - 1;
  if (with_category) {
    const std::string key = x[2].get<std::string>();
    for (size_t i = 0; i < kTorchCategories; ++i)
      if (key == kCategoryKeys[i]) b.category = static_cast<uint8_t>(i);
  }
  return b;
}

TorchMoment Moment(const Json& m) {
  TorchMoment t;
  t.kind = Str(m, "kind");
  t.t_ns = Ns(Int(m, "t_us"));
  t.allocated = Int(m, "allocated");
  t.reserved = Int(m, "reserved");
  t.kept = Int(m, "kept");
  if (const auto k = m.find("kept_blocks"); k != m.end() && k->is_array())
    for (const Json& x : *k) {
      if (t.kept_blocks.size() == kMaxLargest) break;
      if (const auto b = Block(x, false)) t.kept_blocks.push_back(*b);
    }
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

// Bounds on the step-end blocks and dtypes a payload may carry (the layer lists 256 blocks).
constexpr size_t kMaxStepEndBlocks = 1024, kMaxDtypes = 32;

void ParseStepEnd(const Json& j, TorchMemory& t) {
  const auto e = j.find("step_end");
  if (e == j.end() || !e->is_object()) return;
  t.step_end_t_ns = Ns(Int(*e, "t_us"));
  t.step_end_rest_bytes = Int(*e, "rest_bytes");
  t.step_end_rest_blocks = static_cast<uint64_t>(Int(*e, "rest_blocks"));
  t.step_end_live_bytes = t.step_end_rest_bytes;
  const auto b = e->find("blocks");
  if (b == e->end() || !b->is_array()) return;
  for (const Json& x : *b) {
    if (t.step_end.size() == kMaxStepEndBlocks) break;
    const auto blk = Block(x, true);
    if (!blk) continue;
    t.step_end.push_back(*blk);
    detail::SatAdd(t.step_end_live_bytes, blk->bytes);
  }
}

void ParseDtypes(const Json& j, TorchMemory& t) {
  const auto d = j.find("dtypes");
  if (d == j.end() || !d->is_object()) return;
  for (size_t c = 0; c < kDtypeCategories; ++c) {
    const auto by = d->find(std::string(kCategoryKeys[c]));
    if (by == d->end() || !by->is_object()) continue;
    auto& out = t.dtypes[c];
    for (const auto& [name, bytes] : by->items()) {
      if (out.size() == kMaxDtypes) break;
      if (bytes.is_number_integer())
        out.emplace_back(name.substr(0, 32), std::max<int64_t>(0, bytes.get<int64_t>()));
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
  }
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

int64_t TorchMemory::DtypeBytes(size_t c, std::string_view dtype) const {
  if (c >= kDtypeCategories) return 0;
  for (const auto& [name, bytes] : dtypes[c])
    if (name == dtype) return bytes;
  return 0;
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
  ParseStepEnd(j, t);
  ParseDtypes(j, t);
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
  const TorchMemory* from = nullptr;
  uint64_t best_dt = UINT64_MAX;
  for (const TorchMemory& t : torch) {
    if (t.pid != s.pid || t.device != s.device) continue;
    for (const TorchMoment& m : t.moments) {
      const uint64_t dt = m.t_ns > s.t_ns ? m.t_ns - s.t_ns : s.t_ns - m.t_ns;
      if (m.reserved == lib->live_bytes && dt < best_dt) {
        best = &m;
        from = &t;
        best_dt = dt;
      }
    }
  }
  if (best == nullptr) return;
  s.torch_moment = best->kind;
  s.torch_t_ns = from->t_ns;
  s.torch_moment_index = static_cast<size_t>(best - from->moments.data());
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

namespace {
// The range open at `t` that began last, on any thread of `f` (-1 when none).
int OpenLastAt(const RangeForest& f, uint64_t t) {
  int best = -1;
  for (const auto& [tid, slice] : f.thread_slice) {
    const int r = f.InnermostAt(tid, t);
    if (r >= 0 && (best < 0 || f.ranges[static_cast<size_t>(r)].begin_ns >
                                   f.ranges[static_cast<size_t>(best)].begin_ns))
      best = r;
  }
  return best;
}
// Ops that only allocate: a block made inside one (aten::empty_strided inside aten::_to_copy) is
// the enclosing op's.
bool OnlyAllocates(std::string_view op) {
  return op == "aten::empty" || op == "aten::empty_strided" || op == "aten::empty_like" ||
         op == "aten::new_empty" || op == "aten::new_empty_strided" || op == "aten::resize_";
}
}  // namespace

namespace {
// `blocks` (and `rest_blocks` more of `rest_bytes`) by the op and module open when each was
// made, most bytes first, at most kStepEndOwners.
std::vector<StepEndOwner> ByOp(const ProcessTimeline& t, const std::vector<StepEndBlock>& blocks,
                               int64_t rest_bytes, uint64_t rest_blocks) {
  const ProcessIndex& ix = t.index;
  std::map<std::tuple<std::string, std::string, uint8_t>, StepEndOwner> by;
  const auto add = [&](std::string op, std::string module, uint8_t category, int64_t bytes,
                       uint64_t n) {
    StepEndOwner& o = by[{op, module, category}];
    o.op = std::move(op);
    o.module = std::move(module);
    o.category = category;
    detail::SatAdd(o.bytes, bytes);
    o.blocks += n;
  };
  for (const StepEndBlock& b : blocks) {
    if (b.t_ns == 0) {
      add(std::string(kOpBeforeWindow), "", b.category, b.bytes, 1);
      continue;
    }
    // The layer's times are whole µs, rounded down: the last ns of that µs, so that an
    // allocation in the µs an op began is the op's.
    const uint64_t at = b.t_ns > UINT64_MAX - 999 ? b.t_ns : b.t_ns + 999;
    int r = ix.Owner(OpenLastAt(ix, at));
    while (r >= 0 && OnlyAllocates(ix.Name(static_cast<size_t>(r)))) {
      const int up = ix.ranges[static_cast<size_t>(r)].parent;
      if (up < 0 || !ix.Name(static_cast<size_t>(up)).starts_with("aten::")) break;
      r = up;  // an aten op around it (not the program's own range)
    }
    const int m = OpenLastAt(ix.modules, at);
    std::string module;
    if (m >= 0 && t.process != nullptr)
      module =
          std::string(SplitModuleName(t.process->strings.Get(
                                          ix.modules.ranges[static_cast<size_t>(m)].start->name))
                          .first);
    add(r < 0 ? std::string(kOpNoRange) : std::string(ix.Name(static_cast<size_t>(r))),
        std::move(module), b.category, b.bytes, 1);
  }
  if (rest_blocks > 0)
    add(std::string(kOpSmallerBlocks), "", kTorchCategories - 1, rest_bytes, rest_blocks);
  std::vector<StepEndOwner> out;
  for (auto& [key, o] : by) out.push_back(std::move(o));
  std::stable_sort(out.begin(), out.end(),
                   [](const StepEndOwner& a, const StepEndOwner& b) { return a.bytes > b.bytes; });
  if (out.size() > kStepEndOwners) out.resize(kStepEndOwners);
  return out;
}
}  // namespace

void StepEndByOp(const ProcessTimeline& t, TorchMemory& tm) {
  tm.step_end_by_op = ByOp(t, tm.step_end, tm.step_end_rest_bytes, tm.step_end_rest_blocks);
  for (TorchMoment& m : tm.moments)
    if (!m.kept_blocks.empty()) m.kept_by_op = ByOp(t, m.kept_blocks, 0, 0);
}

}  // namespace detail
}  // namespace kprof
