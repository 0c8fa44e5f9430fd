// Issue 15's cause-specific advice on H100 recordings: host work after a wait is not a slow launch
// rate, and one-time set-up on a new shape inside a library op (cuDNN's attention plans, a kernel
// generated per shape) is priced by shape-setup with its own fix, estimated against what the
// set-ups measured without a profiler.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/" + name;
}

struct Recorded {
  Run run;
  std::vector<Hint> hints;
  size_t setup_gaps = 0;
};

Recorded Load(const std::string& name) {
  Recorded r{ReadInputs({Fixture(name)}), {}, 0};
  const Timeline tl = BuildTimeline(r.run);
  r.hints = ComputeHints(tl, Analyze(tl));
  for (const ProcessTimeline& p : tl.processes)
    for (const Gap& g : p.gaps) r.setup_gaps += g.kind == GapKind::Setup ? 1 : 0;
  return r;
}

const Hint* Find(const Recorded& r, const std::string& id) { return FindHint(r.hints, id); }

bool Mentions(const Hint& h, const std::string& text) {
  for (const std::string& e : h.evidence)
    if (e.find(text) != std::string::npos) return true;
  return false;
}

// kernels/hint_host_after_wait 300: a 50 us kernel, an event wait, 150 us of processing on the
// host. Once taken for a slow launch rate (launch-bound, CUDA graphs advised); the launches take
// 8 us and graphs would not remove the processing.
TEST(CauseRecordings, HostWorkAfterAWaitIsNotASlowLaunchRate) {
  const Recorded r = Load("hint_host_after_wait");
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "host-work-after-sync");
  EXPECT_EQ(h.severity, Severity::Critical);
  EXPECT_TRUE(Mentions(h, "after cudaEventSynchronize: 300 times")) << h.evidence[0];
  EXPECT_TRUE(Mentions(h, "of that work in NVTX range 'process_result'"));
  EXPECT_TRUE(Mentions(h, "the launch rate is not what is slow"));
  EXPECT_NE(h.fix_cuda.find("CUDA graphs would not help"), std::string::npos);
  EXPECT_EQ(h.fix_cuda.find("cudaStreamBeginCapture"), std::string::npos);
  // What is left to launch-bound is the launch latency itself: a few percent of the host work.
  const Hint* lb = Find(r, "launch-bound");
  ASSERT_NE(lb, nullptr);
  EXPECT_LT(lb->est_saving_ns * 10, h.est_saving_ns);
}

// tests/gpu/scripts/decode_shapes.py 64 4: cuDNN's attention builds a plan for each new key
// length. The three set-ups after the first (start-up) are shape-setup's, in the attention op;
// the unprofiled run of the same script (plain.txt) measured each new length's first call
// against the others: the estimate must bound that and stay within 1.5x of it.
TEST(CauseRecordings, CudnnPlansPerNewLengthAreShapeSetup) {
  const Recorded r = Load("pytorch_decode_shapes");
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "shape-setup");
  EXPECT_EQ(r.setup_gaps, 3u);
  EXPECT_TRUE(Mentions(h, "op 'aten::_cudnn_attention_forward': 3 of its 64 calls"));
  EXPECT_NE(h.fix_pytorch.find("bucket"), std::string::npos);
  EXPECT_NE(h.fix_pytorch.find("sdpa_kernel"), std::string::npos);
  EXPECT_EQ(Find(r, "gpu-idle-gaps"), nullptr);  // those gaps are set-up, not host work
  std::ifstream plain(Fixture("pytorch_decode_shapes/plain.txt"));
  const std::regex line(R"(length=(\d+) first_ms=([0-9.]+) steady_ms=([0-9.]+))");
  double excess_ms = 0;
  int lengths = 0;
  for (std::string s; std::getline(plain, s);) {
    std::smatch m;
    if (!std::regex_search(s, m, line)) continue;
    if (lengths++ > 0) excess_ms += std::stod(m[2]) - std::stod(m[3]);  // the first: start-up
  }
  ASSERT_EQ(lengths, 4);
  const double ratio = static_cast<double>(h.est_saving_ns) / (excess_ms * 1e6);
  EXPECT_GE(ratio, 0.9) << excess_ms << " ms measured";
  EXPECT_LE(ratio, 1.5) << excess_ms << " ms measured";
}

// kernels/hint_shape_setup 200 4: a kernel generated with NVRTC for each new row length. The
// first is start-up; the three later ones are set-up inside library_op (under kprof most of
// each compile hides behind queued GPU work: only the idle part is priced).
TEST(CauseRecordings, KernelsGeneratedPerShapeAreShapeSetup) {
  const Recorded r = Load("hint_shape_setup");
  ASSERT_FALSE(r.hints.empty());
  EXPECT_EQ(r.hints.front().id, "shape-setup");
  EXPECT_EQ(r.setup_gaps, 3u);
  EXPECT_TRUE(Mentions(r.hints.front(), "op 'library_op': 3 of its 200 calls"));
}

}  // namespace
}  // namespace kprof
