// Hardware counters in the report writers (issue 12): the JSON "counters" object and the rows'
// "bound", the table's Bound column and "Hardware counters" section, the CSV and Markdown
// columns; and nothing of it in the reports of a run without counters.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kprof/counters.h"
#include "kprof/output.h"

namespace kprof {
namespace {

KernelRow Kernel(const std::string& name, uint64_t calls, uint64_t total_ns, Bound bound) {
  KernelRow k;
  k.name = name;
  k.stat.count = calls;
  k.stat.total_ns = total_ns;
  k.stat.mean_ns = total_ns / calls;
  k.stat.min_ns = k.stat.median_ns = k.stat.p95_ns = k.stat.max_ns = k.stat.mean_ns;
  k.share = static_cast<double>(total_ns) / 400000.0;
  k.bound = bound;
  return k;
}

GroupRow Group(const std::string& key, const KernelRow& k, Bound bound) {
  GroupRow g;
  g.key = key;
  g.calls = 2;
  g.gpu_ns = g.gpu_projected_ns = k.stat.total_ns;
  g.kernels = k.stat.count;
  g.share = k.share;
  g.kernel_rows = {k};
  g.bound = bound;
  return g;
}

/// An op-view analysis of two kernels: a GEMM under "forward" and a copy under "backward", and
/// a memset outside any range; without counters.
Analysis Plain(GroupBy by = GroupBy::Op) {
  Analysis a;
  a.by = by;
  a.summary.wall_ns = 1000000;
  a.summary.gpu_busy_ns = 400000;
  a.summary.kernels = 4;
  a.summary.kernel_ns = 300000;
  a.summary.processes = 1;
  a.kernels = {Kernel("gemm_kernel(float*, int)", 2, 200000, Bound::Unknown),
               Kernel("copy_kernel", 2, 100000, Bound::Unknown)};
  GroupRow none;
  none.key = "(no range)";
  none.gpu_ns = none.gpu_projected_ns = 100000;
  none.memsets = 1;
  none.share = 0.25;
  a.ops = {Group("forward", a.kernels[0], Bound::Unknown),
           Group("backward", a.kernels[1], Bound::Unknown), none};
  if (by == GroupBy::Kernel) {
    for (const KernelRow& k : a.kernels) {
      GroupRow g;
      g.key = k.name;
      g.calls = g.kernels = k.stat.count;
      g.gpu_ns = g.gpu_projected_ns = k.stat.total_ns;
      g.share = k.share;
      a.rows.push_back(g);
    }
  } else {
    a.rows = a.ops;
  }
  return a;
}

/// The same with the GEMM replayed and compute-bound, the copy replayed and memory-bound (its
/// FLOPs and the GEMM's tensor throughput not measured).
Analysis WithCounters(GroupBy by = GroupBy::Op) {
  Analysis a = Plain(by);
  const Bound bounds[2] = {Bound::Compute, Bound::Memory};
  for (size_t i = 0; i < 2; ++i) a.kernels[i].bound = bounds[i];
  for (size_t i = 0; i < 2; ++i) {
    a.ops[i].bound = bounds[i];
    a.ops[i].kernel_rows[0].bound = bounds[i];
  }
  if (by == GroupBy::Kernel) {
    for (size_t i = 0; i < 2; ++i) a.rows[i].bound = bounds[i];
  } else {
    a.rows = a.ops;
  }
  CounterSummary& c = a.counters;
  c.mode = "replay";
  c.replayed_launches = 4;
  c.replay_ns = 3210000000;
  c.max_passes = 10;

  KernelCounters gemm;
  gemm.name = "gemm_kernel(float*, int)";
  gemm.source = CounterSource::Replay;
  gemm.launches = 2;
  gemm.gpu_ns = 200000;
  gemm.values.sm_pct = 85.5;
  gemm.values.mem_pct = 40.75;
  gemm.values.dram_pct = 30;
  gemm.values.l2_pct = 20;
  gemm.values.occupancy_pct = 50;
  gemm.values.flops = 1e9;
  gemm.values.dram_bytes = 1e7;
  gemm.values.peak_flops_per_s = 6e13;
  gemm.values.peak_dram_bytes_per_s = 3.35e12;
  gemm.values.duration_ns = 101000;
  gemm.bound = Bound::Compute;

  KernelCounters copy;
  copy.name = "copy_kernel";
  copy.source = CounterSource::Replay;
  copy.launches = 2;
  copy.gpu_ns = 100000;
  copy.values.sm_pct = 20;
  copy.values.mem_pct = 90;
  copy.values.dram_pct = 88;
  copy.values.l2_pct = 45;
  copy.values.tensor_pct = 0;
  copy.values.occupancy_pct = 75;
  copy.values.dram_bytes = 4e6;
  copy.bound = Bound::Memory;
  c.kernels = {gemm, copy};
  return a;
}

std::string Write(const Analysis& a, Format format, size_t top = 15) {
  ReportOptions o;
  o.format = format;
  o.top = top;
  std::ostringstream out;
  WriteReport(out, Run{}, a, {}, o);
  return out.str();
}

/// The JSON summary, its keys in the order written.
nlohmann::ordered_json Json(const Analysis& a) {
  return nlohmann::ordered_json::parse(ReportJson(Run{}, a, {}));
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// The line of `text` that contains `what`, "" when none.
std::string LineWith(const std::string& text, const std::string& what) {
  for (const std::string& line : Lines(text))
    if (line.find(what) != std::string::npos) return line;
  return "";
}

TEST(CountersOutput, JsonHasTheCountersObject) {
  const nlohmann::ordered_json j = Json(WithCounters());
  ASSERT_TRUE(j.contains("counters"));
  const nlohmann::ordered_json& c = j["counters"];
  std::vector<std::string> keys;
  for (const auto& [k, v] : c.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "mode", "problem", "replayed_launches", "replay_ns", "setup_ns", "max_passes",
                      "samples", "sample_interval_ns", "roofline", "kernels", "unmeasured"}));
  EXPECT_EQ(c["mode"], "replay");
  EXPECT_EQ(c["problem"], "");
  EXPECT_EQ(c["replayed_launches"], 4);
  EXPECT_EQ(c["replay_ns"], 3210000000ull);
  EXPECT_EQ(c["setup_ns"], 0);
  EXPECT_EQ(c["max_passes"], 10);
  EXPECT_EQ(c["samples"], 0);
  EXPECT_EQ(c["sample_interval_ns"], 0);
  EXPECT_EQ(c["roofline"],
            "compute-bound 1 kernel (67% of measured GPU time), memory-bound 1 kernel (33% of "
            "measured GPU time)");
  ASSERT_EQ(c["kernels"].size(), 2u);

  const nlohmann::ordered_json& g = c["kernels"][0];
  keys.clear();
  for (const auto& [k, v] : g.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "name", "source", "launches", "gpu_ns", "sm_pct", "mem_pct", "dram_pct",
                      "l2_pct", "tensor_pct", "occupancy_pct", "flops", "dram_bytes", "intensity",
                      "flops_per_s", "peak_flops_per_s", "peak_dram_bytes_per_s", "bound"}));
  EXPECT_EQ(g["name"], "gemm_kernel(float*, int)");
  EXPECT_EQ(g["source"], "replay");
  EXPECT_EQ(g["launches"], 2);
  EXPECT_EQ(g["gpu_ns"], 200000);
  EXPECT_EQ(g["sm_pct"], 85.5);
  EXPECT_EQ(g["mem_pct"], 40.75);
  EXPECT_EQ(g["dram_pct"], 30.0);
  EXPECT_EQ(g["l2_pct"], 20.0);
  EXPECT_TRUE(g["tensor_pct"].is_null());
  EXPECT_EQ(g["occupancy_pct"], 50.0);
  EXPECT_EQ(g["flops"], 1e9);
  EXPECT_EQ(g["dram_bytes"], 1e7);
  EXPECT_EQ(g["intensity"], 100.0);
  EXPECT_DOUBLE_EQ(g["flops_per_s"].get<double>(), 1e13);  // 2 x 1e9 FLOP in 200 us
  EXPECT_EQ(g["peak_flops_per_s"], 6e13);
  EXPECT_EQ(g["peak_dram_bytes_per_s"], 3.35e12);
  EXPECT_EQ(g["bound"], "compute");

  const nlohmann::ordered_json& k = c["kernels"][1];
  EXPECT_EQ(k["name"], "copy_kernel");
  EXPECT_EQ(k["tensor_pct"], 0.0);  // measured zero is not null
  EXPECT_TRUE(k["flops"].is_null());
  EXPECT_TRUE(k["intensity"].is_null());
  EXPECT_TRUE(k["flops_per_s"].is_null());
  EXPECT_TRUE(k["peak_flops_per_s"].is_null());
  EXPECT_TRUE(k["peak_dram_bytes_per_s"].is_null());
  EXPECT_EQ(k["dram_bytes"], 4e6);
  EXPECT_EQ(k["bound"], "memory");
}

TEST(CountersOutput, JsonRowsCarryTheirClass) {
  const nlohmann::ordered_json j = Json(WithCounters());
  ASSERT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["rows"][0]["bound"], "compute");
  EXPECT_EQ(j["rows"][0]["kernel_rows"][0]["bound"], "compute");
  EXPECT_EQ(j["rows"][1]["bound"], "memory");
  EXPECT_EQ(j["rows"][2]["bound"], "");  // no kernel measured
  EXPECT_EQ(j["ops"][1]["bound"], "memory");
  EXPECT_EQ(j["kernels"][0]["bound"], "compute");
  EXPECT_EQ(j["kernels"][1]["bound"], "memory");

  const nlohmann::ordered_json k = Json(WithCounters(GroupBy::Kernel));
  EXPECT_EQ(k["rows"][0]["key"], "gemm_kernel(float*, int)");
  EXPECT_EQ(k["rows"][0]["bound"], "compute");
  EXPECT_EQ(k["rows"][1]["bound"], "memory");

  // Views without a class (streams, devices) have no "bound" in their rows.
  Analysis s = WithCounters();
  s.by = GroupBy::Stream;
  const nlohmann::ordered_json st = Json(s);
  EXPECT_FALSE(st["rows"][0].contains("bound"));
  EXPECT_EQ(st["ops"][0]["bound"], "compute");
  EXPECT_TRUE(st.contains("counters"));
}

TEST(CountersOutput, JsonWithoutCountersIsUnchanged) {
  const nlohmann::ordered_json j = Json(Plain());
  EXPECT_FALSE(j.contains("counters"));
  for (const char* list : {"rows", "ops"})
    for (const auto& row : j[list]) {
      EXPECT_FALSE(row.contains("bound"));
      for (const auto& k : row["kernel_rows"]) EXPECT_FALSE(k.contains("bound"));
    }
  for (const auto& k : j["kernels"]) EXPECT_FALSE(k.contains("bound"));
  EXPECT_EQ(ReportJson(kprof::Run{}, Plain(), {}).find("bound"), std::string::npos);
}

TEST(CountersOutput, JsonOfAskedButNothingMeasured) {
  Analysis a = Plain();
  a.counters.mode = "sampled";
  a.counters.problem = "PM sampling is not supported on this device";
  a.counters.sample_interval_ns = 200000;
  const nlohmann::ordered_json j = Json(a);
  ASSERT_TRUE(j.contains("counters"));
  EXPECT_EQ(j["counters"]["mode"], "sampled");
  EXPECT_EQ(j["counters"]["problem"], "PM sampling is not supported on this device");
  EXPECT_EQ(j["counters"]["roofline"], "");
  EXPECT_TRUE(j["counters"]["kernels"].empty());
  EXPECT_EQ(j["rows"][0]["bound"], "");
}

TEST(CountersOutput, TableHasBoundColumnAndCountersSection) {
  const std::string t = Write(WithCounters(), Format::Table);
  // The op view: a Bound column.
  const std::string header = LineWith(t, "Projected");
  EXPECT_NE(header.find("CPU time  Bound"), std::string::npos) << header;
  EXPECT_NE(LineWith(t, "  forward ").find("  compute"), std::string::npos) << t;
  EXPECT_NE(LineWith(t, "  backward ").find("  memory"), std::string::npos) << t;
  EXPECT_EQ(LineWith(t, "  (no range) ").find("compute"), std::string::npos) << t;
  // The kernel table too.
  EXPECT_NE(LineWith(t, "Min").find("Share  Bound"), std::string::npos) << t;

  // The section, after the kernels, before the totals.
  const size_t section = t.find("\nHardware counters\n");
  ASSERT_NE(section, std::string::npos) << t;
  EXPECT_LT(t.find("Top kernels by GPU time"), section);
  EXPECT_LT(section, t.find("\nTotals\n"));
  EXPECT_NE(t.find("  replay: 4 launches of 2 kernels replayed, up to 10 passes each, cost 3.210 s "
                   "of host time\n"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("sampled"), std::string::npos);
  EXPECT_EQ(t.find("counters: "), std::string::npos);  // no problem
  EXPECT_NE(t.find("  roofline: compute-bound 1 kernel (67% of measured GPU time), memory-bound 1 "
                   "kernel (33% of measured GPU time)\n"),
            std::string::npos)
      << t;
  const std::string cols = LineWith(t, "Occupancy %");
  for (const char* col : {"Kernel", "Source", "Launches", "SM %", "Mem %", "DRAM %", "L2 %",
                          "Tensor %", "FLOP/byte", "TFLOP/s", "Bound"})
    EXPECT_NE(cols.find(col), std::string::npos) << col;

  const std::string gemm = t.substr(section);
  EXPECT_NE(gemm.find("  gemm_kernel(float*, int)                 replay         2   85.5   40.8   "
                      "30.0   20.0        -        50.0    100.00   10.000  compute\n"),
            std::string::npos)
      << gemm;
  EXPECT_NE(gemm.find("  copy_kernel                              replay         2   20.0   90.0   "
                      "88.0   45.0      0.0        75.0         -        -  memory\n"),
            std::string::npos)
      << gemm;
  for (const std::string& line : Lines(t))
    EXPECT_TRUE(line.empty() || line.back() != ' ') << "trailing space: '" << line << "'";
}

TEST(CountersOutput, TableOfTheKernelView) {
  const std::string t = Write(WithCounters(GroupBy::Kernel), Format::Table);
  EXPECT_NE(LineWith(t, "Share  Bound").find("Calls"), std::string::npos) << t;
  EXPECT_NE(t.find("GPU time by kernel (Share: of GPU busy time, "), std::string::npos) << t;
  EXPECT_NE(LineWith(t, "  gemm_kernel(float*, int) ").find("  compute"), std::string::npos) << t;
  EXPECT_NE(LineWith(t, "  copy_kernel ").find("  memory"), std::string::npos) << t;
  EXPECT_NE(t.find("\nHardware counters\n"), std::string::npos);
}

TEST(CountersOutput, TableNamesSamplingAndProblems) {
  Analysis a = WithCounters();
  a.counters.mode = "replay,sampled";
  a.counters.samples = 5230;
  a.counters.sample_interval_ns = 200000;
  a.counters.problem = "replay: 1 kernel could not be replayed (insufficient privileges)";
  a.counters.kernels.resize(1);
  a.counters.kernels.push_back(a.counters.kernels[0]);
  a.counters.kernels[1].name = std::string(70, 'k');
  a.counters.kernels[1].source = CounterSource::Sampled;
  const std::string t = Write(a, Format::Table);
  EXPECT_NE(t.find("  replay: 4 launches of 1 kernel replayed"), std::string::npos) << t;
  EXPECT_NE(t.find("  sampled every 200 us: 5230 samples\n"), std::string::npos) << t;
  EXPECT_NE(t.find("  counters: replay: 1 kernel could not be replayed (insufficient "
                   "privileges)\n"),
            std::string::npos)
      << t;
  // A long name is cut to the column like the other tables' names.
  EXPECT_NE(t.find("  " + std::string(39, 'k') + "… sampled"), std::string::npos) << t;

  // --top applies to the table of counters as to the other tables.
  const std::string top1 = Write(a, Format::Table, 1);
  EXPECT_NE(top1.find("  ... 1 more kernels\n\nHardware counters\n"), std::string::npos) << top1;
  EXPECT_NE(top1.find("  ... 1 more kernels\n\nTotals\n"), std::string::npos) << top1;
  EXPECT_EQ(top1.find(std::string(39, 'k')), std::string::npos);
}

TEST(CountersOutput, TableOfAskedButNothingMeasured) {
  Analysis a = Plain();
  a.counters.mode = "sampled";
  a.counters.sample_interval_ns = 1000000;
  a.counters.problem = "PM sampling is not supported on this device";
  const std::string t = Write(a, Format::Table);
  EXPECT_NE(t.find("\nHardware counters\n  sampled every 1 ms: 0 samples\n  counters: PM sampling "
                   "is not supported on this device\n  (no kernel measured)\n"),
            std::string::npos)
      << t;
  EXPECT_NE(LineWith(t, "Projected").find("Bound"), std::string::npos);
}

TEST(CountersOutput, TableWithoutCountersIsUnchanged) {
  const std::string t = Write(Plain(), Format::Table);
  EXPECT_EQ(t.find("Bound"), std::string::npos) << t;
  EXPECT_EQ(t.find("Hardware counters"), std::string::npos) << t;
  // Same columns as ever: the header ends with "CPU time", the kernel table's with "Share".
  EXPECT_EQ(LineWith(t, "Projected").substr(LineWith(t, "Projected").size() - 8), "CPU time");
  EXPECT_EQ(LineWith(t, "Min").substr(LineWith(t, "Min").size() - 5), "Share");
  const std::string k = Write(Plain(GroupBy::Kernel), Format::Table);
  EXPECT_EQ(k.find("Bound"), std::string::npos) << k;
}

TEST(CountersOutput, Csv) {
  const std::string ops = Write(WithCounters(), Format::Csv);
  EXPECT_EQ(Lines(ops).at(0),
            "op,calls,gpu_ns,gpu_projected_ns,cpu_ns,kernels,memcpys,memsets,bytes,share,"
            "mem_delta_bytes,bound");
  EXPECT_EQ(Lines(ops).at(1), "forward,2,200000,200000,0,2,0,0,0,0.500000,0,compute");
  EXPECT_EQ(Lines(ops).at(3), "(no range),0,100000,100000,0,0,0,1,0,0.250000,0,");

  const std::string kernels = Write(WithCounters(GroupBy::Kernel), Format::Csv);
  EXPECT_EQ(Lines(kernels).at(0),
            "kernel,calls,total_ns,mean_ns,min_ns,median_ns,p95_ns,max_ns,share,bound");
  EXPECT_EQ(Lines(kernels).at(2),
            "copy_kernel,2,100000,50000,50000,50000,50000,50000,0.250000,"
            "memory");

  EXPECT_EQ(Write(Plain(), Format::Csv).find("bound"), std::string::npos);
  EXPECT_EQ(Lines(Write(Plain(GroupBy::Kernel), Format::Csv)).at(0),
            "kernel,calls,total_ns,mean_ns,min_ns,median_ns,p95_ns,max_ns,share");
}

TEST(CountersOutput, Markdown) {
  const std::string md = Write(WithCounters(), Format::Markdown);
  EXPECT_NE(md.find("| op | Calls | GPU time | Share | Kernels | Bound |\n"
                    "|---|---:|---:|---:|---:|---|\n"
                    "| forward | 2 | 200.00 us | 50.0% | 2 | compute |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("\n### Hardware counters\n\n- replay: 4 launches of 2 kernels replayed, up to "
                    "10 passes each, cost 3.210 s of host time\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| copy\\_kernel | replay | 2 | 20.0 | 90.0 | 88.0 | 45.0 | 0.0 | 75.0 | - | "
                    "- | memory |\n"),
            std::string::npos)
      << md;

  const std::string plain = Write(Plain(), Format::Markdown);
  EXPECT_EQ(plain.find("Bound"), std::string::npos);
  EXPECT_EQ(plain.find("Hardware counters"), std::string::npos);
}

}  // namespace
}  // namespace kprof
