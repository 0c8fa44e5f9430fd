// Where kprof's installed parts are: the agent and the PyTorch layer, looked up the same way by
// `kprof run` (which injects them) and `kprof doctor` (which says what run will use).
#pragma once

#include <string>

namespace kprof::cli {

/// The folder of the running kprof executable ("." when /proc/self/exe cannot be read).
std::string SelfDir();
/// The agent: $KPROF_AGENT, else libkprof_agent.so next to the kprof executable, else ../lib/;
/// "" when none. `from_env` (optional) says whether $KPROF_AGENT gave it.
std::string FindAgent(bool* from_env = nullptr);
/// kprof-calibrate (kprof's cost per event, src/calibrate): next to the kprof executable, else
/// ../libexec/kprof/; "" when none.
std::string FindCalibrator();
/// The PyTorch layer's folder (holding sitecustomize.py): $KPROF_PYTHON_DIR, else python/ next
/// to the kprof executable, else ../share/kprof/python; "" when none.
std::string FindPythonDir();

}  // namespace kprof::cli
