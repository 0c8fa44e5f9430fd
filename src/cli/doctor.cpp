// kprof doctor [--json] [--dir DIR]: one screen on what this machine will record. The facts
// are gathered in doctor_gather.cpp; here they are judged (each check OK, INFO, WARN or PROBLEM
// with a one-line reason and, for a problem, the fix) and rendered, as pure functions.
#include "cli/doctor.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/common.h"
#include "kprof/cli.h"

namespace kprof::cli {
namespace {

using nlohmann::ordered_json;

constexpr int kCudaErrorStubLibrary = 34;  // CUDA_ERROR_STUB_LIBRARY (cuda.h)
constexpr int kCudaErrorNoDevice = 100;    // CUDA_ERROR_NO_DEVICE
constexpr const char* kDriverFix =
    "install the NVIDIA driver (it provides libcuda.so.1), then run kprof doctor again";

Check Make(const char* name, CheckStatus s, std::string message, std::string fix = "") {
  return Check{name, s, std::move(message), std::move(fix)};
}

std::string GiB(uint64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / static_cast<double>(1ULL << 30));
}

/// "CUDA 13.0" from cuDriverGetVersion's 13000.
std::string CudaVersionText(int v) { return fmt::format("CUDA {}.{}", v / 1000, v % 1000 / 10); }

/// The CUDA major version a libcupti is for: from its API version (xxyyzz since CUDA 13), else
/// from its soname (libcupti.so.12); 0 when neither says.
int CuptiCudaMajor(const DoctorCupti& c) {
  if (c.version >= 130000) return static_cast<int>(c.version / 10000);
  const size_t dot = c.soname.rfind(".so.");
  if (dot == std::string::npos) return 0;
  return std::atoi(c.soname.c_str() + dot + 4);
}

/// "N x NAME (compute MAJOR.MINOR, X GiB)", runs of identical GPUs grouped.
std::string GpuList(const std::vector<DoctorGpu>& gpus) {
  std::string out;
  for (size_t i = 0; i < gpus.size();) {
    size_t j = i;
    while (j < gpus.size() && gpus[j].name == gpus[i].name &&
           gpus[j].cc_major == gpus[i].cc_major && gpus[j].cc_minor == gpus[i].cc_minor &&
           gpus[j].memory_bytes == gpus[i].memory_bytes)
      ++j;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} x {} (compute {}.{}, {})", j - i, gpus[i].name, gpus[i].cc_major,
                       gpus[i].cc_minor, GiB(gpus[i].memory_bytes));
    i = j;
  }
  return out;
}

Check JudgeGpu(const DoctorDriver& d) {
  if (!d.probed)
    return Make("GPU", CheckStatus::Problem, "probing the CUDA driver failed: " + d.probe_error,
                "see what nvidia-smi says about the driver");
  if (!d.libcuda) {
    if (d.load_error.find("cannot open shared object file") != std::string::npos)
      return Make("GPU", CheckStatus::Problem, "libcuda.so.1 not found: no NVIDIA driver",
                  kDriverFix);
    return Make("GPU", CheckStatus::Problem, "libcuda.so.1 did not load: " + d.load_error,
                kDriverFix);
  }
  const std::string at = d.libcuda_path.empty() ? "" : " (" + d.libcuda_path + ")";
  // The stub's cuGetErrorName fails too: its one error is named here.
  const std::string err = !d.init_error.empty() ? d.init_error
                          : d.init_result == kCudaErrorStubLibrary
                              ? "CUDA_ERROR_STUB_LIBRARY"
                              : fmt::format("CUresult {}", d.init_result);
  // The toolkit's stubs/libcuda.so links programs; it is no driver, and cuInit says so.
  if ((d.init_called && d.init_result == kCudaErrorStubLibrary) ||
      d.libcuda_path.find("/stubs/") != std::string::npos)
    return Make(
        "GPU", CheckStatus::Problem,
        "libcuda.so.1" + at + " is the CUDA stub library, not a driver (cuInit: " + err + ")",
        "install the NVIDIA driver; take the toolkit's stubs/ folder off "
        "LD_LIBRARY_PATH");
  const std::string visible =
      d.visible_devices ? " (CUDA_VISIBLE_DEVICES=" + *d.visible_devices + ")" : "";
  if (d.init_called && d.init_result != 0) {
    const std::string why = d.init_result == kCudaErrorNoDevice ? ": the driver sees no GPU" : "";
    return Make("GPU", CheckStatus::Problem, "cuInit failed: " + err + why + visible,
                d.visible_devices && d.init_result == kCudaErrorNoDevice
                    ? "check CUDA_VISIBLE_DEVICES"
                    : "see what nvidia-smi and the kernel log (dmesg) say about the driver");
  }
  if (!d.device_error.empty())
    return Make("GPU", CheckStatus::Problem, "cuInit succeeded, then " + d.device_error,
                "see what nvidia-smi says about the GPUs");
  if (d.gpus.empty())
    return Make("GPU", CheckStatus::Problem, "the driver sees no GPU" + visible,
                d.visible_devices ? "check CUDA_VISIBLE_DEVICES" : "see what nvidia-smi says");
  std::string driver = "driver";
  if (!d.kernel_module.empty()) driver += " " + d.kernel_module;
  if (d.driver_version > 0) driver += " (" + CudaVersionText(d.driver_version) + ")";
  return Make("GPU", CheckStatus::Ok, GpuList(d.gpus) + "; " + driver + visible);
}

Check JudgeAgent(const DoctorAgent& a) {
  if (a.path.empty()) {
    if (!a.built)
      return Make("agent", CheckStatus::Problem,
                  "kprof was built without the CUDA toolkit (CUPTI): there is no agent",
                  "install the CUDA toolkit with CUPTI and rebuild kprof");
    return Make("agent", CheckStatus::Problem,
                "libkprof_agent.so not found next to the kprof executable",
                "set KPROF_AGENT to its path, or rebuild kprof with the CUDA toolkit");
  }
  const std::string src = a.from_env ? " (KPROF_AGENT)" : "";
  if (!a.loads) {
    std::string fix = "see what it lacks: ldd " + a.path;
    if (a.load_error.find("libcuda.so") != std::string::npos)
      fix = "install the NVIDIA driver: the agent needs its libcuda.so.1";
    else if (a.load_error.find("libcupti.so") != std::string::npos)
      fix = "install CUPTI (the CUDA toolkit's), or put its folder on LD_LIBRARY_PATH";
    return Make("agent", CheckStatus::Problem, a.path + src + " does not load: " + a.load_error,
                fix);
  }
  return Make("agent", CheckStatus::Ok, a.path + src + " loads");
}

Check JudgeCupti(const DoctorFacts& f) {
  const DoctorCupti& c = f.cupti;
  if (f.agent.path.empty()) return Make("CUPTI", CheckStatus::Info, "unknown: no agent to load it");
  if (c.path.empty())
    return Make("CUPTI", CheckStatus::Warn,
                "the agent's libcupti was not found" + (c.error.empty() ? "" : ": " + c.error),
                "put CUPTI's folder (the CUDA toolkit's lib64) on LD_LIBRARY_PATH");
  const std::string version = c.version > 0 ? ", CUPTI " + CuptiVersionText(c.version) : "";
  const std::string how = c.bound ? "" : " (from the agent's search path; the agent did not load)";
  // CUPTI of CUDA N needs a driver for CUDA N or newer.
  const int need = CuptiCudaMajor(c), have = f.driver.driver_version / 1000;
  if (need > 0 && have > 0 && have < need)
    return Make(
        "CUPTI", CheckStatus::Problem,
        fmt::format("{}{}: CUPTI for CUDA {} needs a driver for CUDA {} or newer; the "
                    "driver is for {}",
                    c.path, version, need, need, CudaVersionText(f.driver.driver_version)),
        fmt::format("update the NVIDIA driver, or build kprof with a CUDA {} toolkit", have));
  if (c.version == 0 && !c.error.empty())
    return Make("CUPTI", CheckStatus::Warn, "CUDA programs load " + c.path + how + "; " + c.error);
  return Make("CUPTI", CheckStatus::Ok, "CUDA programs load " + c.path + version + how);
}

Check JudgeTorch(const DoctorFacts& f) {
  const DoctorTorch& t = f.torch;
  if (!t.python) return Make("PyTorch", CheckStatus::Info, "not checked: " + t.error);
  if (!t.torch) {
    if (!t.error.empty())
      return Make("PyTorch", CheckStatus::Warn, t.python_path + ": " + t.error,
                  "fix the PyTorch installation of " + t.python_path);
    return Make("PyTorch", CheckStatus::Info, "not found (python3 has no torch)");
  }
  const std::string what =
      fmt::format("torch {} ({})", t.version, t.cuda.empty() ? "a CPU build" : "CUDA " + t.cuda);
  if (t.cuda.empty()) return Make("PyTorch", CheckStatus::Info, what + ": its programs use no GPU");
  if (!t.layer)
    return Make("PyTorch", CheckStatus::Warn,
                what +
                    "; kprof's python/sitecustomize.py is missing: --pytorch adds no op "
                    "ranges",
                "set KPROF_PYTHON_DIR to the folder of kprof's sitecustomize.py");
  // The agent binds to an already loaded libcupti only when the sonames are equal.
  const std::string& mine = f.agent.cupti_soname;
  if (!t.cupti_soname.empty() && !mine.empty() && t.cupti_soname != mine)
    return Make("PyTorch", CheckStatus::Warn,
                what + " uses " + t.cupti_soname + ", the agent " + mine +
                    ": a PyTorch program loads both; kprof records through the agent's",
                "use a PyTorch build for the agent's CUDA version, or build kprof with the "
                "toolkit PyTorch was built for");
  if (t.cupti_path.empty())
    return Make("PyTorch", CheckStatus::Ok, what + "; import torch loads no libcupti");
  return Make("PyTorch", CheckStatus::Ok,
              what + (t.cupti_loaded ? "; import torch loads " : "; ships ") + t.cupti_path);
}

Check JudgeNvtx(const DoctorFacts& f) {
  const DoctorAgent& a = f.agent;
  const DoctorTorch& t = f.torch;
  if (a.path.empty()) return Make("NVTX", CheckStatus::Info, "unknown: no agent");
  // kprof run sets NVTX_INJECTION64_PATH to the agent, whose InitializeInjectionNvtx2 forwards
  // to the libcupti it is bound to: PyTorch's copy when import torch loaded one of the same
  // soname before CUDA started (the loader reuses it), else the one on the agent's path.
  const std::string plain = f.cupti.path.empty() ? "(not found)" : f.cupti.path;
  std::string torch;
  if (t.torch && !t.cuda.empty()) {
    const bool same =
        t.cupti_loaded && !t.cupti_path.empty() &&
        (t.cupti_soname.empty() || a.cupti_soname.empty() || t.cupti_soname == a.cupti_soname);
    torch = "; PyTorch programs: " + (same ? t.cupti_path + " (torch's own)" : plain);
  }
  const std::string message =
      "kprof run sets NVTX_INJECTION64_PATH to the agent, which "
      "forwards to the libcupti the process loads: CUDA programs: " +
      plain + torch;
  if (!a.loads) return Make("NVTX", CheckStatus::Info, message + " (not verified: no agent)");
  if (!a.nvtx_entry)
    return Make("NVTX", CheckStatus::Warn,
                a.path + " has no InitializeInjectionNvtx2: NVTX ranges will not be recorded",
                "rebuild kprof (its agent forwards NVTX to CUPTI)");
  if (!f.cupti.path.empty() && !f.cupti.nvtx_entry)
    return Make("NVTX", CheckStatus::Warn,
                f.cupti.path + " has no InitializeInjectionNvtx2: CUPTI will not see NVTX ranges",
                "use the CUPTI of the CUDA toolkit kprof was built with");
  return Make("NVTX", CheckStatus::Ok, message);
}

Check JudgeCounters(const DoctorCounters& c) {
  if (!c.admin_only)
    return Make("counters", CheckStatus::Info,
                "unknown: no RmProfilingAdminOnly in /proc/driver/nvidia/params (no NVIDIA "
                "kernel module loaded?)");
  if (*c.admin_only == 0)
    return Make("counters", CheckStatus::Ok,
                "hardware counters (--metrics) open to every user (RmProfilingAdminOnly: 0)");
  if (c.root || c.cap_sys_admin)
    return Make("counters", CheckStatus::Ok,
                std::string("hardware counters (--metrics) are for administrators only, and "
                            "kprof runs ") +
                    (c.root ? "as root" : "with CAP_SYS_ADMIN"));
  return Make("counters", CheckStatus::Problem,
              "hardware counters (--metrics) refused: ERR_NVGPUCTRPERM (RmProfilingAdminOnly: 1, "
              "and kprof runs neither as root nor with CAP_SYS_ADMIN)",
              "run as root, or set NVreg_RestrictProfilingToAdminUsers=0 (modprobe option) / see "
              "https://developer.nvidia.com/ERR_NVGPUCTRPERM");
}

Check JudgeProfilers(const DoctorEnv& e) {
  std::vector<std::string> seen;
  if (e.cuda_injection) seen.push_back("CUDA_INJECTION64_PATH=" + *e.cuda_injection);
  if (e.nvtx_injection) seen.push_back("NVTX_INJECTION64_PATH=" + *e.nvtx_injection);
  // Nsight Systems' and Nsight Compute's injection libraries, when preloaded.
  for (const char* tool : {"nsys", "ncu", "nsight", "ToolsInjection", "InterceptorInjection"})
    if (e.ld_preload.find(tool) != std::string::npos) {
      seen.push_back("LD_PRELOAD=" + e.ld_preload);
      break;
    }
  if (seen.empty())
    return Make("profilers", CheckStatus::Ok,
                "no other profiler in kprof's environment (no CUDA or NVTX injection set)");
  std::string list;
  for (const std::string& s : seen) list += (list.empty() ? "" : ", ") + s;
  return Make("profilers", CheckStatus::Warn,
              "another tool (such as nsys) is attached: " + list +
                  "; kprof run replaces the injection variables for its program",
              "run kprof outside the other profiler");
}

Check JudgeDisk(const DoctorDisk& d) {
  if (!d.ok)
    return Make("disk", CheckStatus::Warn, "cannot measure free space in " + d.dir + ": " + d.error,
                "check the folder runs go to (kprof doctor --dir DIR measures DIR)");
  if (d.free_bytes < kDoctorLowDiskBytes)
    return Make(
        "disk", CheckStatus::Warn,
        fmt::format("{:.0f} MiB free in {}: every record takes 64 bytes, and a long "
                    "program's run can fill it",
                    static_cast<double>(d.free_bytes) / static_cast<double>(1 << 20), d.dir),
        "free space, or write runs elsewhere (kprof run -o DIR)");
  return Make("disk", CheckStatus::Ok, GiB(d.free_bytes) + " free in " + d.dir);
}

const char* StatusWord(CheckStatus s) {
  switch (s) {
    case CheckStatus::Ok:
      return "OK";
    case CheckStatus::Info:
      return "INFO";
    case CheckStatus::Warn:
      return "WARN";
    case CheckStatus::Problem:
      return "PROBLEM";
  }
  return "?";
}

ordered_json FactsJson(const DoctorFacts& f) {
  const auto opt = [](const auto& o) { return o ? ordered_json(*o) : ordered_json(nullptr); };
  const DoctorDriver& d = f.driver;
  ordered_json gpus = ordered_json::array();
  for (const DoctorGpu& g : d.gpus)
    gpus.push_back({{"name", g.name},
                    {"compute_capability", fmt::format("{}.{}", g.cc_major, g.cc_minor)},
                    {"memory_bytes", g.memory_bytes}});
  ordered_json j;
  j["driver"] = {{"probed", d.probed},
                 {"probe_error", d.probe_error},
                 {"libcuda", d.libcuda},
                 {"libcuda_path", d.libcuda_path},
                 {"load_error", d.load_error},
                 {"cuda_version", d.driver_version},
                 {"kernel_module", d.kernel_module},
                 {"cuinit_called", d.init_called},
                 {"cuinit_result", d.init_result},
                 {"cuinit_error", d.init_error},
                 {"device_error", d.device_error},
                 {"cuda_visible_devices", opt(d.visible_devices)},
                 {"gpus", gpus}};
  const DoctorAgent& a = f.agent;
  j["agent"] = {{"path", a.path},
                {"from_env", a.from_env},
                {"built", a.built},
                {"loads", a.loads},
                {"load_error", a.load_error},
                {"nvtx_entry", a.nvtx_entry},
                {"cupti_soname", a.cupti_soname},
                {"runpath", a.runpath}};
  const DoctorCupti& c = f.cupti;
  j["cupti"] = {{"path", c.path},   {"bound_by_agent", c.bound},  {"version", c.version},
                {"error", c.error}, {"nvtx_entry", c.nvtx_entry}, {"soname", c.soname}};
  const DoctorTorch& t = f.torch;
  j["pytorch"] = {{"python", t.python},
                  {"python_path", t.python_path},
                  {"error", t.error},
                  {"torch", t.torch},
                  {"version", t.version},
                  {"cuda", t.cuda},
                  {"cupti_path", t.cupti_path},
                  {"cupti_loaded_by_import", t.cupti_loaded},
                  {"cupti_soname", t.cupti_soname},
                  {"kprof_layer", t.layer}};
  j["counters"] = {{"rm_profiling_admin_only", opt(f.counters.admin_only)},
                   {"root", f.counters.root},
                   {"cap_sys_admin", f.counters.cap_sys_admin}};
  j["environment"] = {{"CUDA_INJECTION64_PATH", opt(f.env.cuda_injection)},
                      {"NVTX_INJECTION64_PATH", opt(f.env.nvtx_injection)},
                      {"LD_PRELOAD", f.env.ld_preload}};
  j["disk"] = {{"dir", f.disk.dir},
               {"ok", f.disk.ok},
               {"error", f.disk.error},
               {"free_bytes", f.disk.free_bytes}};
  return j;
}

}  // namespace

std::string ParseKernelModuleVersion(const std::string& text) {
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 ..." (or "Open
  // Kernel Module for x86_64  580.65.06  Release Build ...").
  const size_t at = text.find("Kernel Module");
  if (at == std::string::npos) return "";
  std::istringstream in(text.substr(at, text.find('\n', at) - at));
  for (std::string word; in >> word;)
    if (!word.empty() && std::isdigit(static_cast<unsigned char>(word.front())) &&
        word.find('.') != std::string::npos)
      return word;
  return "";
}

std::optional<int> ParseAdminOnly(const std::string& text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("RmProfilingAdminOnly:", 0) != 0) continue;
    const std::string v = line.substr(line.find(':') + 1);
    const size_t d = v.find_first_of("0123456789");
    if (d == std::string::npos) return std::nullopt;
    return std::atoi(v.c_str() + d);
  }
  return std::nullopt;
}

bool ParseCapSysAdmin(const std::string& text) {
  constexpr int kCapSysAdmin = 21;  // linux/capability.h
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const unsigned long long caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    return ((caps >> kCapSysAdmin) & 1ULL) != 0;
  }
  return false;
}

std::string CuptiVersionText(uint32_t v) {
  if (v >= 130000) return fmt::format("{}.{} (API {})", v / 10000, v % 10000 / 100, v);
  return fmt::format("API v{}", v);
}

std::vector<Check> Judge(const DoctorFacts& f) {
  return {JudgeGpu(f.driver), JudgeAgent(f.agent),       JudgeCupti(f),         JudgeTorch(f),
          JudgeNvtx(f),       JudgeCounters(f.counters), JudgeProfilers(f.env), JudgeDisk(f.disk)};
}

int DoctorExitCode(const std::vector<Check>& checks) {
  for (const Check& c : checks)
    if (c.status == CheckStatus::Problem) return kDoctorExitProblem;
  return kExitOk;
}

std::string RenderDoctorText(const std::vector<Check>& checks) {
  std::string out = "kprof doctor: what this machine will record\n\n";
  size_t problems = 0, warnings = 0;
  for (const Check& c : checks) {
    out += fmt::format("  {:<8} {:<10} {}\n", StatusWord(c.status), c.name, c.message);
    if (!c.fix.empty()) out += fmt::format("  {:<8} {:<10} fix: {}\n", "", "", c.fix);
    problems += c.status == CheckStatus::Problem;
    warnings += c.status == CheckStatus::Warn;
  }
  const std::string warned =
      warnings == 0 ? "" : fmt::format(" ({} warning{})", warnings, warnings == 1 ? "" : "s");
  if (problems == 0) return out + "\nEverything kprof needs is here" + warned + ".\n";
  out += fmt::format("\n{} problem{}{}:\n", problems, problems == 1 ? "" : "s", warned);
  for (const Check& c : checks)
    if (c.status == CheckStatus::Problem) out += "  " + c.name + ": " + c.message + "\n";
  return out;
}

std::string RenderDoctorJson(const DoctorFacts& f, const std::vector<Check>& checks) {
  ordered_json j;
  j["kprof_version"] = KPROF_VERSION;
  j["exit_code"] = DoctorExitCode(checks);
  ordered_json list = ordered_json::array();
  for (const Check& c : checks) {
    std::string s = StatusWord(c.status);
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    ordered_json one = {{"name", c.name}, {"status", s}, {"message", c.message}};
    if (!c.fix.empty()) one["fix"] = c.fix;
    list.push_back(one);
  }
  j["checks"] = list;
  j["facts"] = FactsJson(f);
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace kprof::cli

namespace kprof {

int CmdDoctor(const std::vector<std::string>& args) {
  CLI::App app{
      "What this machine will record: the GPUs and driver, kprof's agent, the CUPTI and "
      "PyTorch a program loads, NVTX delivery, counter permissions, other profilers, free space. "
      "Exit 0 when kprof can record, 1 with the problems (docs/cli.md).",
      "kprof doctor"};
  bool json = false;
  std::string dir = ".";
  app.add_flag("--json", json, "Print the checks and the facts behind them as a JSON object");
  app.add_option("--dir", dir, "Where runs will be written, for the free space (default: here)");
  if (auto rc = cli::Parse(app, args)) return *rc;
  const cli::DoctorFacts facts = cli::GatherFacts(dir);
  const std::vector<cli::Check> checks = cli::Judge(facts);
  const std::string out =
      json ? cli::RenderDoctorJson(facts, checks) : cli::RenderDoctorText(checks);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return cli::DoctorExitCode(checks);
}

}  // namespace kprof
