// Fuzz target: kprof JSON summaries as diff/check inputs (DigestFromSummaryJson from memory,
// LoadRuns from a file), then diff and check over the digest: its numbers are the input's.
#include "fuzz_common.h"
#include "cli/load_runs.h"
#include "kprof/compare.h"
#include "kprof/summary_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)kprof::LooksLikeSummaryJson(text);
    const kprof::RunDigest d = kprof::DigestFromSummaryJson(text, "fuzz.json");
    const std::vector<kprof::RunDigest> runs{d, d};
    (void)kprof::Diff({d}, runs);
    kprof::BudgetFromRunsOptions o;
    o.top_kernels = 5;
    (void)kprof::CheckBudget(runs, kprof::BudgetFromRuns(runs, o));
  } catch (const kprof::InputError&) {
  }
  const std::string path = kprof::fuzz::WriteScratch("summary.json", data, size);
  try {
    (void)kprof::LoadRuns(path);
  } catch (const kprof::InputError&) {
  }
  return 0;
}
