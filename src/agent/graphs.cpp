// CUDA graphs: the graph resource callbacks. When a program builds a graph (stream capture or the
// graph API), instantiates or clones one, CUPTI calls back on the thread doing it; the agent
// writes down what was made, with a timestamp and that thread's id, as GraphNode and GraphEvent
// records. The reader puts each node inside the NVTX ranges open on that thread at that moment:
// that is what attributes a replayed kernel to the op that captured it (docs/analysis.md,
// "CUDA graphs"). Nothing here blocks: one short lock per node, taken only while graphs are built.
// Each record's end_ns is when the agent was done with it: its own cost, kept apart from the
// program's.
#include <cuda.h>
#include <cupti.h>
#include <pthread.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "agent/agent.h"

namespace kprof::agent {
namespace {

// Graph resource callbacks kprof uses, enabled one by one (never a whole domain: a subscriber
// to whole domains made a 1000-node graph launch cost 0.48 ms, CUPTI-NOTES.md).
constexpr CUpti_CallbackId kGraphCallbacks[] = {
    CUPTI_CBID_RESOURCE_GRAPH_CREATED,     CUPTI_CBID_RESOURCE_GRAPH_CLONED,
    CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED,
    CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING,
};

// A driver call the agent makes itself: a failure is logged once per call site.
bool CheckCu(CUresult r, const char* call, const char* file, int line) {
  if (r == CUDA_SUCCESS) return true;
  const char* msg = nullptr;
  if (cuGetErrorString(r, &msg) != CUDA_SUCCESS || msg == nullptr) msg = "unknown error";
  LogFailureOnce(call, "read a CUDA graph's properties (its record lacks them)", msg,
                 static_cast<int>(r), file, line);
  return false;
}

uint32_t GraphId(CUgraph g) {
  uint32_t id = 0;
  if (g != nullptr) KPROF_CUPTI(cuptiGetGraphId(g, &id), "read a CUDA graph's id");
  return id;
}
uint64_t NodeId(CUgraphNode n) {
  uint64_t id = 0;
  if (n != nullptr) KPROF_CUPTI(cuptiGetGraphNodeId(n, &id), "read a CUDA graph node's id");
  return id;
}
uint32_t ExecId(CUgraphExec e) {
  uint32_t id = 0;
  if (e != nullptr) KPROF_CUPTI(cuptiGetGraphExecId(e, &id), "read an executable graph's id");
  return id;
}

// The kernel a kernel node launches, read through the driver (graph mode only: there, no
// per-node record will name it). KPROF_GRAPH_NAMES=0 turns this off.
std::string KernelNodeName(CUgraphNode node) {
  CUDA_KERNEL_NODE_PARAMS p{};
  if (cuGraphKernelNodeGetParams(node, &p) != CUDA_SUCCESS) return {};
  const char* name = nullptr;
  if (p.func != nullptr) {
    if (cuFuncGetName(&name, p.func) != CUDA_SUCCESS) name = nullptr;
  } else if (p.kern != nullptr) {
    if (cuKernelGetName(&name, p.kern) != CUDA_SUCCESS) name = nullptr;
  }
  return name != nullptr ? std::string(name) : std::string();
}

bool NamesWanted() { return Knobs().graph_names; }

Record Instant(RecordKind kind, uint8_t flags) {
  Record r;
  r.kind = static_cast<uint8_t>(kind);
  r.flags = flags;
  r.device = kNoDevice;
  uint64_t ts = 0;
  cuptiGetTimestamp(&ts);  // a failure leaves 0: the reader keeps the record unplaced
  r.start_ns = r.end_ns = ts;
  r.tid = CuptiThreadId();
  return r;
}

// Pushes a record made by Instant() at the start of a callback, with end_ns = when it is
// stored: the agent's own time in the callback (format 1.2), which the analysis does not price
// as the program's (graph-recapture).
void Push(Record r, std::string name = {}) {
  Agent& a = A();
  std::lock_guard<std::mutex> lock(a.side_mu);
  a.side.push_back({r, std::move(name), {}, {}});
  uint64_t ts = 0;
  if (r.start_ns != 0 && cuptiGetTimestamp(&ts) == CUPTI_SUCCESS && ts > r.start_ns)
    a.side.back().rec.end_ns = ts;
}

}  // namespace

bool EnableGraphCallbacks(CUpti_SubscriberHandle subscriber) {
  bool ok = true;
  for (CUpti_CallbackId id : kGraphCallbacks) {
    // Which node of the template each node of an executable graph was cloned from matters only
    // where its work is recorded per node (node mode). With graph-level tracing the executable
    // graph's ranges are its template's (its ExecCreated event names the template), and the
    // clone callbacks, one per node at every instantiation, would cost the program for nothing.
    if (id == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED && A().graph_level) continue;
    ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, id),
                      "watch CUDA graphs being built (graph kernels will not be put in their ops)");
  }
  return ok;
}

bool OnGraphCallback(CUpti_CallbackId cbid, const void* data) {
  bool ours = false;
  for (CUpti_CallbackId id : kGraphCallbacks) ours |= id == cbid;
  if (!ours) return false;
  if (!A().active || data == nullptr) return true;
  const auto* rd = static_cast<const CUpti_ResourceData*>(data);
  const auto* g = static_cast<const CUpti_GraphData*>(rd->resourceDescriptor);
  if (g == nullptr) return true;
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED:
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED: {
      const bool cloned = cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED;
      Record r = Instant(
          RecordKind::GraphNode,
          static_cast<uint8_t>(cloned ? GraphNodeOrigin::Cloned : GraphNodeOrigin::Created));
      r.bytes = NodeId(g->node);
      r.a = GraphId(g->graph);
      r.e = static_cast<uint32_t>(g->nodeType);
      std::string name;
      if (cloned) {
        r.b = GraphId(g->originalGraph);
        const uint64_t orig = NodeId(g->originalNode);
        r.c = static_cast<uint32_t>(orig);
        r.d = static_cast<uint32_t>(orig >> 32);
      } else if (A().graph_level && NamesWanted() && g->nodeType == CU_GRAPH_NODE_TYPE_KERNEL) {
        name = KernelNodeName(g->node);
      }
      Push(r, std::move(name));
      break;
    }
    case CUPTI_CBID_RESOURCE_GRAPH_CREATED: {
      Record r =
          Instant(RecordKind::GraphEvent, static_cast<uint8_t>(GraphEventKind::GraphCreated));
      r.a = GraphId(g->graph);
      Push(r);
      break;
    }
    case CUPTI_CBID_RESOURCE_GRAPH_CLONED: {
      Record r = Instant(RecordKind::GraphEvent, static_cast<uint8_t>(GraphEventKind::GraphCloned));
      r.a = GraphId(g->graph);
      r.b = GraphId(g->originalGraph);
      Push(r);
      break;
    }
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED: {
      Record r = Instant(RecordKind::GraphEvent, static_cast<uint8_t>(GraphEventKind::ExecCreated));
      r.a = ExecId(g->graphExec);
      r.b = GraphId(g->graph);
      // How it was instantiated: a graph made for device launch runs where node-level tracing
      // cannot see it (CUPTI 13.0 records such launches only at graph level).
      cuuint64_t flags = 0;
      if (g->graphExec != nullptr && CheckCu(cuGraphExecGetFlags(g->graphExec, &flags),
                                             "cuGraphExecGetFlags", __FILE__, __LINE__))
        r.c = static_cast<uint32_t>(flags);
      else
        r.d = 1;
      Push(r);
      break;
    }
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING: {
      Record r =
          Instant(RecordKind::GraphEvent, static_cast<uint8_t>(GraphEventKind::ExecDestroyed));
      r.a = ExecId(g->graphExec);
      Push(r);
      break;
    }
    default:
      break;
  }
  return true;
}

}  // namespace kprof::agent
