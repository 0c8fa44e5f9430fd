// Attribution: GPU activity -> launching API call (correlation id) -> NVTX/CPU ranges open on
// the launching thread when the call began. Kernels replayed from a CUDA graph carry the
// correlation id of the graph launch, so they land in the ranges around cudaGraphLaunch.
#include <algorithm>
#include <charconv>
#include <unordered_map>

#include "kprof/analysis.h"
#include "kprof/timeline.h"

namespace kprof {

void CorrelationIndex::Build(const ProcessTrace& p) {
  uint32_t max_id = 0;
  size_t calls = 0;
  for (const Record& r : p.records) {
    if (r.Kind() != RecordKind::RuntimeApi && r.Kind() != RecordKind::DriverApi) continue;
    max_id = std::max(max_id, r.correlation);
    ++calls;
  }
  dense_.clear();
  sparse_.clear();
  const bool dense = uint64_t{max_id} <= 4 * uint64_t{calls} + 4096;
  if (dense) dense_.assign(size_t{max_id} + 1, nullptr);
  for (const Record& r : p.records) {
    bool runtime = r.Kind() == RecordKind::RuntimeApi;
    if ((!runtime && r.Kind() != RecordKind::DriverApi) || r.correlation == 0) continue;
    const Record*& slot = dense ? dense_[r.correlation] : sparse_[r.correlation];
    if (slot == nullptr || runtime) slot = &r;
  }
}

namespace {

// The push of an on-demand window's first step, if CUPTI recorded it after all, lies this close
// to the window's opening (the window opens inside that push's callback).
constexpr uint64_t kFirstStepSlackNs = 50'000;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

/// PyTorch's autograd sequence number of an op range: kprof's op observer keeps it in a Range
/// record's `d` (plus one); PyTorch's NVTX mode appends ", seq = N" to the name. -1 for none.
int64_t SeqOf(const Record& start, std::string_view name) {
  if (start.Kind() == RecordKind::Range && start.d != 0) return int64_t{start.d} - 1;
  constexpr std::string_view kSeq = ", seq = ";
  const size_t at = name.find(kSeq);
  if (at == std::string_view::npos) return -1;
  int64_t v = -1;
  for (size_t i = at + kSeq.size(); i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) {
    v = (v < 0 ? 0 : v) * 10 + (name[i] - '0');
    if (v > (int64_t{1} << 53)) return -1;  // no counter gets there: not a sequence number
  }
  return v;
}

/// Autograd: which backward node each op range runs in, and which forward op made each node
/// (docs/pytorch.md, "Backward attributed to forward").
void LinkBackward(ProcessIndex& ix) {
  constexpr std::string_view kEvaluate = "autograd::engine::evaluate_function: ";
  const size_t n = ix.ranges.size();
  bool any = false;
  for (size_t i = 0; i < n && !any; ++i) any = StartsWith(ix.Name(i), kEvaluate);
  if (!any) return;
  ix.backward_node.assign(n, -1);
  ix.creator.assign(n, -1);
  // Parents come before their children (sorted by thread, begin, longer first).
  for (size_t i = 0; i < n; ++i) {
    const int parent = ix.ranges[i].parent;
    if (parent < 0) continue;
    if (StartsWith(ix.Name(static_cast<size_t>(parent)), kEvaluate))
      ix.backward_node[i] = static_cast<int>(i);
    else
      ix.backward_node[i] = ix.backward_node[static_cast<size_t>(parent)];
  }
  // Forward ops by (sequence number, begin): a node's creator is the last one begun before the
  // node with its number. Ops a node runs are not candidates.
  struct Fwd {
    int64_t seq;
    uint64_t begin;
    int index;
  };
  std::vector<Fwd> fwd;
  for (size_t i = 0; i < n; ++i) {
    if (ix.backward_node[i] >= 0) continue;
    const int64_t seq =
        SeqOf(*ix.ranges[i].start, ix.process->strings.Get(ix.ranges[i].start->name));
    if (seq >= 0) fwd.push_back({seq, ix.ranges[i].begin_ns, static_cast<int>(i)});
  }
  const auto earlier = [](const Fwd& a, const Fwd& b) {
    return a.seq != b.seq ? a.seq < b.seq : a.begin < b.begin;
  };
  std::sort(fwd.begin(), fwd.end(), earlier);
  for (size_t i = 0; i < n; ++i) {
    if (ix.backward_node[i] != static_cast<int>(i)) continue;
    const int64_t seq =
        SeqOf(*ix.ranges[i].start, ix.process->strings.Get(ix.ranges[i].start->name));
    if (seq < 0) continue;
    const uint64_t begin = ix.ranges[i].begin_ns;
    auto it = std::lower_bound(fwd.begin(), fwd.end(), Fwd{seq, begin, 0}, earlier);
    if (it == fwd.begin()) continue;
    --it;
    if (it->seq == seq) ix.creator[i] = it->index;
  }
}

/// Library ranges inside PyTorch's ops (ProcessIndex::owner): a range in a named NVTX domain
/// (CUB's "CCCL" inside aten::embedding_dense_backward, NCCL's) whose enclosing range is a
/// PyTorch op, or another such library range, belongs to that op.
void OwnLibraryRanges(ProcessIndex& ix) {
  const ProcessTrace& p = *ix.process;
  uint32_t cpu_op = 0;  // the string id of PyTorch's op domain, when the process has one
  for (uint32_t id = 1; id < p.strings.size() && cpu_op == 0; ++id)
    if (p.strings.Get(id) == kCpuOpDomain) cpu_op = id;
  const auto library = [&](size_t i) {
    const Record& r = *ix.ranges[i].start;
    return r.Kind() == RecordKind::MarkerStart && r.b != 0;
  };
  // A PyTorch op, not a user scope (record_function's ranges are the program's, whatever runs
  // inside them): kprof's observer and PyTorch's traces put ops and autograd nodes in "cpu_op";
  // PyTorch's NVTX mode gives every range ", op_id = N", ops a qualified name (aten::mm).
  const auto torch_op = [&](size_t i) {
    const Record& r = *ix.ranges[i].start;
    if (r.Kind() == RecordKind::Range) return cpu_op != 0 && r.b == cpu_op;
    if (r.Kind() != RecordKind::MarkerStart || r.b != 0) return false;
    const std::string& name = p.strings.Get(r.name);
    return name.find(", op_id = ") != std::string::npos &&
           ix.Name(i).find("::") != std::string_view::npos;
  };
  const size_t n = ix.ranges.size();
  bool any = false;
  for (size_t i = 0; i < n && !any; ++i) any = library(i) && ix.ranges[i].parent >= 0;
  if (!any) return;
  ix.owner.resize(n);
  // Parents come before their children (sorted by thread, begin, longer first).
  for (size_t i = 0; i < n; ++i) {
    ix.owner[i] = static_cast<int>(i);
    const int parent = ix.ranges[i].parent;
    if (parent < 0 || !library(i)) continue;
    const int op = ix.owner[static_cast<size_t>(parent)];
    if (torch_op(static_cast<size_t>(op))) ix.owner[i] = op;
  }
}

/// A range torch.compile opens around compiling: Dynamo's and Inductor's compile entry points
/// (each also opened as "NAME (dynamo_timed)"), and Inductor's autotuning of a kernel's
/// configurations at its first launch. Not every "(dynamo_timed)" range is compilation:
/// "CUDAGraphNode.record", for one, records a CUDA graph of compiled code.
bool IsCompilePhase(std::string_view name) {
  constexpr std::string_view kTimed = " (dynamo_timed)";
  if (name.size() > kTimed.size() && name.substr(name.size() - kTimed.size()) == kTimed)
    name.remove_suffix(kTimed.size());
  for (std::string_view phase : {"entire_frame_compile", "entire_backward_compile",
                                 "_compile.compile_inner", "backend_compile", "inductor_compile",
                                 "compile_fx_inner", "CachingAutotuner.benchmark_all_configs"})
    if (name == phase) return true;
  return false;
}

/// torch.compile: which compiled code each op range runs in (docs/pytorch.md, "Compiled
/// code"). Needs LinkBackward's links: a backward graph belongs to the frame of its forward.
void LinkCompiled(ProcessIndex& ix) {
  constexpr std::string_view kGraph = "## Call CompiledFxGraph ";
  constexpr std::string_view kFrame = "Torch-Compiled Region: ";
  const size_t n = ix.ranges.size();
  bool any = false;
  for (size_t i = 0; i < n && !any; ++i) {
    const std::string_view name = ix.Name(i);
    any = StartsWith(name, kGraph) || IsCompilePhase(name);
  }
  if (!any) return;
  ix.region_of.assign(n, -1);
  ix.regions = {std::string(kCompilingRegion)};
  std::vector<int> frame(n, -1), graph(n, -1);  // nearest enclosing range of each kind
  for (size_t i = 0; i < n; ++i) {              // parents come first
    const std::string_view name = ix.Name(i);
    const int parent = ix.ranges[i].parent;
    const auto up = static_cast<size_t>(parent);
    if (parent >= 0) {
      frame[i] = frame[up];
      graph[i] = graph[up];
      if (ix.region_of[up] == ProcessIndex::kCompiling) ix.region_of[i] = ProcessIndex::kCompiling;
    }
    if (StartsWith(name, kFrame)) frame[i] = static_cast<int>(i);
    if (StartsWith(name, kGraph)) graph[i] = static_cast<int>(i);
    if (IsCompilePhase(name)) ix.region_of[i] = ProcessIndex::kCompiling;
  }
  // Then the regions: a backward graph's forward may be on a thread sorted after its own.
  std::unordered_map<std::string, int> by_name;
  for (size_t i = 0; i < n; ++i) {
    if (ix.region_of[i] == ProcessIndex::kCompiling || graph[i] < 0) continue;
    // The frame: the forward's own, or for a backward graph the one of the forward op that
    // made its autograd node.
    const bool backward = ix.InBackward(static_cast<int>(i));
    int f = frame[i];
    if (backward) {
      const int fwd = ix.ForwardOf(static_cast<int>(i));
      f = fwd >= 0 ? frame[static_cast<size_t>(fwd)] : -1;
    }
    std::string label = "compiled ";
    if (f >= 0) {
      label += ix.Name(static_cast<size_t>(f)).substr(kFrame.size());
    } else {  // a compiled graph called outside a Dynamo frame: its cache key
      std::string_view key = ix.Name(static_cast<size_t>(graph[i])).substr(kGraph.size());
      label += "graph " + std::string(key.substr(0, std::min<size_t>(key.find(' '), 8)));
    }
    label += backward ? " backward" : " forward";
    auto [it, fresh] = by_name.try_emplace(label, static_cast<int>(ix.regions.size()));
    if (fresh) ix.regions.push_back(label);
    ix.region_of[i] = it->second;
  }
}

}  // namespace

void RangeForest::Nest() {
  std::sort(ranges.begin(), ranges.end(), [](const RangeInterval& a, const RangeInterval& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.begin_ns != b.begin_ns) return a.begin_ns < b.begin_ns;
    if (a.end_ns != b.end_ns) return a.end_ns > b.end_ns;  // the longer one encloses
    return a.start < b.start;
  });
  // Depth and parent: a stack sweep per thread.
  thread_slice.clear();
  std::vector<int> stack;
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto& r = ranges[i];
    if (i == 0 || ranges[i - 1].tid != r.tid) {
      stack.clear();
      if (i > 0) thread_slice[ranges[i - 1].tid].second = i;
      thread_slice[r.tid] = {i, ranges.size()};
    }
    while (!stack.empty() && ranges[static_cast<size_t>(stack.back())].end_ns <= r.begin_ns)
      stack.pop_back();
    r.depth = static_cast<uint32_t>(stack.size());
    r.parent = stack.empty() ? -1 : stack.back();
    stack.push_back(static_cast<int>(i));
  }
}

ProcessIndex BuildIndex(const ProcessTrace& p) {
  ProcessIndex ix;
  ix.process = &p;
  std::unordered_map<uint32_t, const Record*> open_markers;  // marker id -> MarkerStart
  ix.api_by_correlation.Build(p);
  ix.op_names.resize(p.strings.size());
  for (size_t id = 0; id < ix.op_names.size(); ++id)
    ix.op_names[id] = OpName(p.strings.Get(static_cast<uint32_t>(id)));
  for (const Record& r : p.records) {
    ix.end_ns = std::max(ix.end_ns, std::max(r.start_ns, r.end_ns));
  }
  // The ranges of kprof's PyTorch layer go to their own sets; its mark says what it added.
  const auto add = [&](const RangeInterval& r) {
    const std::string_view name = p.strings.Get(r.start->name);
    if (!StartsWith(name, "kprof.")) {
      ix.ranges.push_back(r);
    } else if (StartsWith(name, kModuleRangePrefix)) {
      ix.modules.ranges.push_back(r);
    } else if (StartsWith(name, kSourceRangePrefix)) {
      ix.sources.ranges.push_back(r);
    } else if (StartsWith(name, kPyTorchMarkPrefix)) {
      // "MODE:ADDED[;op_ns=N;module_ns=N]": what it added and what that costs per call.
      std::string_view added = name.substr(kPyTorchMarkPrefix.size());
      const size_t semi = added.find(';');
      ix.pytorch_added = added.substr(0, semi);
      for (size_t at = semi; at != std::string_view::npos && at < added.size();) {
        const size_t end = added.find(';', at + 1);
        const std::string_view kv = added.substr(
            at + 1, end == std::string_view::npos ? std::string_view::npos : end - at - 1);
        const size_t eq = kv.find('=');
        double v = 0;
        const char* stop = kv.data() + kv.size();
        if (eq != std::string_view::npos &&
            std::from_chars(kv.data() + eq + 1, stop, v).ptr == stop && v >= 0 && v < 1e6) {
          if (kv.substr(0, eq) == "op_ns") ix.pytorch_op_ns = v;
          if (kv.substr(0, eq) == "module_ns") ix.pytorch_module_ns = v;
        }
        at = end;
      }
    } else {
      ix.ranges.push_back(r);
    }
  };
  // Pair NVTX markers by id (push/pop and start/end both carry one). Records of one thread are
  // in time order in the file, but buffers of different threads interleave: sort by time.
  std::vector<const Record*> markers;
  for (const Record& r : p.records)
    if (r.Kind() == RecordKind::MarkerStart || r.Kind() == RecordKind::MarkerEnd)
      markers.push_back(&r);
  std::stable_sort(markers.begin(), markers.end(),
                   [](const Record* a, const Record* b) { return a->start_ns < b->start_ns; });
  for (const Record* m : markers) {
    if (m->Kind() == RecordKind::MarkerStart) {
      open_markers[m->a] = m;
      continue;
    }
    auto it = open_markers.find(m->a);
    if (it == open_markers.end()) continue;  // end without start (started before recording)
    const Record* s = it->second;
    add({s, s->start_ns, std::max(s->start_ns, m->start_ns), s->tid, 0, -1, true});
    open_markers.erase(it);
  }
  for (const auto& [id, s] : open_markers)
    add({s, s->start_ns, std::max(s->start_ns, ix.end_ns), s->tid, 0, -1, false});
  for (const Record& r : p.records)
    if (r.Kind() == RecordKind::Range)
      add({&r, r.start_ns, std::max(r.start_ns, r.end_ns), r.tid, 0, -1, true});
  // A capture window opened by an NVTX range stands for that range, which CUPTI does not record
  // (the window opens inside its push and closes inside its pop: docs/capture.md), unless the
  // range was recorded after all (a push of the same name on that thread inside the window).
  // An on-demand window of steps (kprof capture --step-range) opens inside its first step's
  // push: that step runs from the window's opening to the next recorded push of the range,
  // unless the push itself was recorded (kprof's NVTX handlers hand it to CUPTI once the window
  // is open, switching the kinds on taking a while: then it is that thread's first push in the
  // window, and comes before the thread's first CUDA call there).
  for (const Record& w : p.records) {
    const auto trigger = static_cast<CaptureTrigger>(w.flags);
    if (w.Kind() != RecordKind::CaptureWindow || w.name == 0 ||
        (trigger != CaptureTrigger::Nvtx && trigger != CaptureTrigger::OnDemandSteps))
      continue;
    const bool steps = trigger == CaptureTrigger::OnDemandSteps;
    const uint64_t end = std::max(w.start_ns, w.end_ns);
    uint64_t until = end;
    bool recorded = false;
    const Record* first = nullptr;  // the thread's first push in the window
    for (const Record* m : markers) {
      if (m->Kind() != RecordKind::MarkerStart || m->tid != w.tid) continue;
      if (steps && m->start_ns + kFirstStepSlackNs >= w.start_ns && m->start_ns <= end &&
          (first == nullptr || m->start_ns < first->start_ns))
        first = m;
      if (m->name != w.name) continue;
      if (!steps) {
        recorded |= m->start_ns >= w.start_ns && m->start_ns <= end;
        continue;
      }
      recorded |= m->start_ns + kFirstStepSlackNs >= w.start_ns &&
                  m->start_ns <= w.start_ns + kFirstStepSlackNs;
      if (m->start_ns > w.start_ns) until = std::min(until, m->start_ns);
    }
    if (first != nullptr && first->name == w.name) {
      uint64_t call = end;  // the thread's first CUDA call in the window
      for (const Record& r : p.records)
        if ((r.Kind() == RecordKind::RuntimeApi || r.Kind() == RecordKind::DriverApi) &&
            r.tid == w.tid && r.start_ns >= w.start_ns)
          call = std::min(call, r.start_ns);
      recorded |= first->start_ns <= call;
    }
    if (!recorded) add({&w, w.start_ns, until, w.tid, 0, -1, true});
  }
  ix.Nest();
  ix.modules.Nest();
  ix.sources.Nest();
  OwnLibraryRanges(ix);
  LinkBackward(ix);
  LinkCompiled(ix);
  return ix;
}

std::string_view OpName(std::string_view range_name) {
  // PyTorch's emit_nvtx() appends ", seq = N", ", op_id = N", ", sizes = [...]" and
  // ", input_op_ids = [...]" to every aten op's name; without them the same op groups together.
  size_t cut = range_name.size();
  for (std::string_view key : {", seq = ", ", op_id = ", ", sizes = ", ", input_op_ids = "}) {
    cut = std::min(cut, range_name.find(key));
  }
  return range_name.substr(0, cut);
}

namespace {

/// The latest range of `tid` that began at or before `t`, or -1. The stack of ranges open when
/// it began is its parent chain (BuildIndex), and every range still open at t was on that stack.
int LatestBegunAt(const RangeForest& ix, uint32_t tid, uint64_t t) {
  auto it = ix.thread_slice.find(tid);
  if (it == ix.thread_slice.end()) return -1;
  auto [first, last] = it->second;
  // Ranges of this thread are sorted by begin: those that began at or before t.
  auto begin = ix.ranges.begin() + static_cast<long>(first);
  auto end = std::upper_bound(begin, ix.ranges.begin() + static_cast<long>(last), t,
                              [](uint64_t v, const RangeInterval& r) { return v < r.begin_ns; });
  return end == begin ? -1 : static_cast<int>(end - ix.ranges.begin()) - 1;
}

}  // namespace

void RangeForest::OpenAt(uint32_t tid, uint64_t t, std::vector<int>& out) const {
  out.clear();
  // Walk the parent chain of the latest range begun, keep those not yet ended.
  for (int k = LatestBegunAt(*this, tid, t); k >= 0; k = ranges[static_cast<size_t>(k)].parent)
    if (ranges[static_cast<size_t>(k)].end_ns > t) out.push_back(k);
  std::reverse(out.begin(), out.end());
}

int RangeForest::InnermostAt(uint32_t tid, uint64_t t) const {
  for (int k = LatestBegunAt(*this, tid, t); k >= 0; k = ranges[static_cast<size_t>(k)].parent)
    if (ranges[static_cast<size_t>(k)].end_ns > t) return k;
  return -1;
}

std::string ProcessIndex::Path(int i) const {
  std::vector<int> chain;
  for (int k = i; k >= 0; k = ranges[static_cast<size_t>(k)].parent) chain.push_back(k);
  std::string path;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (!path.empty()) path += '/';
    path += Name(static_cast<size_t>(*it));
  }
  return path;
}

std::vector<Attributed> Attribute(const Timeline& tl) {
  std::vector<Attributed> out;
  std::vector<int> open;
  for (const ProcessTimeline& t : tl.processes) {
    size_t first = out.size();
    for (const Record& r : t.process->records) {
      if (!IsGpuActivity(r.Kind())) continue;
      Attributed a;
      a.process = t.process;
      a.activity = &r;
      a.api = t.Api(r);
      // Work inside a graph whose node is known: the ranges open where the node was captured.
      const Record* made = nullptr;
      if (const uint64_t node = GraphNodeOf(r); node != 0) {
        auto it = t.graphs.made.find(node);
        if (it != t.graphs.made.end() && t.graphs.CaptureRange(node) >= 0) made = it->second;
      }
      if (made != nullptr) {
        t.index.OpenAt(made->tid, made->start_ns, open);
      } else if (a.api != nullptr) {
        t.index.OpenAt(a.api->tid, a.api->start_ns, open);
      } else {
        open.clear();
      }
      for (int i : open) a.ranges.push_back(t.index.ranges[static_cast<size_t>(i)].start);
      out.push_back(std::move(a));
    }
    std::stable_sort(out.begin() + static_cast<long>(first), out.end(),
                     [](const Attributed& x, const Attributed& y) {
                       return x.activity->start_ns < y.activity->start_ns;
                     });
  }
  return out;
}

}  // namespace kprof
