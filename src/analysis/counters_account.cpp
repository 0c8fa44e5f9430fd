// The agent's account of replay (meta counters_replay_account): see analysis/counters.h.
#include <cstdlib>
#include <string_view>

#include "analysis/counters.h"

namespace kprof::detail {

void ReadReplayAccount(const std::string& meta, std::map<std::string, ReplaySeen>& out) {
  size_t at = 0;
  while (at < meta.size()) {
    size_t nl = meta.find('\n', at);
    if (nl == std::string::npos) nl = meta.size();
    const std::string_view line(meta.data() + at, nl - at);
    at = nl + 1;
    // Counts, then the name (a name never starts with a digit); older lines have fewer counts.
    uint64_t v[8] = {};
    size_t pos = 0, fields = 0;
    while (pos < line.size() && fields < 8) {
      const size_t tab = line.find('\t', pos);
      if (tab == std::string_view::npos) break;
      const std::string_view f = line.substr(pos, tab - pos);
      if (f.empty() || f.find_first_not_of("0123456789") != std::string_view::npos) break;
      v[fields++] = std::strtoull(std::string(f).c_str(), nullptr, 10);
      pos = tab + 1;
    }
    if (fields < 6 || pos >= line.size()) continue;
    if (fields == 6) v[6] = v[5], v[5] = 0;  // recorded before `captured`
    ReplaySeen& s = out[std::string(line.substr(pos))];
    s.replayed += v[0];
    s.launches += v[1];
    s.selected += v[2];
    s.busy += v[3];
    s.failed += v[4];
    s.captured += v[5];
  }
}

}  // namespace kprof::detail
