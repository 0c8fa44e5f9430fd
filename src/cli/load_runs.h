// Internal to the CLI: the runs `kprof diff` and `kprof check` compare, loaded from what the
// command line names (diff.cpp).
#pragma once

#include <string>
#include <vector>

#include "kprof/compare.h"

namespace kprof {

/// Loads the runs named by one command-line item: a run directory (a directory of repN
/// subdirectories expands into one run each, in N order), a kprof run file, a JSON summary or a
/// Chrome trace. Throws InputError.
std::vector<RunDigest> LoadRuns(const std::string& path);
/// LoadRuns of each path, in order, into one list. Throws InputError.
std::vector<RunDigest> LoadAllRuns(const std::vector<std::string>& paths);

}  // namespace kprof
