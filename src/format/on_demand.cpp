// See kprof/on_demand.h. No fmt and no exceptions out of here: the agent links this file and
// calls it inside the user's process.
#include "kprof/on_demand.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>

namespace kprof::ondemand {
namespace {

bool U64(const std::map<std::string, std::string>& f, const char* key, uint64_t& out, bool required,
         std::string* why) {
  auto it = f.find(key);
  if (it == f.end()) {
    if (required && why != nullptr) *why = std::string("no ") + key;
    return !required;
  }
  const std::string& v = it->second;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size()) {
    if (why != nullptr) *why = std::string(key) + "=" + v + " is not a number";
    return false;
  }
  return true;
}

std::string Text(const std::map<std::string, std::string>& f, const char* key) {
  auto it = f.find(key);
  return it == f.end() ? std::string() : it->second;
}

std::string Join(const std::vector<uint64_t>& v) {
  std::string s;
  for (uint64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

bool Split(const std::string& s, std::vector<uint64_t>& out) {
  size_t at = 0;
  while (at < s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data() + at, s.data() + comma, v);
    if (ec != std::errc() || end != s.data() + comma) return false;
    out.push_back(v);
    at = comma + 1;
  }
  return true;
}

}  // namespace

std::string ControlDir(const std::string& run_dir) { return run_dir + "/control"; }
std::string RequestPath(const std::string& control) { return control + "/request"; }
std::string PresencePath(const std::string& control, uint64_t pid) {
  return control + "/" + std::to_string(pid) + ".agent";
}
std::string GoPath(const std::string& control, uint64_t id) {
  return control + "/" + std::to_string(id) + ".go";
}
std::string ReplyPath(const std::string& control, uint64_t id, uint64_t pid, const char* what) {
  return control + "/" + std::to_string(id) + "." + std::to_string(pid) + "." + what;
}

std::string FormatFields(const std::map<std::string, std::string>& fields) {
  std::string out;
  for (const auto& [k, v] : fields) {
    std::string value = v;
    std::replace(value.begin(), value.end(), '\n', ' ');
    out += k + "=" + value + "\n";
  }
  return out;
}

std::optional<std::map<std::string, std::string>> ParseFields(std::string_view text,
                                                              std::string* why) {
  std::map<std::string, std::string> f;
  size_t at = 0, line = 0;
  while (at < text.size()) {
    const size_t nl = std::min(text.find('\n', at), text.size());
    std::string_view l = text.substr(at, nl - at);
    ++line;
    at = nl + 1;
    if (l.empty()) continue;
    const size_t eq = l.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      if (why != nullptr) *why = "line " + std::to_string(line) + " is not key=value";
      return std::nullopt;
    }
    f[std::string(l.substr(0, eq))] = std::string(l.substr(eq + 1));
  }
  return f;
}

bool WriteWhole(const std::string& path, const std::string& text, std::string* why) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (why != nullptr) *why = "cannot create " + tmp + ": " + std::strerror(errno);
    return false;
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (why != nullptr) *why = "cannot write " + tmp + ": " + std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return false;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    if (why != nullptr) *why = "cannot rename " + tmp + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

std::optional<std::string> ReadSmall(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  while (out.size() < 65536) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

uint64_t WallNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

std::string FormatRequest(const Request& r) {
  std::map<std::string, std::string> f{{"id", std::to_string(r.id)},
                                       {"issued_ns", std::to_string(r.issued_ns)}};
  if (!r.range.empty()) {
    f["range"] = r.range;
    f["steps"] = std::to_string(r.steps);
  }
  if (r.duration_ms != 0) f["duration_ms"] = std::to_string(r.duration_ms);
  return FormatFields(f);
}

std::optional<Request> ParseRequest(std::string_view text, std::string* why) {
  auto f = ParseFields(text, why);
  if (!f) return std::nullopt;
  Request r;
  r.range = Text(*f, "range");
  if (!U64(*f, "id", r.id, true, why) || !U64(*f, "issued_ns", r.issued_ns, false, why) ||
      !U64(*f, "steps", r.steps, !r.range.empty(), why) ||
      !U64(*f, "duration_ms", r.duration_ms, false, why))
    return std::nullopt;
  if (r.id == 0 || (r.range.empty() ? r.duration_ms == 0 : r.steps == 0)) {
    if (why != nullptr)
      *why = r.id == 0 ? "id=0" : "the request asks for neither steps of a range nor a duration";
    return std::nullopt;
  }
  return r;
}

std::string FormatPresence(const Presence& p) {
  std::map<std::string, std::string> f{{"pid", std::to_string(p.pid)},
                                       {"state", p.state},
                                       {"windows", std::to_string(p.windows)},
                                       {"last_request", std::to_string(p.last_request)}};
  if (!p.rank.empty()) f["rank"] = p.rank;
  return FormatFields(f);
}

std::optional<Presence> ParsePresence(std::string_view text, std::string* why) {
  auto f = ParseFields(text, why);
  if (!f) return std::nullopt;
  Presence p;
  p.rank = Text(*f, "rank");
  p.state = Text(*f, "state");
  if (!U64(*f, "pid", p.pid, true, why) || !U64(*f, "windows", p.windows, false, why) ||
      !U64(*f, "last_request", p.last_request, false, why))
    return std::nullopt;
  if (p.state.empty()) {
    if (why != nullptr) *why = "no state";
    return std::nullopt;
  }
  return p;
}

std::string FormatAck(const Ack& a) {
  std::map<std::string, std::string> f{
      {"id", std::to_string(a.id)}, {"pid", std::to_string(a.pid)}, {"step_ns", Join(a.step_ns)}};
  if (!a.problem.empty()) f["problem"] = a.problem;
  return FormatFields(f);
}

std::optional<Ack> ParseAck(std::string_view text, std::string* why) {
  auto f = ParseFields(text, why);
  if (!f) return std::nullopt;
  Ack a;
  a.problem = Text(*f, "problem");
  if (!U64(*f, "id", a.id, true, why) || !U64(*f, "pid", a.pid, true, why)) return std::nullopt;
  if (!Split(Text(*f, "step_ns"), a.step_ns)) {
    if (why != nullptr) *why = "step_ns is not a list of numbers";
    return std::nullopt;
  }
  return a;
}

std::string FormatDone(const Done& d) {
  std::map<std::string, std::string> f{
      {"id", std::to_string(d.id)},
      {"pid", std::to_string(d.pid)},
      {"window", std::to_string(d.window)},
      {"opened_ns", std::to_string(d.opened_ns)},
      {"closed_ns", std::to_string(d.closed_ns)},
      {"steps", std::to_string(d.steps)},
      {"request_to_open_ns", std::to_string(d.request_to_open_ns)}};
  if (!d.problem.empty()) f["problem"] = d.problem;
  return FormatFields(f);
}

std::optional<Done> ParseDone(std::string_view text, std::string* why) {
  auto f = ParseFields(text, why);
  if (!f) return std::nullopt;
  Done d;
  d.problem = Text(*f, "problem");
  if (!U64(*f, "id", d.id, true, why) || !U64(*f, "pid", d.pid, true, why) ||
      !U64(*f, "window", d.window, false, why) || !U64(*f, "opened_ns", d.opened_ns, false, why) ||
      !U64(*f, "closed_ns", d.closed_ns, false, why) || !U64(*f, "steps", d.steps, false, why) ||
      !U64(*f, "request_to_open_ns", d.request_to_open_ns, false, why))
    return std::nullopt;
  return d;
}

std::string FormatGo(uint64_t at_ns) { return FormatFields({{"at_ns", std::to_string(at_ns)}}); }

std::optional<uint64_t> ParseGo(std::string_view text, std::string* why) {
  auto f = ParseFields(text, why);
  uint64_t at = 0;
  if (!f || !U64(*f, "at_ns", at, true, why)) return std::nullopt;
  return at;
}

uint64_t ChooseStart(const std::vector<std::vector<uint64_t>>& steps, uint64_t not_before) {
  std::vector<uint64_t> periods;
  uint64_t last = 0;
  for (const std::vector<uint64_t>& s : steps) {
    for (size_t i = 1; i < s.size(); ++i)
      if (s[i] > s[i - 1]) periods.push_back(s[i] - s[i - 1]);
    if (!s.empty()) last = std::max(last, s.back());
  }
  if (periods.empty() || last == 0) return not_before;
  std::nth_element(periods.begin(), periods.begin() + periods.size() / 2, periods.end());
  const uint64_t p = std::max<uint64_t>(periods[periods.size() / 2], 1);
  uint64_t t = last + p / 2;
  if (t < not_before) t += (not_before - t + p - 1) / p * p;
  return t;
}

}  // namespace kprof::ondemand
