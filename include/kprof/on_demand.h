// On-demand capture (docs/capture.md, "On demand"): `kprof run --on-demand` starts a job whose
// processes stay dormant (CUPTI not attached); `kprof capture RUN_DIR` asks every process of the
// job for one window. The two sides talk through small files in RUN_DIR/control, each written
// whole (a temporary file renamed), so a reader never sees half of one:
//
//   PID.agent        the agent of process PID: its rank and state (starting, dormant, capturing,
//   ended) request          kprof capture's request: its id, and --steps/--step-range or --duration
//   ID.PID.ack       the agent saw request ID: when the step range began, its last few times
//   ID.go            kprof capture: the moment after which each process opens at its next step
//   ID.PID.done      the agent recorded (or could not record) the window of request ID
//   capture.lock     held by the kprof capture in progress (its pid), so that two cannot overlap
//
// One text form for all of them: "key=value" lines. Shared by the agent and the CLI; plain C++
// (the agent links it), no CUPTI.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kprof::ondemand {

/// RUN_DIR/control.
std::string ControlDir(const std::string& run_dir);
/// The files of control folder `control` (above).
std::string RequestPath(const std::string& control);
std::string PresencePath(const std::string& control, uint64_t pid);
std::string GoPath(const std::string& control, uint64_t id);
/// ID.PID.ack or ID.PID.done (`what`: "ack" | "done").
std::string ReplyPath(const std::string& control, uint64_t id, uint64_t pid, const char* what);

/// "key=value" lines; a line without '=' or with an empty key is a problem (`why`).
std::string FormatFields(const std::map<std::string, std::string>& fields);
std::optional<std::map<std::string, std::string>> ParseFields(std::string_view text,
                                                              std::string* why);

/// Writes `text` to `path` whole (a temporary file in the same folder, renamed). False with
/// `why` set on failure.
bool WriteWhole(const std::string& path, const std::string& text, std::string* why);
/// The whole of a small file (at most 64 KiB); nothing when it is missing or unreadable.
std::optional<std::string> ReadSmall(const std::string& path);

/// CLOCK_REALTIME in ns: the clock both sides compare (one host, or hosts kept in step by NTP).
uint64_t WallNs();

struct Request {
  uint64_t id = 0;           ///< 1, 2, ... per run directory
  uint64_t steps = 0;        ///< with `range`: the number of steps the window holds
  std::string range;         ///< the NVTX range that marks a step ("" = none)
  uint64_t duration_ms = 0;  ///< without a range: how long the window stays open
  uint64_t issued_ns = 0;    ///< WallNs() when kprof capture wrote it

  bool operator==(const Request&) const = default;
};
std::string FormatRequest(const Request& r);
/// Nothing (with `why`) when a field is missing or not a number, or the request asks neither
/// steps of a range nor a duration.
std::optional<Request> ParseRequest(std::string_view text, std::string* why);

/// What an agent says about itself (PID.agent).
struct Presence {
  uint64_t pid = 0;
  std::string rank;   ///< "" when the launcher set none
  std::string state;  ///< starting | dormant | attached | capturing | ended
  uint64_t windows = 0;
  uint64_t last_request = 0;  ///< the id of the last request it handled
};
std::string FormatPresence(const Presence& p);
std::optional<Presence> ParsePresence(std::string_view text, std::string* why);

/// ID.PID.ack: the step range's recent begin times (WallNs, oldest first), or a problem.
struct Ack {
  uint64_t id = 0, pid = 0;
  std::vector<uint64_t> step_ns;
  std::string problem;  ///< "" = none; else why this process will record no window
};
std::string FormatAck(const Ack& a);
std::optional<Ack> ParseAck(std::string_view text, std::string* why);

/// ID.PID.done: the window the process recorded.
struct Done {
  uint64_t id = 0, pid = 0;
  uint64_t window = 0;  ///< its number in the process (1, 2, ...); 0 = none recorded
  uint64_t opened_ns = 0, closed_ns = 0;  ///< WallNs
  uint64_t steps = 0;                     ///< steps recorded (with a step range)
  uint64_t request_to_open_ns = 0;        ///< from the request's issue to the window's opening
  std::string problem;                    ///< "" = recorded as asked
};
std::string FormatDone(const Done& d);
std::optional<Done> ParseDone(std::string_view text, std::string* why);

/// ID.go: the moment (WallNs; 0 = at once) after which each process opens at its next step.
std::string FormatGo(uint64_t at_ns);
std::optional<uint64_t> ParseGo(std::string_view text, std::string* why);

/// The moment after which every process opens its window at the next begin of the step range,
/// chosen so that all processes open at the same step: half a step after a step boundary, where
/// no process is near one (each process's steps begin at nearly the same moments in a
/// synchronous job; they may differ by up to half a step). `steps`: each process's recent begin
/// times (oldest first); `not_before`: the earliest moment the processes can learn of the choice.
/// Without two begins in any process, `not_before` itself.
uint64_t ChooseStart(const std::vector<std::vector<uint64_t>>& steps, uint64_t not_before);

}  // namespace kprof::ondemand
