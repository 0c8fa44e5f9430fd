// kprof doctor's facts (doctor.h): everything that touches the system. The CUDA driver, the
// agent and python3 are each tried in a child process with a time limit, so that a driver that
// hangs or crashes in cuInit, or a library whose constructors misbehave, cannot take kprof with
// it; each child answers with one JSON object on a pipe.
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/child.h"
#include "cli/doctor.h"
#include "cli/installed.h"

namespace kprof::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kDriverTimeoutS = 60;  // cuInit of many GPUs without persistence mode is slow
constexpr int kAgentTimeoutS = 30;
constexpr int kPythonTimeoutS = 60;  // import torch on a cold file cache

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// `p` made absolute, without links; `p` itself when that fails.
std::string Canonical(const std::string& p) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p : c.string();
}

std::string DlError(const char* what) {
  const char* e = ::dlerror();
  return e != nullptr ? std::string(e) : std::string(what) + ": unknown loader error";
}

/// Writes all of `s` to `fd` (from a child process).
void WriteAll(int fd, const std::string& s) {
  size_t at = 0;
  while (at < s.size()) {
    const ssize_t n = ::write(fd, s.data() + at, s.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    at += static_cast<size_t>(n);
  }
}

/// One line of JSON; bytes that are not UTF-8 (a device name, a loader message) become U+FFFD
/// rather than an exception in the child.
std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

/// The last line of `out` that is a JSON object, parsed; a null json when there is none.
json LastJsonLine(const std::string& out) {
  std::istringstream in(out);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty() && line.front() == '{') last = line;
  return last.empty() ? json() : json::parse(last, nullptr, false);
}

// ---------------------------------------------------------------------------------------------
// The CUDA driver, through its C ABI (no CUDA header in the CLI): CUresult is an int, CUdevice an
// int, CUdevice_attribute an int-sized enum.
constexpr int kAttrCcMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR (cuda.h)
constexpr int kAttrCcMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

/// In the child: loads libcuda.so.1, calls cuInit and lists the devices.
json ProbeDriver() {
  json j;
  // A profiler injected into kprof's environment is not to be loaded by this cuInit.
  ::unsetenv("CUDA_INJECTION64_PATH");
  ::unsetenv("NVTX_INJECTION64_PATH");
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    j["libcuda"] = false;
    j["load_error"] = DlError("dlopen(libcuda.so.1)");
    return j;
  }
  j["libcuda"] = true;
  const auto sym = [&](const char* name) -> void* {
    void* p = ::dlsym(h, name);
    if (p == nullptr && !j.contains("load_error"))
      j["load_error"] = std::string("libcuda.so.1 has no ") + name;
    return p;
  };
  using InitFn = int (*)(unsigned);
  using IntOutFn = int (*)(int*);
  using DeviceGetFn = int (*)(int*, int);
  using NameFn = int (*)(char*, int, int);
  using AttrFn = int (*)(int*, int, int);
  using MemFn = int (*)(size_t*, int);
  using ErrorNameFn = int (*)(int, const char**);
  auto init = reinterpret_cast<InitFn>(sym("cuInit"));
  auto driver_version = reinterpret_cast<IntOutFn>(sym("cuDriverGetVersion"));
  auto count = reinterpret_cast<IntOutFn>(sym("cuDeviceGetCount"));
  auto device_get = reinterpret_cast<DeviceGetFn>(sym("cuDeviceGet"));
  auto get_name = reinterpret_cast<NameFn>(sym("cuDeviceGetName"));
  auto attr = reinterpret_cast<AttrFn>(sym("cuDeviceGetAttribute"));
  auto total_mem = reinterpret_cast<MemFn>(sym("cuDeviceTotalMem_v2"));
  auto error_name = reinterpret_cast<ErrorNameFn>(sym("cuGetErrorName"));
  if (Dl_info info{}; init != nullptr && ::dladdr(reinterpret_cast<void*>(init), &info) != 0 &&
                      info.dli_fname != nullptr)
    j["libcuda_path"] = Canonical(info.dli_fname);
  if (j.contains("load_error")) return j;  // an entry point is missing: not a usable driver
  if (int v = 0; driver_version(&v) == 0) j["driver_version"] = v;
  const auto name_of = [&](int r) {
    const char* s = nullptr;
    return error_name(r, &s) == 0 && s != nullptr ? std::string(s) : std::string();
  };
  const int r = init(0);
  j["init_result"] = r;
  j["init_error"] = r != 0 ? name_of(r) : "";
  if (r != 0) return j;
  const auto fail = [&](const char* call, int res) {
    j["device_error"] = std::string(call) + ": " + name_of(res) + " (" + std::to_string(res) + ")";
  };
  int n = 0;
  if (int res = count(&n); res != 0) {
    fail("cuDeviceGetCount", res);
    return j;
  }
  json gpus = json::array();
  for (int i = 0; i < n; ++i) {
    int dev = 0, major = 0, minor = 0;
    char name[256] = {};
    size_t bytes = 0;
    int res = device_get(&dev, i);
    if (res == 0 && (res = get_name(name, sizeof name - 1, dev)) != 0) fail("cuDeviceGetName", res);
    if (res == 0 && (res = attr(&major, kAttrCcMajor, dev)) != 0) fail("cuDeviceGetAttribute", res);
    if (res == 0 && (res = attr(&minor, kAttrCcMinor, dev)) != 0) fail("cuDeviceGetAttribute", res);
    if (res == 0 && (res = total_mem(&bytes, dev)) != 0) fail("cuDeviceTotalMem", res);
    if (res != 0) {
      if (!j.contains("device_error")) fail("cuDeviceGet", res);
      break;
    }
    gpus.push_back({{"name", name}, {"cc_major", major}, {"cc_minor", minor}, {"memory", bytes}});
  }
  j["gpus"] = gpus;
  return j;
}

DoctorDriver GatherDriver() {
  DoctorDriver d;
  d.kernel_module = ParseKernelModuleVersion(ReadText("/proc/driver/nvidia/version"));
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) d.visible_devices = v;
  ChildAnswer a = RunInChild([](int fd) { WriteAll(fd, Dump(ProbeDriver())); }, kDriverTimeoutS);
  const json j = LastJsonLine(a.output);
  if (!a.error.empty() || !j.is_object()) {
    d.probe_error = a.error.empty() ? "the probe gave no answer" : a.error;
    return d;
  }
  d.probed = true;
  d.libcuda = j.value("libcuda", false);
  d.libcuda_path = j.value("libcuda_path", "");
  d.load_error = j.value("load_error", "");
  if (!d.load_error.empty()) d.libcuda = false;  // loaded, but lacks an entry point
  d.driver_version = j.value("driver_version", 0);
  d.init_called = j.contains("init_result");
  d.init_result = j.value("init_result", 0);
  d.init_error = j.value("init_error", "");
  d.device_error = j.value("device_error", "");
  for (const json& g : j.value("gpus", json::array()))
    d.gpus.push_back({g.value("name", ""), g.value("cc_major", 0), g.value("cc_minor", 0),
                      g.value("memory", uint64_t{0})});
  return d;
}

// ---------------------------------------------------------------------------------------------
// The agent and the libcupti it binds to.

/// What the dynamic section of an ELF shared object names.
struct ElfDynamic {
  std::vector<std::string> needed;
  std::string soname, runpath;
  bool rpath = false;  ///< runpath came from DT_RPATH (searched before LD_LIBRARY_PATH)
};

/// Reads the dynamic section of a 64-bit ELF file; nullopt when it is not one.
std::optional<ElfDynamic> ReadElfDynamic(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!f.read(reinterpret_cast<char*>(&eh), sizeof eh) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(Elf64_Phdr))
    return std::nullopt;
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  f.seekg(static_cast<std::streamoff>(eh.e_phoff));
  if (!f.read(reinterpret_cast<char*>(ph.data()),
              static_cast<std::streamsize>(ph.size() * sizeof(Elf64_Phdr))))
    return std::nullopt;
  const auto file_offset = [&](uint64_t vaddr) -> std::optional<uint64_t> {
    for (const Elf64_Phdr& p : ph)
      if (p.p_type == PT_LOAD && vaddr >= p.p_vaddr && vaddr < p.p_vaddr + p.p_filesz)
        return vaddr - p.p_vaddr + p.p_offset;
    return std::nullopt;
  };
  for (const Elf64_Phdr& p : ph) {
    if (p.p_type != PT_DYNAMIC) continue;
    std::vector<Elf64_Dyn> dyn(p.p_filesz / sizeof(Elf64_Dyn));
    f.seekg(static_cast<std::streamoff>(p.p_offset));
    if (!f.read(reinterpret_cast<char*>(dyn.data()),
                static_cast<std::streamsize>(dyn.size() * sizeof(Elf64_Dyn))))
      return std::nullopt;
    uint64_t strtab = 0, strsz = 0;
    for (const Elf64_Dyn& d : dyn) {
      if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
      if (d.d_tag == DT_STRSZ) strsz = d.d_un.d_val;
    }
    const auto off = file_offset(strtab);
    if (!off || strsz == 0) return std::nullopt;
    std::string strings(strsz, '\0');
    f.seekg(static_cast<std::streamoff>(*off));
    if (!f.read(strings.data(), static_cast<std::streamsize>(strsz))) return std::nullopt;
    const auto str = [&](uint64_t at) {
      return at < strings.size() ? std::string(strings.c_str() + at) : std::string();
    };
    ElfDynamic out;
    std::string rpath, runpath;
    for (const Elf64_Dyn& d : dyn) {
      if (d.d_tag == DT_NEEDED) out.needed.push_back(str(d.d_un.d_val));
      if (d.d_tag == DT_SONAME) out.soname = str(d.d_un.d_val);
      if (d.d_tag == DT_RUNPATH) runpath = str(d.d_un.d_val);
      if (d.d_tag == DT_RPATH) rpath = str(d.d_un.d_val);
    }
    // ld.so ignores DT_RPATH when DT_RUNPATH is there.
    out.rpath = runpath.empty() && !rpath.empty();
    out.runpath = out.rpath ? rpath : runpath;
    return out;
  }
  return ElfDynamic{};  // statically linked: no dynamic section
}

std::vector<std::string> SplitPath(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, ':');)
    if (!part.empty()) out.push_back(part);
  return out;
}

/// In the child: loads the agent as the driver would, or, when it does not load, the libcupti
/// `fallback` found on its search path; says which libcupti answers and its version.
json ProbeAgent(const std::string& agent, const std::string& fallback) {
  json j;
  std::string cupti;
  void* h = ::dlopen(agent.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (h != nullptr) {
    j["loads"] = true;
    j["nvtx_entry"] = ::dlsym(h, "InitializeInjectionNvtx2") != nullptr;
  } else {
    j["loads"] = false;
    j["load_error"] = DlError("dlopen of the agent");
    if (fallback.empty()) return j;
    h = ::dlopen(fallback.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (h == nullptr) {
      j["cupti_error"] = DlError("dlopen of libcupti");
      return j;
    }
  }
  // Looked up through the handle: the agent's own symbols are hidden, so this is libcupti's.
  void* get_version = ::dlsym(h, "cuptiGetVersion");
  Dl_info info{};
  if (get_version == nullptr || ::dladdr(get_version, &info) == 0 || info.dli_fname == nullptr) {
    j["cupti_error"] = "no cuptiGetVersion reachable from " + agent;
  } else {
    j["cupti_path"] = Canonical(info.dli_fname);
    uint32_t v = 0;
    const int r = reinterpret_cast<int (*)(uint32_t*)>(get_version)(&v);
    if (r == 0)
      j["cupti_version"] = v;
    else
      j["cupti_error"] = "cuptiGetVersion returned " + std::to_string(r);
    if (void* c = ::dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD)) {
      j["cupti_nvtx_entry"] = ::dlsym(c, "InitializeInjectionNvtx2") != nullptr;
      ::dlclose(c);
    }
  }
  ::dlclose(h);
  return j;
}

void GatherAgent(DoctorFacts& f) {
  DoctorAgent& a = f.agent;
#ifndef KPROF_HAVE_AGENT
  a.built = false;
#endif
  a.path = cli::FindAgent(&a.from_env);  // as kprof run finds it
  if (a.path.empty()) return;
  // Where the agent's libcupti would come from, read from the file: the answer when the agent
  // cannot be loaded here (no driver), and the file the child then asks for its version.
  std::string fallback;
  if (const auto elf = ReadElfDynamic(a.path)) {
    for (const std::string& n : elf->needed)
      if (n.rfind("libcupti.so", 0) == 0) a.cupti_soname = n;
    const std::string origin = fs::path(Canonical(a.path)).parent_path().string();
    for (std::string dir : SplitPath(elf->runpath)) {
      for (const char* o : {"${ORIGIN}", "$ORIGIN"})
        if (size_t at = dir.find(o); at != std::string::npos) dir.replace(at, strlen(o), origin);
      a.runpath.push_back(dir);
    }
    const char* llp = std::getenv("LD_LIBRARY_PATH");
    std::vector<std::string> search = SplitPath(llp != nullptr ? llp : "");
    search.insert(elf->rpath ? search.begin() : search.end(), a.runpath.begin(), a.runpath.end());
    for (const std::string& dir : search)
      if (!a.cupti_soname.empty() && fallback.empty() &&
          ::access((dir + "/" + a.cupti_soname).c_str(), R_OK) == 0)
        fallback = Canonical(dir + "/" + a.cupti_soname);
  }
  ChildAnswer ans =
      RunInChild([&](int fd) { WriteAll(fd, Dump(ProbeAgent(a.path, fallback))); }, kAgentTimeoutS);
  const json j = LastJsonLine(ans.output);
  if (!ans.error.empty() || !j.is_object()) {
    a.load_error = "loading it in a child process " +
                   (ans.error.empty() ? std::string("gave no answer") : ans.error);
    return;
  }
  a.loads = j.value("loads", false);
  a.load_error = j.value("load_error", "");
  a.nvtx_entry = j.value("nvtx_entry", false);
  DoctorCupti& c = f.cupti;
  c.bound = a.loads;
  c.path = j.value("cupti_path", "");
  c.version = j.value("cupti_version", uint32_t{0});
  c.error = j.value("cupti_error", "");
  c.nvtx_entry = j.value("cupti_nvtx_entry", false);
  if (c.path.empty() && c.error.empty() && !a.cupti_soname.empty())
    c.error = a.cupti_soname + " not found in LD_LIBRARY_PATH or the agent's RUNPATH";
  if (!c.path.empty())
    if (const auto elf = ReadElfDynamic(c.path)) c.soname = elf->soname;
}

// ---------------------------------------------------------------------------------------------
// PyTorch: what `import torch` in python3 from PATH loads.
constexpr const char* kTorchProbe = R"PY(
import json, os, sys
r = {"python": sys.executable}
try:
    import torch
except ModuleNotFoundError as e:
    r["torch"] = False
    if e.name != "torch":
        r["error"] = "import torch: ModuleNotFoundError: %s" % e
except BaseException as e:
    r["torch"] = False
    r["error"] = "import torch: %s: %s" % (type(e).__name__, e)
else:
    r["torch"] = True
    r["version"] = str(getattr(torch, "__version__", "?"))
    r["cuda"] = getattr(getattr(torch, "version", None), "cuda", None) or ""
    loaded = []
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split(None, 5)
            if len(p) == 6:
                path = p[5].strip()
                if os.path.basename(path).startswith("libcupti.so") and path not in loaded:
                    loaded.append(path)
    r["loaded"] = loaded
    site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
    dirs = [os.path.join(site, "nvidia", d, "lib") for d in
            (sorted(os.listdir(os.path.join(site, "nvidia")))
             if os.path.isdir(os.path.join(site, "nvidia")) else [])]
    dirs.append(os.path.join(site, "torch", "lib"))
    r["shipped"] = [os.path.join(d, n) for d in dirs if os.path.isdir(d)
                    for n in sorted(os.listdir(d)) if n.startswith("libcupti.so")]
print(json.dumps(r))
)PY";

void GatherTorch(DoctorTorch& t) {
  // The PyTorch layer, looked up as kprof run does.
  const std::string layer = cli::FindPythonDir();
  t.layer = !layer.empty() && ::access((layer + "/sitecustomize.py").c_str(), R_OK) == 0;
  ChildAnswer a = RunInChild(
      [](int fd) {
        // python3's output (and anything import torch prints) goes into the pipe.
        if (::dup2(fd, STDOUT_FILENO) < 0 || ::dup2(fd, STDERR_FILENO) < 0) ::_exit(126);
        const int null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_in >= 0) ::dup2(null_in, STDIN_FILENO);
        ::execlp("python3", "python3", "-c", kTorchProbe, static_cast<char*>(nullptr));
        const int err = errno;
        ::dprintf(STDERR_FILENO, "exec python3: %s\n", std::strerror(err));
        ::_exit(err == ENOENT ? 127 : 126);
      },
      kPythonTimeoutS);
  const json j = LastJsonLine(a.output);
  if (!j.is_object()) {
    // Its last line (a traceback's) says why.
    std::string last;
    std::istringstream in(a.output);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) last = line;
    t.error = a.status == 127 ? "python3 not found in PATH"
                              : "python3 " + (a.error.empty() ? "gave no answer" : a.error) +
                                    (last.empty() ? "" : ": " + last);
    return;
  }
  t.python = true;
  try {
    t.python_path = j.value("python", "");
    t.torch = j.value("torch", false);
    t.error = j.value("error", "");
    if (!t.torch) return;
    t.version = j.value("version", "");
    t.cuda = j.value("cuda", "");
    const auto loaded = j.value("loaded", std::vector<std::string>{});
    const auto shipped = j.value("shipped", std::vector<std::string>{});
    t.cupti_loaded = !loaded.empty();
    if (t.cupti_loaded) {
      t.cupti_path = loaded.front();
    } else {
      // Not loaded by the import: the file it ships under its soname (libcupti.so.N), if any.
      for (const std::string& s : shipped) {
        const std::string name = fs::path(s).filename().string();
        const bool soname_like =
            name.size() > 12 && name.find_first_not_of("0123456789", 12) == std::string::npos;
        if (t.cupti_path.empty() || soname_like) t.cupti_path = s;
        if (soname_like) break;
      }
    }
  } catch (const json::exception& e) {
    t.error = std::string("python3's answer was not understood: ") + e.what();
    t.torch = false;
    return;
  }
  if (!t.cupti_path.empty())
    if (const auto elf = ReadElfDynamic(t.cupti_path)) t.cupti_soname = elf->soname;
}

DoctorCounters GatherCounters() {
  DoctorCounters c;
  c.admin_only = ParseAdminOnly(ReadText("/proc/driver/nvidia/params"));
  c.root = ::geteuid() == 0;
  c.cap_sys_admin = ParseCapSysAdmin(ReadText("/proc/self/status"));
  return c;
}

DoctorEnv GatherEnv() {
  DoctorEnv e;
  if (const char* v = std::getenv("CUDA_INJECTION64_PATH"); v != nullptr && *v != '\0')
    e.cuda_injection = v;
  if (const char* v = std::getenv("NVTX_INJECTION64_PATH"); v != nullptr && *v != '\0')
    e.nvtx_injection = v;
  if (const char* v = std::getenv("LD_PRELOAD")) e.ld_preload = v;
  return e;
}

DoctorDisk GatherDisk(const std::string& dir) {
  DoctorDisk d;
  std::error_code ec;
  d.dir = fs::absolute(dir, ec).lexically_normal().string();
  if (ec) d.dir = dir;
  while (d.dir.size() > 1 && d.dir.back() == '/') d.dir.pop_back();  // "/work/." gives "/work/"
  // kprof run creates its run directory with its parents: a folder that does not exist yet
  // gets the space of the nearest one that does.
  fs::path at = d.dir;
  while (!fs::exists(at, ec) && at.has_relative_path()) at = at.parent_path();
  d.dir = at.string();
  struct statvfs st {};
  if (::statvfs(d.dir.c_str(), &st) != 0) {
    d.error = std::strerror(errno);
    return d;
  }
  d.ok = true;
  d.free_bytes = static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize);
  return d;
}

}  // namespace

DoctorFacts GatherFacts(const std::string& dir) {
  DoctorFacts f;
  f.env = GatherEnv();
  f.driver = GatherDriver();
  GatherAgent(f);
  GatherTorch(f.torch);
  f.counters = GatherCounters();
  f.disk = GatherDisk(dir);
  return f;
}

}  // namespace kprof::cli
