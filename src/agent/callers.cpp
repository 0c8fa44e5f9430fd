// Who made a virtual-memory call (agent.h CallerOf; docs/memory.md "Who made it"): the callback
// keeps the calling thread's return addresses (memory_calls.cpp); the writer thread names them
// here, away from the driver's call, since dladdr takes the dynamic loader's lock.
#include <dlfcn.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "agent/agent.h"

namespace kprof::agent {

std::string CallerOf(const std::vector<void*>& frames, const std::string& thread) {
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&CallerOf), &self) == 0) self.dli_fname = nullptr;
  for (void* f : frames) {
    Dl_info info{};
    if (dladdr(f, &info) == 0 || info.dli_fname == nullptr || info.dli_fname[0] == '\0') continue;
    if (self.dli_fname != nullptr && std::strcmp(info.dli_fname, self.dli_fname) == 0) continue;
    const std::string_view path(info.dli_fname);
    const size_t slash = path.find_last_of('/');
    const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
    if (base.starts_with("libcupti") || base.starts_with("libcuda.so")) continue;
    return std::string(path);
  }
  return thread.empty() ? "" : "[thread] " + thread;
}

}  // namespace kprof::agent
