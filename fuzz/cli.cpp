// Fuzz target: the command line of `kprof report|diff|check|export`. The input, split on NUL
// bytes, is argv after "kprof": the first item names the command (anything else is skipped).
// The commands run inside a scratch directory holding small fixtures (copied from
// fuzz/cli_files/ and rebuilt for every input); arguments that could name a path outside it
// are skipped. `kprof run` is never called: it would start a program.
#include "kprof/cli.h"

#include <unistd.h>

#include <vector>

#include "fuzz_common.h"

namespace {

namespace fs = std::filesystem;

/// Scratch layout: a.kprof, t.json (Chrome trace), s.json (summary), b.json (budget), run/ (a
/// run directory) and reps/rep1, reps/rep2 (a repeated run).
void ResetScratch() {
  const std::string src = KPROF_FUZZ_DIR "/cli_files";
  const fs::path dir = kprof::fuzz::ScratchDir();
  // The entries first, then their removal: removing while a directory_iterator walks the
  // directory may skip entries, and a file left behind made copy_file throw (fuzz run 5).
  std::vector<fs::path> old;
  for (const auto& e : fs::directory_iterator(dir)) old.push_back(e.path());
  for (const auto& p : old) fs::remove_all(p);
  const auto overwrite = fs::copy_options::overwrite_existing;
  for (const char* f : {"a.kprof", "t.json", "s.json", "b.json"})
    fs::copy_file(src + "/" + f, dir / f, overwrite);
  for (const char* d : {"run", "reps/rep1", "reps/rep2"}) {
    fs::create_directories(dir / d);
    fs::copy_file(src + "/a.kprof", dir / d / "kprof.1.kprof", overwrite);
  }
}

/// False when `arg` could name a file outside the scratch directory: every '/' must follow one
/// of the scratch directory names (so no absolute path, no "..", no "-o/x").
bool InsideScratch(const std::string& arg) {
  if (arg.find("..") != std::string::npos) return false;
  size_t token = 0;
  for (size_t i = 0; i < arg.size(); ++i) {
    const char c = arg[i];
    if (c == '/') {
      const std::string_view name(arg.data() + token, i - token);
      if (name != "run" && name != "reps" && name != "rep1" && name != "rep2") return false;
    }
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-' || c == '.';
    if (!word) token = i + 1;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool in_scratch = ::chdir(kprof::fuzz::ScratchDir().c_str()) == 0;
  if (!in_scratch) std::abort();
  std::vector<std::string> args;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (size_t start = 0; start <= input.size() && args.size() < 64;) {
    const size_t nul = std::min(input.find('\0', start), input.size());
    args.emplace_back(input.substr(start, nul - start));
    start = nul + 1;
  }
  for (const auto& a : args)
    if (!InsideScratch(a)) return 0;
  const std::string cmd = args.front();
  args.erase(args.begin());
  ResetScratch();
  try {
    if (cmd == "report") (void)kprof::CmdReport(args);
    if (cmd == "diff") (void)kprof::CmdDiff(args);
    if (cmd == "check") (void)kprof::CmdCheck(args);
    if (cmd == "export") (void)kprof::CmdExport(args);
  } catch (const kprof::InputError&) {
  }
  return 0;
}
