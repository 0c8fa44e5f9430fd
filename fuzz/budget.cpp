// Fuzz target: budget files, through `kprof check RUN --budget FILE` (the parser lives in
// src/cli/check.cpp) against a fixed summary, in each output format (chosen by the size).
#include "fuzz_common.h"
#include "kprof/cli.h"

namespace {

constexpr std::string_view kSummary = R"json({"schema":"kprof.summary","schema_version":1,
"summary":{"wall_ns":5000000,"gpu_busy_ns":3000000,"kernel_ns":2500000,"memcpy_ns":400000,
"sync_ns":100000,"kernels":12,"launches":12,"syncs":3,"memcpys":4,
"memcpy_bytes":{"HtoD":4096,"DtoH":1024},"memsets":1,"peak_memory_bytes":1048576,
"processes":1,"incomplete_processes":0,"dropped_records":0},
"ops":[{"key":"forward","calls":2,"gpu_ns":2000000},{"key":"(no range)","calls":0,"gpu_ns":500000}],
"kernels":[{"name":"gemm<float>","calls":8,"total_ns":2000000},{"name":"relu","calls":4,"total_ns":500000}],
"hints":[{"id":"excessive-sync","severity":"warning","summary":"3 syncs"}]})json";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string summary =
      kprof::fuzz::WriteScratch("summary.json", kSummary.data(), kSummary.size());
  static const std::string out = kprof::fuzz::ScratchDir() + "/check.out";
  static const char* const kFormats[] = {"table", "json", "md", "junit"};
  const std::string budget = kprof::fuzz::WriteScratch("budget.json", data, size);
  try {
    // --force: the output of the previous input is replaced (without it, every input after the
    // first would stop at "check.out: already exists" before the budget is parsed).
    (void)kprof::CmdCheck(
        {summary, "--budget", budget, "--format", kFormats[size % 4], "-o", out, "--force"});
  } catch (const kprof::InputError&) {
    // The command turns input errors into exit code 2; one escaping is still not a crash.
  }
  return 0;
}
