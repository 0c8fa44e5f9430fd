// Chrome trace reader: a real PyTorch profiler trace (counts checked against an independent
// parse with nlohmann::json), document shapes, and hostile input (truncation at many offsets,
// garbage, mutations, wrong types, deep nesting) that must end in an InputError naming the file.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>

#include "chrome_test_util.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

using test::CountKinds;
using test::TempDir;

const std::string kTrace = test::FixtureDir() + "/mlp_train_free.trace.json.gz";

TEST(ChromeReader, PyTorchTraceCountsMatchIndependentParse) {
  nlohmann::json doc = nlohmann::json::parse(test::ReadGzip(kTrace));
  std::map<std::string, size_t> by_cat;
  size_t allocs = 0, frees = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("ph", "") == "X") ++by_cat[e.value("cat", "")];
    if (e.value("ph", "") == "i" && e.value("name", "") == "[memory]" &&
        e["args"].value("Device Type", -1) == 1) {
      int64_t b = e["args"]["Bytes"].get<int64_t>();
      allocs += b > 0;
      frees += b < 0;
    }
  }
  ASSERT_GT(by_cat["kernel"], 0u);

  kprof::Run run = ReadChromeTrace(kTrace);
  ASSERT_EQ(run.processes.size(), 1u);
  const ProcessTrace& p = run.processes[0];
  EXPECT_EQ(p.pid, 733u);
  EXPECT_EQ(p.source, kTrace);
  auto counts = CountKinds(run);
  EXPECT_EQ(counts[RecordKind::Kernel], by_cat["kernel"]);
  EXPECT_EQ(counts[RecordKind::Memcpy], by_cat["gpu_memcpy"]);
  EXPECT_EQ(counts[RecordKind::Memset], by_cat["gpu_memset"]);
  EXPECT_EQ(counts[RecordKind::RuntimeApi], by_cat["cuda_runtime"]);
  EXPECT_EQ(counts[RecordKind::DriverApi], by_cat["cuda_driver"]);
  EXPECT_EQ(counts[RecordKind::Range], by_cat["cpu_op"] + by_cat["user_annotation"]);
  EXPECT_EQ(counts[RecordKind::GpuRange], by_cat["gpu_user_annotation"]);
  EXPECT_EQ(counts[RecordKind::Overhead], by_cat["overhead"]);
  EXPECT_EQ(counts[RecordKind::MemAlloc], allocs);
  EXPECT_EQ(counts[RecordKind::MemFree], frees);

  // Metadata.
  EXPECT_EQ(p.meta.at("format"), "chrome");
  EXPECT_EQ(p.meta.at("device.0.name"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(p.meta.at("device.0.sm_count"), "132");
  EXPECT_EQ(p.meta.at("device.0.memory_bytes"), "85017493504");
  EXPECT_EQ(p.meta.at("device.0.cc"), "9.0");
  EXPECT_EQ(p.meta.at("process_name"), "python3");

  // Every kernel: exact integer-ns time from the µs text, base added; fields from args.
  const uint64_t base = doc["baseTimeNanoseconds"].get<uint64_t>();
  std::map<uint32_t, const nlohmann::json*> kernels;
  for (const auto& e : doc["traceEvents"])
    if (e.value("cat", "") == "kernel") kernels[e["args"]["correlation"].get<uint32_t>()] = &e;
  size_t checked = 0;
  for (const Record& r : p.records) {
    if (r.Kind() != RecordKind::Kernel) continue;
    ASSERT_TRUE(kernels.count(r.correlation)) << r.correlation;
    const auto& e = *kernels[r.correlation];
    auto ns = [](double us) { return static_cast<uint64_t>(std::llround(us * 1000.0)); };
    EXPECT_NEAR(static_cast<double>(r.start_ns - base), static_cast<double>(ns(e["ts"])), 1.0);
    EXPECT_NEAR(static_cast<double>(r.DurationNs()), static_cast<double>(ns(e["dur"])), 1.0);
    EXPECT_EQ(p.Name(r), e["name"].get<std::string>());
    EXPECT_EQ(r.device, e["args"]["device"].get<uint16_t>());
    EXPECT_EQ(r.tid, e["args"]["stream"].get<uint32_t>());
    EXPECT_EQ(KernelGrid(r).x, e["args"]["grid"][0].get<uint32_t>());
    EXPECT_EQ(KernelBlock(r).y, e["args"]["block"][1].get<uint32_t>());
    EXPECT_EQ(KernelRegisters(r), e["args"]["registers per thread"].get<uint32_t>());
    EXPECT_EQ(KernelSharedMem(r), e["args"]["shared memory"].get<uint32_t>());
    ++checked;
  }
  EXPECT_EQ(checked, kernels.size());

  // The first kernel, spelled out: ts 4476703216820.748 us, dur 3.68 us.
  for (const Record& r : p.records) {
    if (r.Kind() == RecordKind::Kernel && r.correlation == 27) {
      EXPECT_EQ(r.start_ns, base + 4476703216820748ull);
      EXPECT_EQ(r.end_ns, base + 4476703216824428ull);
    }
    if (r.Kind() == RecordKind::Memcpy) {
      EXPECT_EQ(r.flags, static_cast<uint8_t>(CopyKind::DtoH));
      EXPECT_EQ(r.a, static_cast<uint32_t>(MemKind::Device));
      EXPECT_EQ(r.b, static_cast<uint32_t>(MemKind::Pinned));
      EXPECT_EQ(r.bytes, 4u);
    }
  }
}

TEST(ChromeReader, PlainAndGzipReadTheSame) {
  TempDir dir;
  test::WriteFile(dir.File("plain.json"), test::ReadGzip(kTrace));
  kprof::Run a = ReadChromeTrace(kTrace);
  kprof::Run b = ReadChromeTrace(dir.File("plain.json"));
  ASSERT_EQ(a.processes.size(), b.processes.size());
  ASSERT_EQ(a.processes[0].records.size(), b.processes[0].records.size());
  for (size_t i = 0; i < a.processes[0].records.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a.processes[0].records[i], &b.processes[0].records[i], sizeof(Record)),
              0);
  }
}

Run ReadString(const TempDir& dir, const std::string& content) {
  std::string path = dir.File("doc.json");
  test::WriteFile(path, content);
  return ReadChromeTrace(path);
}

TEST(ChromeReader, DocumentShapes) {
  TempDir dir;
  const std::string ev =
      R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":5,"tid":6,)"
      R"("ts":1.5,"dur":2.0005,"args":{"correlation":9,"cbid":211}})";
  // Bare array; base time absent: times are the µs values in ns (2.0005 us rounds to 2001 ns).
  kprof::Run a = ReadString(dir, "[" + ev + "]");
  ASSERT_EQ(a.processes.size(), 1u);
  ASSERT_EQ(a.processes[0].records.size(), 1u);
  const Record& r = a.processes[0].records[0];
  EXPECT_EQ(r.start_ns, 1500u);
  EXPECT_EQ(r.end_ns, 1500u + 2001u);
  EXPECT_EQ(r.correlation, 9u);
  EXPECT_EQ(r.a, 211u);
  EXPECT_EQ(r.tid, 6u);
  EXPECT_EQ(a.processes[0].pid, 5u);

  // Base time after the events, other keys in any order, escapes and a BOM.
  kprof::Run b =
      ReadString(dir,
                 "\xEF\xBB\xBF { \"x\": {\"nested\": [1, {\"a\": null}]},\n"
                 "\"traceEvents\": [ " +
                     ev +
                     R"(, {"ph":"X","cat":"user_annotation","name":"a\u00e9\ud83d\ude00\n",)"
                     R"("pid":5,"tid":6,"ts":1e3,"dur":0}],)"
                     R"("distributedInfo":{"rank":3,"backend":"nccl"},)"
                     R"("baseTimeNanoseconds": 1000000000000 })");
  ASSERT_EQ(b.processes.size(), 1u);
  const ProcessTrace& p = b.processes[0];
  ASSERT_EQ(p.records.size(), 2u);
  EXPECT_EQ(p.records[0].start_ns, 1000000000000u + 1500u);
  EXPECT_EQ(p.records[1].start_ns, 1000000000000u + 1000000u);
  EXPECT_EQ(p.Name(p.records[1]), "a\xC3\xA9\xF0\x9F\x98\x80\n");
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(p.meta.at("distributed.backend"), "nccl");

  // Empty event list: one empty process.
  kprof::Run c = ReadString(dir, R"({"traceEvents": []})");
  ASSERT_EQ(c.processes.size(), 1u);
  EXPECT_TRUE(c.processes[0].records.empty());
}

TEST(ChromeReader, TimesAtTheEdgesOfTheRangeAreNotOverflowed) {
  // UBSan finding (scripts/sanitize.sh, ChromeReader.MutatedTraceNeverCrashes): the end's overflow
  // guard computed INT64_MAX - ts, which overflows for an event before the base time (ts < 0);
  // as it wrapped, such an event ended at INT64_MAX. Adding the base to a relative time near
  // INT64_MAX overflowed too.
  TempDir dir;
  kprof::Run run = ReadString(
      dir, R"({"traceEvents":[)"
           R"({"ph":"X","cat":"user_annotation","name":"early","pid":1,"tid":1,"ts":-2,"dur":5},)"
           R"({"ph":"X","cat":"user_annotation","name":"late","pid":1,"tid":1,"ts":9e15,"dur":0}],)"
           R"("baseTimeNanoseconds":1000000000000000000})");
  ASSERT_EQ(run.processes.size(), 1u);
  const ProcessTrace& p = run.processes[0];
  ASSERT_EQ(p.records.size(), 2u);
  for (const Record& r : p.records) {
    if (p.Name(r) == "early") {
      EXPECT_EQ(r.start_ns, 1000000000000000000u - 2000u);
      EXPECT_EQ(r.end_ns, 1000000000000000000u + 3000u);
    } else {
      EXPECT_EQ(r.start_ns, 10000000000000000000u);  // 9e18 ns + the base: beyond INT64_MAX
      EXPECT_EQ(r.end_ns, r.start_ns);
    }
  }
}

TEST(ChromeReader, GpuEventsGoToTheProcessOwningTheCorrelation) {
  TempDir dir;
  std::string doc = R"({"traceEvents":[
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":1,"ts":1,"dur":1,"args":{"correlation":1}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":20,"tid":1,"ts":1,"dur":1,"args":{"correlation":2}},
    {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":3,"dur":1,"args":{"correlation":2,"device":0,"stream":7}},
    {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":5,"dur":1,"args":{"correlation":1,"device":0,"stream":7}},
    {"ph":"X","cat":"kernel","name":"k0","pid":1,"tid":9,"ts":6,"dur":1,"args":{"correlation":99}}]})";
  kprof::Run run = ReadString(dir, doc);
  ASSERT_EQ(run.processes.size(), 2u);
  auto kernel_names = [](const ProcessTrace& p) {
    std::string s;
    for (const Record& r : p.records)
      if (r.Kind() == RecordKind::Kernel) s += p.Name(r) + ",";
    return s;
  };
  EXPECT_EQ(run.processes[0].pid, 10u);
  EXPECT_EQ(kernel_names(run.processes[0]), "k1,k0,");  // unknown correlation: first process
  EXPECT_EQ(kernel_names(run.processes[1]), "k2,");
  // Without args.device/stream, the kernel's pid/tid are the device and stream.
  for (const Record& r : run.processes[0].records) {
    if (run.processes[0].Name(r) == "k0") {
      EXPECT_EQ(r.device, 1);
      EXPECT_EQ(r.tid, 9u);
    }
  }
}

void ExpectInputError(const std::string& path, const std::string& context) {
  try {
    ReadChromeTrace(path);
    ADD_FAILURE() << context << ": no error";
  } catch (const InputError& e) {
    std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << context << ": " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << context << ": " << what;
  }
}

TEST(ChromeReader, TruncatedFilesAreInputErrors) {
  TempDir dir;
  const std::string full = test::ReadGzip(kTrace);
  const std::string path = dir.File("cut.json");
  size_t tested = 0;
  for (size_t n = 1; n < full.size(); n += (n < 512 ? 1 : 997)) {
    // The document ends with "]\n}\n" or similar: prefixes that only lack whitespace are valid.
    if (full.find_first_not_of(" \n\r\t", n) == std::string::npos) continue;
    test::WriteFile(path, full.substr(0, n));
    ExpectInputError(path, "truncated at " + std::to_string(n));
    ++tested;
  }
  EXPECT_GT(tested, 800u);
  // Truncation error names the byte where input ended.
  test::WriteFile(path, full.substr(0, 1000));
  try {
    ReadChromeTrace(path);
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": byte 1000: unexpected end of input (truncated file?)");
  }
  // Truncated gzip files.
  const std::string gz = test::ReadFile(kTrace);
  const std::string gz_path = dir.File("cut.json.gz");
  for (size_t n = 1; n < gz.size(); n += 331) {
    test::WriteFile(gz_path, gz.substr(0, n));
    ExpectInputError(gz_path, "gzip truncated at " + std::to_string(n));
  }
}

TEST(ChromeReader, GarbageAndWrongTypesAreInputErrors) {
  TempDir dir;
  const std::string path = dir.File("bad.json");
  const std::vector<std::string> bad = {
      "",
      "   \n",
      "hello",
      "{",
      "[",
      "{}",
      "[1, 2]",
      "[\"x\"]",
      "{\"traceEvents\": {}}",
      "{\"traceEvents\": [{\"ph\":\"X\",\"ts\":\"abc\"}]}",
      "{\"traceEvents\": [{\"ph\":\"X\",\"cat\":\"kernel\"}]}",
      "{\"traceEvents\": [{\"ph\":\"X\",\"ts\":1,\"dur\":-5,\"cat\":\"kernel\"}]}",
      "{\"traceEvents\": [{\"ph\":\"X\",\"ts\":1,\"args\":{\"correlation\":\"x\"}}]}",
      "{\"traceEvents\": [{\"ph\":\"X\",\"ts\":01}]}",
      "{\"traceEvents\": [{\"ph\":\"X\",\"ts\":1.}]}",
      "{\"traceEvents\": [{\"ph\":\"X\",\"name\":\"a\x01\"}]}",
      "{\"traceEvents\": [{\"ph\":\"X\",\"name\":\"\\q\"}]}",
      "{\"traceEvents\": [{\"ph\":\"X\",\"name\":\"\\u12G4\"}]}",
      "{\"traceEvents\": [{\"ph\":\"X\" \"ts\":1}]}",
      "{\"traceEvents\": [{\"ph\":\"X\",\"ts\":1,\"x\":tru}]}",
      "{\"traceEvents\": []} trailing",
      "{\"traceEvents\": [], }",
      "{\"traceEvents\": [{}, ]}",
      "{\"baseTimeNanoseconds\": \"1\", \"traceEvents\": []}",
      std::string("{\"traceEvents\": [\0]}", 20),
  };
  for (const auto& doc : bad) {
    test::WriteFile(path, doc);
    ExpectInputError(path, "document <" + doc + ">");
  }
  // Deep nesting inside an event: refused without recursion.
  std::string deep =
      "{\"traceEvents\": [{\"ph\":\"X\",\"args\":{\"x\":" + std::string(100000, '[') +
      std::string(100000, ']') + "}}]}";
  test::WriteFile(path, deep);
  ExpectInputError(path, "deep nesting");
  // Random bytes.
  std::mt19937 rng(12345);
  for (int i = 0; i < 200; ++i) {
    std::string doc(16 + rng() % 2000, '\0');
    for (char& ch : doc) ch = static_cast<char>(rng());
    if (i % 2 == 0) doc[0] = '{';
    test::WriteFile(path, doc);
    ExpectInputError(path, "random " + std::to_string(i));
  }
  // Missing file.
  ExpectInputError(dir.File("missing.json"), "missing file");
}

TEST(ChromeReader, MutatedTraceNeverCrashes) {
  TempDir dir;
  const std::string full = test::ReadGzip(kTrace);
  const std::string path = dir.File("mutated.json");
  std::mt19937 rng(777);
  const char kBytes[] =
      "{}[]\",:\\ 0-.eE\x01\xff"
      "a";
  size_t errors = 0, ok = 0;
  for (int i = 0; i < 300; ++i) {
    std::string doc = full;
    for (int k = 0; k < 3; ++k) doc[rng() % doc.size()] = kBytes[rng() % (sizeof kBytes - 1)];
    test::WriteFile(path, doc);
    try {
      ReadChromeTrace(path);
      ++ok;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
      ++errors;
    }
  }
  EXPECT_EQ(errors + ok, 300u);
  EXPECT_GT(errors, 0u);
}

TEST(ChromeReader, ErrorNamesTheByteOffset) {
  TempDir dir;
  const std::string path = dir.File("offset.json");
  test::WriteFile(path, "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": x}]}");
  try {
    ReadChromeTrace(path);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": byte 35: \"ts\" is not a number");
  }
}

}  // namespace
}  // namespace kprof
