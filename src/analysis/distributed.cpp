// Several GPUs and several ranks: per-device and per-rank usage, and collectives matched across
// ranks (kprof/distributed.h, docs/distributed.md).
#include "kprof/distributed.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "analysis/intervals.h"

namespace kprof {
namespace {

using detail::Covered;
using detail::Interval;
using detail::Length;
using detail::Merge;

/// |A ∪ B| of two merged lists.
uint64_t UnionOf(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> all(a);
  all.insert(all.end(), b.begin(), b.end());
  return Length(Merge(std::move(all)));
}

}  // namespace

bool IsCommKernel(std::string_view n) { return IsCommKernelName(n); }

std::string_view CollectiveOf(std::string_view n) {
  if (!IsCommKernel(n)) return {};
  const size_t k = n.find("Kernel_");
  if (k == std::string_view::npos) return "Generic";
  std::string_view rest = n.substr(k + 7);
  const size_t stop = rest.find_first_of("_(< ");
  rest = rest.substr(0, stop);
  return rest.empty() ? std::string_view("Generic") : rest;
}

// ---------------------------------------------------------------------------------------------
// Devices.

DeviceKeys::DeviceKeys(const Timeline& tl) {
  // Every (process, ordinal) that ran work, with what identifies its GPU.
  struct Seen {
    size_t process;
    uint16_t device;
    std::string identity, host, uuid, label;
  };
  std::vector<Seen> seen;
  for (size_t i = 0; i < tl.processes.size(); ++i) {
    const ProcessTimeline& t = tl.processes[i];
    const ProcessTrace& p = *t.process;
    std::set<uint16_t> devices;
    for (const Record* r : t.acts) devices.insert(r->device);
    for (uint16_t d : devices) {
      const std::string pre = "device." + std::to_string(d) + ".";
      Seen s{i, d, "", p.Meta("hostname"), p.Meta(pre + "uuid"), "dev " + std::to_string(d)};
      if (const std::string& name = p.Meta(pre + "name"); !name.empty()) s.label += " " + name;
      s.identity = s.uuid.empty() ? "h:" + s.host + "#" + std::to_string(d) : "u:" + s.uuid;
      seen.push_back(std::move(s));
    }
  }
  // One key per identity; a label two identities share gets the host, then the UUID's start.
  std::map<std::string, const Seen*> by_identity;
  for (const Seen& s : seen) by_identity.emplace(s.identity, &s);
  std::map<std::string, std::vector<const Seen*>> by_label;
  for (const auto& [id, s] : by_identity) by_label[s->label].push_back(s);
  std::map<std::string, std::string> key_of;  // identity -> key
  for (const auto& [label, group] : by_label) {
    std::set<std::string> hosts;
    for (const Seen* s : group) hosts.insert(s->host);
    std::map<std::string, int> uses;
    for (const Seen* s : group) {
      std::string key = label;
      if (group.size() > 1 && hosts.size() > 1 && !s->host.empty()) key += " on " + s->host;
      key_of[s->identity] = key;
      ++uses[key];
    }
    for (const Seen* s : group)
      if (uses[key_of[s->identity]] > 1)
        key_of[s->identity] += " [" + (s->uuid.empty() ? s->identity : s->uuid.substr(0, 12)) + "]";
  }
  // Stable order: host, ordinal, key.
  std::vector<std::tuple<std::string, uint16_t, std::string>> order;
  for (const auto& [id, s] : by_identity) order.emplace_back(s->host, s->device, key_of[id]);
  std::sort(order.begin(), order.end());
  std::map<std::string, size_t> index;
  for (const auto& [host, dev, key] : order) {
    index.emplace(key, keys_.size());
    keys_.push_back(key);
  }
  for (const Seen& s : seen) entries_.push_back({s.process, s.device, index[key_of[s.identity]]});
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.process, a.device) < std::tie(b.process, b.device);
  });
}

size_t DeviceKeys::Index(size_t process, uint16_t device) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), Entry{process, device, 0},
                             [](const Entry& a, const Entry& b) {
                               return std::tie(a.process, a.device) < std::tie(b.process, b.device);
                             });
  // Every activity's device is in the table (built from the same activities).
  return it != entries_.end() && it->process == process && it->device == device ? it->index : 0;
}

const std::string& DeviceKeys::Key(size_t process, uint16_t device) const {
  static const std::string kNone = "dev ?";
  return keys_.empty() ? kNone : keys_[Index(process, device)];
}

// ---------------------------------------------------------------------------------------------
// Usage and collectives.

namespace {

// Per device: its classes' intervals, and the spans of the processes that used it.
struct Dev {
  std::vector<Interval> cls[3], spans;
  std::set<size_t> users;
};
// Communication kernels of a process per (device, stream): its communicators.
struct Comm {
  std::map<std::pair<uint16_t, uint32_t>, std::vector<const Record*>> streams;
};

/// The processes with GPU work, by rank, then pid, then position.
std::vector<size_t> RankOrder(const Timeline& tl) {
  std::vector<size_t> procs;
  for (size_t i = 0; i < tl.processes.size(); ++i)
    if (!tl.processes[i].acts.empty()) procs.push_back(i);
  std::sort(procs.begin(), procs.end(), [&](size_t a, size_t b) {
    const ProcessTrace &x = *tl.processes[a].process, &y = *tl.processes[b].process;
    const auto rank = [](const ProcessTrace& p) { return p.rank < 0 ? INT32_MAX : p.rank; };
    return std::make_tuple(rank(x), x.pid, a) < std::make_tuple(rank(y), y.pid, b);
  });
  return procs;
}

/// Process `i` as a rank: its usage, its compute, communication and busy intervals, its
/// communicators' kernels; its work added to its devices'.
void AddRank(const Timeline& tl, const DeviceKeys& keys, size_t i,
             const std::vector<NsInterval>& span, std::vector<Dev>& devs, std::vector<Comm>& comms,
             DistributedSummary& D) {
  const size_t ndev = devs.size();
  const ProcessTimeline& t = tl.processes[i];
  const ProcessTrace& p = *t.process;
  RankUsage u;
  u.process = i;
  u.rank = p.rank;
  u.pid = p.pid;
  u.label = p.Label();
  // Each activity's interval once, by device and class; merged per device before the process's
  // and the device's lists are made of them (a large run holds millions of activities).
  std::vector<std::array<std::vector<Interval>, 3>> by_dev(ndev);
  std::unordered_map<const std::string*, bool> is_comm;
  Comm comm;
  for (const Record* r : t.acts) {
    const uint64_t s = r->start_ns, e = std::max(r->start_ns, r->end_ns);
    WorkClass c = WorkClass::Copy;
    if (r->Kind() == RecordKind::Kernel) {
      const std::string* name = &t.KernelName(*r);
      auto it = is_comm.find(name);
      if (it == is_comm.end()) it = is_comm.emplace(name, IsCommKernel(*name)).first;
      c = it->second ? WorkClass::Comm : WorkClass::Compute;
      ++u.kernels;
      u.kernel_ns += r->DurationNs();
      if (it->second) {
        ++u.comm_kernels;
        u.comm_kernel_ns += r->DurationNs();
        if (CollectiveOf(*name) == "SendRecv")
          ++D.p2p_kernels;
        else
          comm.streams[{r->device, r->tid}].push_back(r);
      }
    } else if (r->Kind() == RecordKind::GraphLaunch) {
      c = WorkClass::Compute;
    }
    by_dev[keys.Index(i, r->device)][static_cast<int>(c)].emplace_back(s, e);
  }
  std::vector<Interval> cls[3];
  for (size_t d = 0; d < ndev; ++d) {
    auto& lists = by_dev[d];
    if (lists[0].empty() && lists[1].empty() && lists[2].empty()) continue;
    for (int c = 0; c < 3; ++c) {
      const std::vector<Interval> merged = Merge(std::move(lists[c]));
      devs[d].cls[c].insert(devs[d].cls[c].end(), merged.begin(), merged.end());
      cls[c].insert(cls[c].end(), merged.begin(), merged.end());
    }
    devs[d].users.insert(D.ranks.size());
    devs[d].spans.insert(devs[d].spans.end(), span.begin(), span.end());
    u.devices += (u.devices.empty() ? "" : ", ") + keys.Devices()[d];
  }
  std::vector<Interval> compute = Merge(std::move(cls[0])), commiv = Merge(std::move(cls[1])),
                        copy = Merge(std::move(cls[2]));
  u.wall_ns = Length(span);
  u.compute_ns = Length(compute);
  u.comm_ns = Length(commiv);
  const uint64_t kernels_union = UnionOf(compute, commiv);
  u.overlap_ns = u.compute_ns + u.comm_ns - kernels_union;
  u.comm_only_ns = u.comm_ns - u.overlap_ns;
  std::vector<Interval> all(compute);
  all.insert(all.end(), commiv.begin(), commiv.end());
  all.insert(all.end(), copy.begin(), copy.end());
  std::vector<Interval> busy = Merge(std::move(all));
  u.busy_ns = Length(busy);
  u.copy_only_ns = u.busy_ns - kernels_union;
  u.idle_ns = u.wall_ns > u.busy_ns ? u.wall_ns - u.busy_ns : 0;
  D.ranks.push_back(std::move(u));
  D.compute.push_back(std::move(compute));
  D.comm.push_back(std::move(commiv));
  D.busy.push_back(std::move(busy));
  D.recorded.push_back(span);
  comms.push_back(std::move(comm));
}

/// Device `d`'s usage from the work of its users.
DeviceUsage UsageOf(const std::string& key, Dev& v, const DistributedSummary& D) {
  DeviceUsage u;
  u.key = key;
  for (size_t r : v.users) u.users.push_back(D.ranks[r].label);
  std::vector<Interval> compute = Merge(std::move(v.cls[0])), comm = Merge(std::move(v.cls[1])),
                        copy = Merge(std::move(v.cls[2]));
  u.wall_ns = Length(Merge(std::move(v.spans)));
  u.compute_ns = Length(compute);
  u.comm_ns = Length(comm);
  std::vector<Interval> kernels(compute);
  kernels.insert(kernels.end(), comm.begin(), comm.end());
  kernels = Merge(std::move(kernels));
  const uint64_t kernels_union = Length(kernels);
  u.comm_only_ns = kernels_union - u.compute_ns;
  kernels.insert(kernels.end(), copy.begin(), copy.end());
  const std::vector<Interval> busy = Merge(std::move(kernels));
  u.busy_ns = Length(busy);
  u.copy_only_ns = u.busy_ns - kernels_union;
  u.wall_ns = std::max(u.wall_ns, u.busy_ns);  // work past a span's end (never in kprof files)
  u.idle_ns = u.wall_ns - u.busy_ns;
  for (size_t k = 1; k < busy.size(); ++k) {
    const uint64_t gap = busy[k].first - busy[k - 1].second;
    ++u.gaps;
    if (gap >= kLongGapNs) {
      ++u.long_gaps;
      u.long_gap_ns += gap;
    }
  }
  u.utilisation = u.wall_ns ? static_cast<double>(u.busy_ns) / static_cast<double>(u.wall_ns) : 0;
  return u;
}

/// Collectives: each rank's communicators in the order of their first kernel, paired by that
/// order across ranks; the n-th kernels of paired communicators are one call while their
/// collectives agree.
void MatchCollectives(const Timeline& tl, const std::vector<Comm>& comms, DistributedSummary& D) {
  D.waits.resize(D.ranks.size());
  std::vector<std::vector<const std::vector<const Record*>*>> channels(D.ranks.size());
  for (size_t r = 0; r < D.ranks.size(); ++r) {
    for (const auto& [key, kernels] : comms[r].streams) channels[r].push_back(&kernels);
    std::sort(channels[r].begin(), channels[r].end(), [](const auto* a, const auto* b) {
      return a->front()->start_ns < b->front()->start_ns;
    });
  }
  // Nothing to match unless two ranks communicated (one rank's file alone, a one-rank job).
  size_t most = 0, communicating = 0;
  for (const auto& c : channels) {
    most = std::max(most, c.size());
    communicating += !c.empty();
  }
  if (communicating < 2) most = 0;
  const auto kind_of = [&](size_t r, const Record* k) {
    return CollectiveOf(tl.processes[D.ranks[r].process].KernelName(*k));
  };
  for (size_t ch = 0; ch < most; ++ch) {
    std::vector<size_t> ranks;
    for (size_t r = 0; r < D.ranks.size(); ++r)
      if (ch < channels[r].size()) ranks.push_back(r);
    size_t n = SIZE_MAX;
    for (size_t r : ranks) n = std::min(n, channels[r][ch]->size());
    if (ranks.size() < 2) n = 0;
    size_t matched = 0;
    for (; matched < n; ++matched) {
      const std::string_view kind = kind_of(ranks[0], (*channels[ranks[0]][ch])[matched]);
      bool agree = true;
      for (size_t r : ranks) agree &= kind_of(r, (*channels[r][ch])[matched]) == kind;
      if (!agree) break;
      Collective c;
      c.kind = std::string(kind);
      c.channel = static_cast<uint32_t>(D.communicators);
      c.seq = matched;
      uint64_t first = UINT64_MAX, last = 0;
      for (size_t r : ranks) {
        const Record* k = (*channels[r][ch])[matched];
        Collective::Part part{r, k, k->start_ns, std::max(k->start_ns, k->end_ns), 0, 0};
        if (part.arrive_ns >= last) {
          last = part.arrive_ns;
          c.last = c.parts.size();
        }
        first = std::min(first, part.arrive_ns);
        c.parts.push_back(part);
      }
      c.spread_ns = last - first;
      for (Collective::Part& part : c.parts) {
        const uint64_t until = std::min(last, part.end_ns);
        part.wait_ns = until > part.arrive_ns ? until - part.arrive_ns : 0;
        part.exposed_wait_ns = part.wait_ns - Covered(D.compute[part.rank], part.arrive_ns, until);
        RankUsage& u = D.ranks[part.rank];
        ++u.collectives;
        u.wait_ns += part.wait_ns;
        u.exposed_wait_ns += part.exposed_wait_ns;
        if (part.wait_ns) D.waits[part.rank].emplace_back(part.arrive_ns, until);
      }
      if (c.spread_ns > 0) ++D.ranks[c.parts[c.last].rank].last;
      D.collectives.push_back(std::move(c));
    }
    if (matched > 0) ++D.communicators;
    for (size_t r : ranks) D.unmatched_kernels += channels[r][ch]->size() - matched;
  }
  for (auto& w : D.waits) w = Merge(std::move(w));
  std::stable_sort(
      D.collectives.begin(), D.collectives.end(), [](const Collective& a, const Collective& b) {
        return a.parts[a.last].arrive_ns - a.spread_ns < b.parts[b.last].arrive_ns - b.spread_ns;
      });
}

}  // namespace

DistributedSummary SummarizeDistributed(const Timeline& tl, const DeviceKeys& keys,
                                        const std::vector<std::vector<NsInterval>>& spans) {
  DistributedSummary D;
  std::vector<Dev> devs(keys.Devices().size());
  std::vector<Comm> comms;
  for (size_t i : RankOrder(tl)) AddRank(tl, keys, i, spans[i], devs, comms, D);
  for (size_t d = 0; d < devs.size(); ++d)
    D.devices.push_back(UsageOf(keys.Devices()[d], devs[d], D));
  MatchCollectives(tl, comms, D);
  return D;
}

}  // namespace kprof
