// Shared by the fuzz targets (docs/fuzzing.md): a scratch directory per process, file helpers,
// and the analysis that `kprof report` runs on whatever a reader accepted.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

namespace kprof::fuzz {

/// $TMPDIR/kprof-fuzz.<pid>: created once, removed at exit. Every file a target writes is in it.
inline const std::string& ScratchDir() {
  // Never destroyed: the exit handler below runs after the static destructors.
  static const std::string& dir = *new std::string([] {
    const char* tmp = std::getenv("TMPDIR");
    std::string d = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/kprof-fuzz." +
                    std::to_string(::getpid());
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(ScratchDir(), ec);
    });
    return d;
  }());
  return dir;
}

/// Writes `size` bytes to ScratchDir()/name (truncating) and returns the path.
inline std::string WriteScratch(const std::string& name, const void* data, size_t size) {
  const std::string path = ScratchDir() + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  f.close();
  if (!f) std::abort();  // the scratch directory must be writable
  return path;
}

/// Everything `kprof report` does with a run once it is read: timeline, all views, hints.
inline void AnalyzeRun(const Run& run) {
  const Timeline timeline = BuildTimeline(run);
  AnalysisOptions opts;
  opts.all_views = true;
  opts.timeline = true;
  const Analysis analysis = Analyze(timeline, opts);
  (void)ComputeHints(timeline, analysis);
}

}  // namespace kprof::fuzz
