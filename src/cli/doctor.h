// Internal to the CLI: `kprof doctor`, what this machine will record (docs/cli.md). Gathering
// (system calls, child processes: doctor_gather.cpp) is kept apart from judging and rendering
// (pure functions of the facts: doctor.cpp), so that every verdict can be tested on made-up
// facts without a GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kprof::cli {

/// One GPU as the driver reports it.
struct DoctorGpu {
  std::string name;
  int cc_major = 0, cc_minor = 0;  ///< compute capability
  uint64_t memory_bytes = 0;       ///< cuDeviceTotalMem
};

/// The CUDA driver, probed in a child process: libcuda.so.1 loaded with dlopen (kprof links no
/// CUDA), cuInit, the devices.
struct DoctorDriver {
  bool probed = false;       ///< the child answered
  std::string probe_error;   ///< why it did not (it crashed or did not return in time)
  bool libcuda = false;      ///< dlopen("libcuda.so.1") succeeded
  std::string libcuda_path;  ///< the file the loader took
  std::string load_error;    ///< dlerror() or a missing entry point, when !libcuda
  int driver_version = 0;    ///< cuDriverGetVersion: 1000*major + 10*minor; 0 unknown
  bool init_called = false;  ///< cuInit was reached
  int init_result = 0;       ///< cuInit's CUresult
  std::string init_error;    ///< cuGetErrorName of it ("" when that failed too)
  std::vector<DoctorGpu> gpus;
  std::string device_error;   ///< the first failing call after cuInit (count, name, memory)
  std::string kernel_module;  ///< the kernel module's version (/proc/driver/nvidia/version)
  std::optional<std::string> visible_devices;  ///< CUDA_VISIBLE_DEVICES, when set
};

/// kprof's agent (libkprof_agent.so), looked up as `kprof run` does and loaded in a child.
struct DoctorAgent {
  std::string path;                  ///< "" when not found
  bool from_env = false;             ///< path came from $KPROF_AGENT
  bool built = true;                 ///< kprof was built with the agent (CUDA toolkit with CUPTI)
  bool loads = false;                ///< dlopen succeeded in the child
  std::string load_error;            ///< dlerror() when it did not
  bool nvtx_entry = false;           ///< exports InitializeInjectionNvtx2
  std::string cupti_soname;          ///< the libcupti it needs (DT_NEEDED), e.g. libcupti.so.13
  std::vector<std::string> runpath;  ///< its RUNPATH, $ORIGIN expanded
};

/// The libcupti a program loads.
struct DoctorCupti {
  std::string path;         ///< "" when not resolved
  bool bound = false;       ///< found by loading the agent (else by its RUNPATH, on the side)
  uint32_t version = 0;     ///< cuptiGetVersion; 0 unknown
  std::string error;        ///< why path or version is unknown
  bool nvtx_entry = false;  ///< exports InitializeInjectionNvtx2
  std::string soname;       ///< its DT_SONAME
};

/// python3 from PATH, and PyTorch in it.
struct DoctorTorch {
  bool python = false;        ///< python3 found and it answered
  std::string python_path;    ///< its sys.executable
  std::string error;          ///< why not, or why torch did not import (not ModuleNotFoundError)
  bool torch = false;         ///< `import torch` worked
  std::string version;        ///< torch.__version__
  std::string cuda;           ///< torch.version.cuda ("" for a CPU build)
  std::string cupti_path;     ///< the libcupti torch loads, or ships when import loads none
  bool cupti_loaded = false;  ///< cupti_path was mapped into the process after `import torch`
  std::string cupti_soname;   ///< DT_SONAME of cupti_path
  bool layer = false;         ///< python/sitecustomize.py next to kprof (kprof run --pytorch)
};

/// Permission to read the GPU's performance counters.
struct DoctorCounters {
  std::optional<int> admin_only;  ///< RmProfilingAdminOnly; nullopt: the file is absent
  bool root = false;              ///< effective uid 0
  bool cap_sys_admin = false;     ///< CAP_SYS_ADMIN in the effective set
};

/// Signs of another profiler in kprof's own environment.
struct DoctorEnv {
  std::optional<std::string> cuda_injection, nvtx_injection;  ///< the *_INJECTION64_PATH values
  std::string ld_preload;
};

/// Free space where runs go.
struct DoctorDisk {
  std::string dir;
  bool ok = false;
  std::string error;  ///< statvfs's error
  uint64_t free_bytes = 0;
};

struct DoctorFacts {
  DoctorDriver driver;
  DoctorAgent agent;
  DoctorCupti cupti;  ///< the one a CUDA program loads through the agent
  DoctorTorch torch;
  DoctorCounters counters;
  DoctorEnv env;
  DoctorDisk disk;
};

enum class CheckStatus { Ok, Info, Warn, Problem };

/// One line of the report: a verdict, a one-line reason and, for a problem, the fix.
struct Check {
  std::string
      name;  ///< "GPU", "agent", "CUPTI", "PyTorch", "NVTX", "counters", "profilers", "disk"
  CheckStatus status = CheckStatus::Ok;
  std::string message;
  std::string fix;  ///< "" when there is nothing to do
};

/// kprof doctor's exit status when a check is a problem (0 otherwise, 2 for a usage error).
inline constexpr int kDoctorExitProblem = 1;

/// Below this much free space in the run directory's file system the disk check warns.
inline constexpr uint64_t kDoctorLowDiskBytes = uint64_t{1} << 30;

/// Collects the facts (loads libcuda and the agent in child processes, runs python3 with a
/// timeout); `dir` is where free space is measured.
DoctorFacts GatherFacts(const std::string& dir);

/// The verdicts on `f`, in report order. Pure.
std::vector<Check> Judge(const DoctorFacts& f);

/// kDoctorExitProblem when a check is a problem, else 0.
int DoctorExitCode(const std::vector<Check>& checks);

/// The screen: a line per check (a fix line under each problem), then the summary.
std::string RenderDoctorText(const std::vector<Check>& checks);

/// The same checks, and the facts behind them, as a JSON object.
std::string RenderDoctorJson(const DoctorFacts& f, const std::vector<Check>& checks);

/// "13.0 (API 130001)" for CUPTI's API version (xxyyzz from CUDA 13 on), "API vN" before.
std::string CuptiVersionText(uint32_t version);

// What gathering parses, exposed for the tests.

/// The kernel module's version from /proc/driver/nvidia/version's text ("" when absent).
std::string ParseKernelModuleVersion(const std::string& text);
/// RmProfilingAdminOnly from /proc/driver/nvidia/params' text (nullopt when absent).
std::optional<int> ParseAdminOnly(const std::string& text);
/// Whether /proc/self/status' text gives CAP_SYS_ADMIN in CapEff.
bool ParseCapSysAdmin(const std::string& text);

}  // namespace kprof::cli
