// kprof's own cost taken out of the idle time the hints price (docs/hints.md, "kprof's own
// cost"): exact amounts on in-memory traces whose events and figures are known, and nothing at
// all without the figures.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "kprof/hints.h"
#include "kprof/output.h"
#include "trace_builder.h"

namespace kprof {
namespace {

using testing::TraceBuilder;

constexpr uint64_t B = 1'000'000'000;

// 1000 steps of 5 us: a launch call (t .. t+4.5 us) whose 2 us kernel runs t+3 .. t+5 us; the GPU
// idles 3 us before each kernel but the first. With `ranges`, an op range and a module range of
// kprof's PyTorch layer inside each step, and its mark saying what they cost.
Run Steps(const char* self_cost, bool ranges) {
  TraceBuilder b;
  if (self_cost != nullptr) b.Trace().meta["self_cost"] = self_cost;
  if (ranges) b.Range("kprof.pytorch:auto:ops,modules;op_ns=500;module_ns=300", B - 10, B - 5);
  for (uint64_t i = 0; i < 1000; ++i) {
    const uint64_t t = B + i * 5'000;
    b.Launch("tiny_step", t, t + 4'500, t + 3'000, t + 5'000);
    if (ranges) {
      b.Range("kprof.module:model|Linear", t + 50, t + 4'600);
      b.Range("aten::add", t + 100, t + 4'550);
    }
  }
  return b.Build();
}

uint64_t LaunchBound(const Run& run, uint64_t* taken = nullptr) {
  const Timeline tl = BuildTimeline(run);
  const Analysis a = Analyze(tl);
  if (taken != nullptr) *taken = a.summary.self_cost_ns;
  const std::vector<Hint> hints = ComputeHints(tl, a);  // (kept alive: h points into it)
  const Hint* h = FindHint(hints, "launch-bound");
  return h ? h->est_saving_ns : 0;
}

nlohmann::json Json(const Run& run, const Analysis& a, const std::vector<Hint>& hints) {
  std::ostringstream out;
  ReportOptions o;
  o.format = Format::Json;
  WriteReport(out, run, a, hints, o);
  return nlohmann::json::parse(out.str());
}

constexpr const char* kCost = "launch_ns=1000.0;api_ns=400.0;range_ns=200.0;source=test";

TEST(SelfCost, EachGapLosesTheCostOfWhatTheHostRecordedBeforeTheNextLaunch) {
  uint64_t taken = 1;
  EXPECT_EQ(LaunchBound(Steps(nullptr, false), &taken), 999u * 3'000);
  EXPECT_EQ(taken, 0u);
  // One launch between two launches: 1 us of each 3 us gap was kprof's.
  EXPECT_EQ(LaunchBound(Steps(kCost, false), &taken), 999u * 2'000);
  EXPECT_EQ(taken, 999u * 1'000);
  // And an op range (0.2 + 0.5 us) and a module range (0.2 + 0.3 us) per step: 2.2 us.
  EXPECT_EQ(LaunchBound(Steps(kCost, true), &taken), 999u * 800);
  EXPECT_EQ(taken, 999u * 2'200);
  // Never more than the gap: 3 us of launch cost leave nothing, and nothing is priced.
  EXPECT_EQ(LaunchBound(Steps("launch_ns=3500;api_ns=0;range_ns=0;source=x", false), &taken), 0u);
  EXPECT_EQ(taken, 999u * 3'000);
}

// The same steps with the ranges kprof's op observer makes (Range records, no CUPTI record
// behind them): each costs what the layer measured per op (0.5 us) and per module call (0.3 us),
// and CUPTI's figure per range not at all; a foreign trace's Range records (no observer named in
// the meta) cost nothing.
TEST(SelfCost, OpObserverRangesCostWhatTheLayerMeasured) {
  const auto steps = [](bool observer) {
    TraceBuilder b;
    b.Trace().meta["self_cost"] = kCost;
    if (observer) b.Meta("op_observer", "PyTorch RecordFunction observer, torch 2.11.0");
    b.ObservedRange("kprof.pytorch:auto:ops,modules;op_ns=500;module_ns=300", B - 10, B - 10,
                    "kprof");
    for (uint64_t i = 0; i < 1000; ++i) {
      const uint64_t t = B + i * 5'000;
      b.Launch("tiny_step", t, t + 4'500, t + 3'000, t + 5'000);
      b.ObservedRange("kprof.module:model|Linear", t + 50, t + 4'600, "kprof");
      b.ObservedRange("aten::add", t + 100, t + 4'550, "cpu_op", static_cast<int64_t>(i));
    }
    return b.Build();
  };
  uint64_t taken = 0;
  EXPECT_EQ(LaunchBound(steps(true), &taken), 999u * (3'000 - 1'000 - 800));
  EXPECT_EQ(taken, 999u * 1'800);
  EXPECT_EQ(LaunchBound(steps(false), &taken), 999u * 2'000);
  EXPECT_EQ(taken, 999u * 1'000);
}

TEST(SelfCost, WhatTheRestCannotHoldComesOutOfTheHostWorkAfterAWait) {
  // 100 steps of 250 us: a 100 us kernel, a wait released at 110 us, then 140 us of the
  // program's work holding 100 ranges of 1 us each (kprof's), and the next launch.
  TraceBuilder b;
  b.Trace().meta["self_cost"] = "launch_ns=0;api_ns=0;range_ns=1000;source=x";
  for (uint64_t i = 0; i < 100; ++i) {
    const uint64_t t = B + i * 250'000;
    b.Launch("step_kernel", t, t + 5'000, t + 5'000, t + 105'000);
    const uint32_t c = b.Api("cudaStreamSynchronize", t + 6'000, t + 110'000);
    b.Sync(SyncKind::StreamSynchronize, t + 6'000, t + 110'000, c, 7);
    for (uint64_t k = 0; k < 100; ++k)
      b.Range("work", t + 111'000 + k * 1'000, t + 111'500 + k * 1'000);
  }
  const kprof::Run run = b.Build();
  const Timeline tl = BuildTimeline(run);
  const Analysis a = Analyze(tl);
  // Each of the 99 gaps (150 us): 100 us of ranges; the rest (5 us) takes 5, the host work 95.
  EXPECT_EQ(a.summary.self_cost_ns, 99u * 100'000);
  const std::vector<Hint> hints = ComputeHints(tl, a);
  const Hint* host = FindHint(hints, "host-work-after-sync");
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->est_saving_ns, 99u * 45'000);  // 140 us of work less 95 us of kprof's
  EXPECT_EQ(FindHint(hints, "launch-bound"), nullptr);
}

TEST(SelfCost, TheReportSaysWhatWasTakenOutAndTheFigures) {
  const kprof::Run run = Steps(kCost, false);
  const Timeline tl = BuildTimeline(run);
  const Analysis a = Analyze(tl);
  const std::vector<Hint> hints = ComputeHints(tl, a);
  std::string table;
  for (const auto& [k, v] : TotalsLines(a.summary, HintBaseNs(hints)))
    if (k == "kprof's own cost") table = v;
  EXPECT_EQ(table,
            "999.00 us taken out of the priced idle time (1.00 us a launch, 0.40 us a call, 0.20 "
            "us a range; test)");
  const nlohmann::json j = Json(run, a, hints);
  EXPECT_EQ(j["summary"]["self_cost"]["taken_out_ns"], 999'000);
  EXPECT_EQ(j["summary"]["self_cost"]["launch_ns"], 1000.0);
  EXPECT_EQ(j["summary"]["self_cost"]["source"], "test");
  // Without the figures: no line, no key.
  const kprof::Run plain = Steps(nullptr, false);
  const Timeline tl2 = BuildTimeline(plain);
  const Analysis a2 = Analyze(tl2);
  for (const auto& [k, v] : TotalsLines(a2.summary, 1)) EXPECT_NE(k, "kprof's own cost");
  EXPECT_FALSE(Json(plain, a2, {})["summary"].contains("self_cost"));
}

}  // namespace
}  // namespace kprof
