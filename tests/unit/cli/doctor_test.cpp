// kprof doctor: the verdicts on made-up facts (no GPU needed), the parsers of /proc's files, and
// the real kprof executable on this machine.
#include "cli/doctor.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "kprof/cli.h"
#include "test_util.h"

namespace kprof::cli {
namespace {

using test::RunCommand;
using test::TempDir;

/// A machine where everything kprof needs is there: one GPU, a driver, the agent, its CUPTI,
/// PyTorch using the same CUPTI soname, counters open, nothing else attached, room on disk.
DoctorFacts GoodFacts() {
  DoctorFacts f;
  DoctorDriver& d = f.driver;
  d.probed = true;
  d.libcuda = true;
  d.libcuda_path = "/usr/lib/x86_64-linux-gnu/libcuda.so.1";
  d.driver_version = 13000;
  d.init_called = true;
  d.kernel_module = "580.1.2";
  d.gpus = {{"Test GPU", 9, 0, uint64_t{80} << 30}};
  DoctorAgent& a = f.agent;
  a.path = "/opt/kprof/libkprof_agent.so";
  a.loads = true;
  a.nvtx_entry = true;
  a.cupti_soname = "libcupti.so.13";
  DoctorCupti& c = f.cupti;
  c.path = "/usr/local/cuda/lib64/libcupti.so.13";
  c.bound = true;
  c.version = 130001;
  c.nvtx_entry = true;
  c.soname = "libcupti.so.13";
  DoctorTorch& t = f.torch;
  t.python = true;
  t.python_path = "/usr/bin/python3";
  t.torch = true;
  t.version = "2.9.0";
  t.cuda = "13.0";
  t.cupti_path = c.path;
  t.cupti_loaded = true;
  t.cupti_soname = "libcupti.so.13";
  t.layer = true;
  f.counters.admin_only = 0;
  f.disk = {"/runs", true, "", uint64_t{100} << 30};
  return f;
}

Check Find(const std::vector<Check>& checks, const std::string& name) {
  for (const Check& c : checks)
    if (c.name == name) return c;
  throw std::runtime_error("no check " + name);
}

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Doctor, AllGoodExitsZero) {
  const auto checks = Judge(GoodFacts());
  for (const Check& c : checks) EXPECT_EQ(c.status, CheckStatus::Ok) << c.name << ": " << c.message;
  EXPECT_EQ(DoctorExitCode(checks), kExitOk);
  const std::string text = RenderDoctorText(checks);
  EXPECT_TRUE(Has(text, "Everything kprof needs is here.")) << text;
  EXPECT_TRUE(Has(Find(checks, "GPU").message, "1 x Test GPU (compute 9.0, 80.0 GiB)"));
  EXPECT_TRUE(Has(Find(checks, "GPU").message, "driver 580.1.2 (CUDA 13.0)"));
  EXPECT_TRUE(Has(Find(checks, "CUPTI").message, "CUPTI 13.0 (API 130001)"));
}

TEST(Doctor, NoDriverIsAProblemThatSaysWhy) {
  DoctorFacts f = GoodFacts();
  f.driver = DoctorDriver{};
  f.driver.probed = true;
  f.driver.load_error = "libcuda.so.1: cannot open shared object file: No such file or directory";
  f.agent.loads = false;
  f.agent.load_error = f.driver.load_error;
  const auto checks = Judge(f);
  const Check gpu = Find(checks, "GPU");
  EXPECT_EQ(gpu.status, CheckStatus::Problem);
  EXPECT_EQ(gpu.message, "libcuda.so.1 not found: no NVIDIA driver");
  EXPECT_TRUE(Has(gpu.fix, "install the NVIDIA driver"));
  const Check agent = Find(checks, "agent");
  EXPECT_EQ(agent.status, CheckStatus::Problem);
  EXPECT_TRUE(Has(agent.fix, "libcuda.so.1")) << agent.fix;
  EXPECT_EQ(DoctorExitCode(checks), kDoctorExitProblem);
  const std::string text = RenderDoctorText(checks);
  EXPECT_TRUE(Has(text, "  PROBLEM  GPU        libcuda.so.1 not found: no NVIDIA driver\n"))
      << text;
  EXPECT_TRUE(Has(text, "\n2 problems:\n  GPU: libcuda.so.1 not found: no NVIDIA driver\n"))
      << text;
}

TEST(Doctor, StubLibraryIsNotADriver) {
  DoctorFacts f = GoodFacts();
  f.driver.gpus.clear();
  f.driver.libcuda_path = "/opt/cuda/lib64/libcuda.so.1";
  f.driver.init_result = 34;  // CUDA_ERROR_STUB_LIBRARY
  f.driver.init_error = "CUDA_ERROR_STUB_LIBRARY";
  const Check gpu = Find(Judge(f), "GPU");
  EXPECT_EQ(gpu.status, CheckStatus::Problem);
  EXPECT_TRUE(Has(gpu.message, "is the CUDA stub library, not a driver")) << gpu.message;
  EXPECT_TRUE(Has(gpu.message, "CUDA_ERROR_STUB_LIBRARY")) << gpu.message;
  // Known by its folder too, whatever cuInit answers.
  f.driver.libcuda_path = "/usr/local/cuda/lib64/stubs/libcuda.so";
  f.driver.init_result = 999;
  f.driver.init_error = "";
  EXPECT_TRUE(Has(Find(Judge(f), "GPU").message, "stub library")) << Find(Judge(f), "GPU").message;
}

TEST(Doctor, CuInitFailureNamesTheError) {
  DoctorFacts f = GoodFacts();
  f.driver.gpus.clear();
  f.driver.init_result = 100;
  f.driver.init_error = "CUDA_ERROR_NO_DEVICE";
  f.driver.visible_devices = "";
  const Check gpu = Find(Judge(f), "GPU");
  EXPECT_EQ(gpu.status, CheckStatus::Problem);
  EXPECT_EQ(gpu.message,
            "cuInit failed: CUDA_ERROR_NO_DEVICE: the driver sees no GPU (CUDA_VISIBLE_DEVICES=)");
  EXPECT_EQ(gpu.fix, "check CUDA_VISIBLE_DEVICES");
}

TEST(Doctor, AProbeThatCrashedIsAProblem) {
  DoctorFacts f = GoodFacts();
  f.driver = DoctorDriver{};
  f.driver.probe_error = "crashed (signal 11: Segmentation fault)";
  const Check gpu = Find(Judge(f), "GPU");
  EXPECT_EQ(gpu.status, CheckStatus::Problem);
  EXPECT_TRUE(Has(gpu.message, "crashed (signal 11")) << gpu.message;
}

TEST(Doctor, AdminOnlyCountersWithoutRootIsAProblemWithTheFix) {
  DoctorFacts f = GoodFacts();
  f.counters.admin_only = 1;
  auto checks = Judge(f);
  const Check c = Find(checks, "counters");
  EXPECT_EQ(c.status, CheckStatus::Problem);
  EXPECT_TRUE(Has(c.message, "hardware counters (--metrics) refused: ERR_NVGPUCTRPERM"))
      << c.message;
  EXPECT_EQ(c.fix,
            "run as root, or set NVreg_RestrictProfilingToAdminUsers=0 (modprobe option) / see "
            "https://developer.nvidia.com/ERR_NVGPUCTRPERM");
  EXPECT_EQ(DoctorExitCode(checks), kDoctorExitProblem);
  EXPECT_TRUE(Has(RenderDoctorText(checks), "fix: run as root"));
  f.counters.root = true;
  EXPECT_EQ(Find(Judge(f), "counters").status, CheckStatus::Ok);
  f.counters.root = false;
  f.counters.cap_sys_admin = true;
  EXPECT_EQ(Find(Judge(f), "counters").status, CheckStatus::Ok);
  f.counters.admin_only.reset();
  const Check unknown = Find(Judge(f), "counters");
  EXPECT_EQ(unknown.status, CheckStatus::Info);
  EXPECT_TRUE(Has(unknown.message, "unknown")) << unknown.message;
}

TEST(Doctor, TorchsOwnLibcuptiIsNamedForNvtx) {
  DoctorFacts f = GoodFacts();
  const std::string torch_cupti =
      "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13";
  f.torch.cupti_path = torch_cupti;
  const auto checks = Judge(f);
  const Check nvtx = Find(checks, "NVTX");
  EXPECT_EQ(nvtx.status, CheckStatus::Ok);
  EXPECT_TRUE(Has(nvtx.message, "CUDA programs: /usr/local/cuda/lib64/libcupti.so.13"))
      << nvtx.message;
  EXPECT_TRUE(Has(nvtx.message, "PyTorch programs: " + torch_cupti + " (torch's own)"))
      << nvtx.message;
  EXPECT_TRUE(Has(Find(checks, "PyTorch").message, "import torch loads " + torch_cupti));
  EXPECT_EQ(DoctorExitCode(checks), kExitOk);
}

TEST(Doctor, TorchWithAnotherCuptiSonameWarns) {
  DoctorFacts f = GoodFacts();
  f.torch.cuda = "12.8";
  f.torch.cupti_path = "/venv/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12";
  f.torch.cupti_soname = "libcupti.so.12";
  const auto checks = Judge(f);
  const Check torch = Find(checks, "PyTorch");
  EXPECT_EQ(torch.status, CheckStatus::Warn);
  EXPECT_TRUE(Has(torch.message, "uses libcupti.so.12, the agent libcupti.so.13")) << torch.message;
  // NVTX then goes to the agent's own libcupti: the toolkit's.
  EXPECT_TRUE(
      Has(Find(checks, "NVTX").message, "PyTorch programs: /usr/local/cuda/lib64/libcupti.so.13"));
  EXPECT_EQ(DoctorExitCode(checks), kExitOk);
}

TEST(Doctor, NoTorchIsInformationOnly) {
  DoctorFacts f = GoodFacts();
  f.torch = DoctorTorch{};
  f.torch.python = true;
  const auto checks = Judge(f);
  const Check t = Find(checks, "PyTorch");
  EXPECT_EQ(t.status, CheckStatus::Info);
  EXPECT_EQ(t.message, "not found (python3 has no torch)");
  EXPECT_FALSE(Has(Find(checks, "NVTX").message, "PyTorch programs"));
  EXPECT_EQ(DoctorExitCode(checks), kExitOk);
  f.torch.python = false;
  f.torch.error = "python3 not found in PATH";
  EXPECT_EQ(Find(Judge(f), "PyTorch").message, "not checked: python3 not found in PATH");
}

TEST(Doctor, AnotherInjectionWarns) {
  DoctorFacts f = GoodFacts();
  f.env.cuda_injection = "/opt/nsight-systems/target-linux-x64/libToolsInjection64.so";
  auto checks = Judge(f);
  const Check p = Find(checks, "profilers");
  EXPECT_EQ(p.status, CheckStatus::Warn);
  EXPECT_TRUE(Has(p.message, "CUDA_INJECTION64_PATH=/opt/nsight-systems")) << p.message;
  EXPECT_EQ(DoctorExitCode(checks), kExitOk);
  EXPECT_TRUE(Has(RenderDoctorText(checks), "Everything kprof needs is here (1 warning)."));
  f = GoodFacts();
  f.env.nvtx_injection = "/x/libcupti.so";
  EXPECT_EQ(Find(Judge(f), "profilers").status, CheckStatus::Warn);
  f = GoodFacts();
  f.env.ld_preload =
      "/opt/nsight-compute/target/linux-desktop-glibc_2_11_3-x64/libInterceptorInjectionTarget.so";
  EXPECT_EQ(Find(Judge(f), "profilers").status, CheckStatus::Warn);
  f.env.ld_preload = "libjemalloc.so.2";
  EXPECT_EQ(Find(Judge(f), "profilers").status, CheckStatus::Ok);
}

TEST(Doctor, LowDiskWarns) {
  DoctorFacts f = GoodFacts();
  f.disk.free_bytes = kDoctorLowDiskBytes - 1;
  auto checks = Judge(f);
  const Check d = Find(checks, "disk");
  EXPECT_EQ(d.status, CheckStatus::Warn);
  EXPECT_TRUE(Has(d.message, "MiB free in /runs")) << d.message;
  EXPECT_EQ(DoctorExitCode(checks), kExitOk);
  f.disk.free_bytes = kDoctorLowDiskBytes;
  EXPECT_EQ(Find(Judge(f), "disk").status, CheckStatus::Ok);
  f.disk = {"/nonexistent", false, "No such file or directory", 0};
  EXPECT_EQ(Find(Judge(f), "disk").status, CheckStatus::Warn);
}

TEST(Doctor, DriverOlderThanCuptiIsAProblem) {
  DoctorFacts f = GoodFacts();
  f.driver.driver_version = 12080;
  const Check c = Find(Judge(f), "CUPTI");
  EXPECT_EQ(c.status, CheckStatus::Problem);
  EXPECT_TRUE(Has(c.message, "needs a driver for CUDA 13 or newer; the driver is for CUDA 12.8"))
      << c.message;
}

TEST(Doctor, MissingOrBrokenAgent) {
  DoctorFacts f = GoodFacts();
  f.agent = DoctorAgent{};
  f.cupti = DoctorCupti{};
  auto checks = Judge(f);
  EXPECT_EQ(Find(checks, "agent").status, CheckStatus::Problem);
  EXPECT_TRUE(Has(Find(checks, "agent").message, "libkprof_agent.so not found"));
  EXPECT_EQ(DoctorExitCode(checks), kDoctorExitProblem);
  f.agent.built = false;
  EXPECT_TRUE(Has(Find(Judge(f), "agent").message, "built without the CUDA toolkit"));
  f = GoodFacts();
  f.agent.nvtx_entry = false;
  EXPECT_EQ(Find(Judge(f), "NVTX").status, CheckStatus::Warn);
}

TEST(Doctor, JsonHoldsTheChecksAndFacts) {
  DoctorFacts f = GoodFacts();
  f.counters.admin_only = 1;
  const auto checks = Judge(f);
  const auto j = nlohmann::json::parse(RenderDoctorJson(f, checks));
  EXPECT_EQ(j["exit_code"], kDoctorExitProblem);
  ASSERT_EQ(j["checks"].size(), checks.size());
  EXPECT_EQ(j["checks"][0]["name"], "GPU");
  EXPECT_EQ(j["checks"][0]["status"], "ok");
  bool problem = false;
  for (const auto& c : j["checks"])
    if (c["name"] == "counters") problem = c["status"] == "problem" && c.contains("fix");
  EXPECT_TRUE(problem) << j.dump(2);
  EXPECT_EQ(j["facts"]["driver"]["gpus"][0]["compute_capability"], "9.0");
  EXPECT_EQ(j["facts"]["counters"]["rm_profiling_admin_only"], 1);
  EXPECT_TRUE(j["facts"]["environment"]["CUDA_INJECTION64_PATH"].is_null());
}

TEST(Doctor, ParsesProcFiles) {
  EXPECT_EQ(ParseKernelModuleVersion("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  "
                                     "Sun Jul 27 07:09:37 UTC 2025\nGCC version:  gcc\n"),
            "580.65.06");
  EXPECT_EQ(ParseKernelModuleVersion("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                                     "570.133.20  Release Build\n"),
            "570.133.20");
  EXPECT_EQ(ParseKernelModuleVersion(""), "");
  EXPECT_EQ(ParseAdminOnly("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n"), 1);
  EXPECT_EQ(ParseAdminOnly("RmProfilingAdminOnly: 0\n"), 0);
  EXPECT_FALSE(ParseAdminOnly("ResmanDebugLevel: 1\n").has_value());
  EXPECT_TRUE(ParseCapSysAdmin("CapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n"));
  EXPECT_FALSE(ParseCapSysAdmin("CapEff:\t0000000000000000\n"));
  EXPECT_TRUE(ParseCapSysAdmin("CapEff:\t0000000000200000\n"));  // bit 21 alone
  EXPECT_EQ(CuptiVersionText(130001), "13.0 (API 130001)");
  EXPECT_EQ(CuptiVersionText(28), "API v28");
}

// The real executable on this machine. Where a driver and a GPU answer (the GPU machines) the
// no-GPU assertions do not apply.
TEST(DoctorCommand, WithoutAGpuExitsOneAndSaysWhy) {
  const auto js = RunCommand(test::Kprof() + " doctor --json 2>/dev/null");
  const auto j = nlohmann::json::parse(js.output, nullptr, false);
  ASSERT_TRUE(j.is_object()) << js.output;
  EXPECT_EQ(js.status, j["exit_code"].get<int>());
  const auto& driver = j["facts"]["driver"];
  if (driver["cuinit_result"] == 0 && !driver["gpus"].empty())
    GTEST_SKIP() << "this machine has a GPU";
  const auto r = RunCommand(test::Kprof() + " doctor");
  EXPECT_EQ(r.status, kDoctorExitProblem) << r.output;
  size_t at = r.output.find("  PROBLEM  GPU        ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  EXPECT_TRUE(Has(line, "libcuda.so.1") || Has(line, "cuInit")) << line;
  EXPECT_TRUE(Has(r.output, "\n  GPU: ")) << r.output;  // in the summary
}

TEST(DoctorCommand, TheStubLibcudaIsNotTakenForADriver) {
  std::string stub;
  for (const char* p : {"/usr/local/cuda/lib64/stubs/libcuda.so",
                        "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"})
    if (std::filesystem::exists(p)) stub = p;
  if (stub.empty()) GTEST_SKIP() << "no CUDA toolkit stub libcuda.so here";
  TempDir d;
  std::filesystem::create_symlink(stub, d / "libcuda.so.1");
  const auto r = RunCommand("LD_LIBRARY_PATH=" + d.path() + " " + test::Kprof() + " doctor");
  EXPECT_EQ(r.status, kDoctorExitProblem) << r.output;
  EXPECT_TRUE(Has(r.output, "is the CUDA stub library, not a driver")) << r.output;
}

// A stand-in for PyTorch (PYTHONPATH first) whose import loads its own copy of the agent's
// libcupti, as site-packages/nvidia/cu13/lib/libcupti.so.13 is loaded by the real one: doctor
// names that copy for PyTorch programs' NVTX.
TEST(DoctorCommand, NamesTorchsOwnLibcuptiForNvtx) {
  const auto probe = RunCommand(test::Kprof() + " doctor --json 2>/dev/null");
  const auto j = nlohmann::json::parse(probe.output, nullptr, false);
  ASSERT_TRUE(j.is_object()) << probe.output;
  const std::string cupti = j["facts"]["cupti"]["path"];
  if (cupti.empty()) GTEST_SKIP() << "no libcupti found for the agent here";
  TempDir d;
  namespace fs = std::filesystem;
  const std::string lib = d / "site/nvidia/cu13/lib";
  fs::create_directories(lib);
  fs::create_directories(d / "site/torch/version");
  fs::copy_file(cupti, lib + "/" + fs::path(cupti).filename().string());
  const std::string copy = fs::canonical(lib + "/" + fs::path(cupti).filename().string());
  test::WriteAll(d / "site/torch/__init__.py",
                 "import ctypes\n__version__ = '0.0.0+doctor.test'\nctypes.CDLL('" + copy +
                     "')\nfrom . import version\n");
  test::WriteAll(d / "site/torch/version/__init__.py", "cuda = 'stand-in'\n");
  const auto r = RunCommand("PYTHONPATH=" + d / "site" + " " + test::Kprof() + " doctor");
  EXPECT_TRUE(Has(r.output, "torch 0.0.0+doctor.test (CUDA stand-in); import torch loads " + copy))
      << r.output;
  EXPECT_TRUE(Has(r.output, "PyTorch programs: " + copy + " (torch's own)")) << r.output;
}

TEST(DoctorCommand, OptionsAndUsageErrors) {
  TempDir d;
  auto r = RunCommand(test::Kprof() + " doctor --json --dir " + d.path() + " 2>/dev/null");
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.output;
  EXPECT_EQ(j["facts"]["disk"]["dir"], d.path());
  EXPECT_TRUE(j["facts"]["disk"]["ok"].get<bool>());
  r = RunCommand(test::Kprof() + " doctor --no-such-option");
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_TRUE(Has(r.output, "kprof doctor: ")) << r.output;
  r = RunCommand(test::Kprof() + " doctor --help");
  EXPECT_EQ(r.status, kExitOk);
  EXPECT_TRUE(Has(r.output, "--dir")) << r.output;
}

}  // namespace
}  // namespace kprof::cli
