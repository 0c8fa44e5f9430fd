// The NVTX callbacks of the capture windows, decoded once (capture_internal.h, DecodeNvtx): the
// message of a push or start, its domain, and each thread's push depth per domain.
#include <cupti.h>
#include <generated_nvtx_meta.h>

#include <atomic>
#include <cstdint>
#include <unordered_map>

#include "agent/agent.h"
#include "agent/capture_internal.h"

namespace kprof::agent::capture {

namespace {

// The message of an NVTX push or start, when it is ASCII (other kinds never match a name).
const char* NvtxMessage(CUpti_CallbackId cbid, const void* params, const void** domain) {
  const nvtxEventAttributes_t* attr = nullptr;
  switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA:
      return static_cast<const nvtxRangePushA_params*>(params)->message;
    case CUPTI_CBID_NVTX_nvtxRangeStartA:
      return static_cast<const nvtxRangeStartA_params*>(params)->message;
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
      attr = static_cast<const nvtxRangePushEx_params*>(params)->eventAttrib;
      break;
    case CUPTI_CBID_NVTX_nvtxRangeStartEx:
      attr = static_cast<const nvtxRangeStartEx_params*>(params)->eventAttrib;
      break;
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
      const auto* p = static_cast<const nvtxDomainRangePushEx_params*>(params);
      *domain = p->domain;
      attr = p->core.eventAttrib;
      break;
    }
    case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx: {
      const auto* p = static_cast<const nvtxDomainRangeStartEx_params*>(params);
      *domain = p->domain;
      attr = p->core.eventAttrib;
      break;
    }
    default:
      return nullptr;
  }
  if (attr == nullptr || attr->messageType != NVTX_MESSAGE_TYPE_ASCII) return nullptr;
  return attr->message.ascii;
}

// Each thread's push depth per NVTX domain (null: the default domain), since the attachment
// `t_depth_generation` (callbacks missed while CUPTI was detached leave nothing behind).
thread_local std::unordered_map<const void*, int> t_depth;
thread_local uint64_t t_depth_generation = 0;

}  // namespace

std::atomic<uint64_t> g_attachments{0};

namespace {

int& NvtxDepth(const void* domain) {
  const uint64_t now = g_attachments.load(std::memory_order_relaxed);
  if (t_depth_generation != now) {
    t_depth.clear();
    t_depth_generation = now;
  }
  return t_depth[domain];
}

}  // namespace

NvtxEvent DecodeNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData& d) {
  NvtxEvent e;
  switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA:
    case CUPTI_CBID_NVTX_nvtxRangePushW:
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
      e.kind = NvtxEvent::Kind::Push;
      e.message = NvtxMessage(cbid, d.functionParams, &e.domain);
      e.depth = NvtxDepth(e.domain)++;
      g_nvtx_ranges.fetch_add(1, std::memory_order_relaxed);
      break;
    case CUPTI_CBID_NVTX_nvtxRangePop:
    case CUPTI_CBID_NVTX_nvtxDomainRangePop: {
      e.kind = NvtxEvent::Kind::Pop;
      if (cbid == CUPTI_CBID_NVTX_nvtxDomainRangePop)
        e.domain = static_cast<const nvtxDomainRangePop_params*>(d.functionParams)->domain;
      int& depth = NvtxDepth(e.domain);
      if (depth > 0) --depth;
      e.depth = depth;
      break;
    }
    case CUPTI_CBID_NVTX_nvtxRangeStartA:
    case CUPTI_CBID_NVTX_nvtxRangeStartEx:
    case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx:
      e.kind = NvtxEvent::Kind::Start;
      e.message = NvtxMessage(cbid, d.functionParams, &e.domain);
      e.started = d.functionReturnValue;
      g_nvtx_ranges.fetch_add(1, std::memory_order_relaxed);
      break;
    case CUPTI_CBID_NVTX_nvtxRangeEnd:
      e.kind = NvtxEvent::Kind::End;
      e.end_id = static_cast<const nvtxRangeEnd_params*>(d.functionParams)->id;
      break;
    case CUPTI_CBID_NVTX_nvtxDomainRangeEnd:
      e.kind = NvtxEvent::Kind::End;
      e.end_id = static_cast<const nvtxDomainRangeEnd_params*>(d.functionParams)->core.id;
      break;
    default:
      break;
  }
  return e;
}

void SetOwner(State& s, const NvtxEvent& push) {
  s.owner_thread = CuptiThreadId();
  s.owner_domain = push.domain;
  s.owner_depth = push.depth;
}

bool OwnerReturned(const State& s, const NvtxEvent& pop) {
  return s.open && s.owner_depth >= 0 && s.owner_thread == CuptiThreadId() &&
         s.owner_domain == pop.domain && pop.depth <= s.owner_depth;
}

}  // namespace kprof::agent::capture
