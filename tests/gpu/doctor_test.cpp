// kprof doctor on a machine with GPUs (issue 36): every GPU named with its driver, the agent
// loads, a PyTorch program's libcupti named, exit 0; another profiler's injection is a warning.
#include <dirent.h>

#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>

#include "gpu_harness.h"
#include "gtest/gtest.h"

namespace kprof::gpu_test {
namespace {

// The line of check `name` ("  OK       GPU        ..."), or "".
std::string CheckLine(const std::string& out, const std::string& name) {
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    std::istringstream words(l);
    std::string status, check;
    words >> status >> check;
    if (check == name &&
        (status == "OK" || status == "WARN" || status == "PROBLEM" || status == "INFO"))
      return l;
  }
  return "";
}

// GPUs the kernel module exposes: /dev/nvidiaN.
int DeviceFiles() {
  int n = 0;
  if (DIR* d = opendir("/dev")) {
    while (const dirent* e = readdir(d))
      n += std::regex_match(e->d_name, std::regex("nvidia[0-9]+")) ? 1 : 0;
    closedir(d);
  }
  return n;
}

TEST(GpuDoctor, NamesTheGpusAndTheLibcuptiEachProgramLoads) {
  REQUIRE_GPU();
  if (std::getenv("CUDA_VISIBLE_DEVICES") != nullptr) GTEST_SKIP() << "CUDA_VISIBLE_DEVICES set";
  const Result r = Exec({Bin("kprof"), "doctor"});
  EXPECT_EQ(r.status, 0) << r.out;
  const std::string gpu = CheckLine(r.out, "GPU");
  ASSERT_EQ(gpu.rfind("  OK", 0), 0u) << r.out;
  // "N x NAME (compute M.m, X GiB)" runs add up to every GPU of the machine.
  int named = 0;
  const std::regex run("([0-9]+) x [^(]+\\(compute ([0-9]+)\\.[0-9]+, ");
  for (auto it = std::sregex_iterator(gpu.begin(), gpu.end(), run); it != std::sregex_iterator();
       ++it) {
    named += std::stoi((*it)[1]);
    EXPECT_GE(std::stoi((*it)[2]), 7) << gpu;
  }
  EXPECT_EQ(named, DeviceFiles()) << gpu;
  EXPECT_EQ(CheckLine(r.out, "agent").rfind("  OK", 0), 0u) << r.out;
  EXPECT_EQ(CheckLine(r.out, "CUPTI").rfind("  OK", 0), 0u) << r.out;
  if (HaveTorch()) {
    const std::string torch = CheckLine(r.out, "PyTorch");
    EXPECT_EQ(torch.rfind("  OK", 0), 0u) << r.out;
    EXPECT_NE(torch.find("libcupti.so"), std::string::npos) << torch;
  }
}

TEST(GpuDoctor, AnotherProfilersInjectionIsAWarning) {
  REQUIRE_GPU();
  const Result r =
      Exec({"env", "CUDA_INJECTION64_PATH=/opt/other/libinjection.so", Bin("kprof"), "doctor"});
  const std::string line = CheckLine(r.out, "profilers");
  EXPECT_EQ(line.rfind("  WARN", 0), 0u) << r.out;
  EXPECT_NE(line.find("/opt/other/libinjection.so"), std::string::npos) << line;
}

}  // namespace
}  // namespace kprof::gpu_test
