// Golden outputs: every recorded fixture's reports (JSON in every view, table, CSV, Markdown),
// its Chrome trace and the diff verdicts, byte for byte as tests/golden/out/ holds them. The
// cases and the outputs are written by scripts/make_goldens.sh; regenerate them only when an
// output is meant to change, and say why in the commit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace kprof {
namespace {

const std::string kSource = KPROF_SOURCE_DIR;
const std::string kGolden = kSource + "/tests/golden";

struct Case {
  std::string name;
  std::string args;
  int status = 0;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> LoadCases() {
  std::vector<Case> cases;
  std::ifstream f(kGolden + "/cases.txt");
  std::string line;
  while (std::getline(f, line)) {
    auto tab = line.find('\t');
    if (tab == std::string::npos) continue;
    cases.push_back({line.substr(0, tab), line.substr(tab + 1), 0});
  }
  std::ifstream s(kGolden + "/status.txt");
  while (std::getline(s, line)) {
    auto tab = line.find('\t');
    if (tab == std::string::npos) continue;
    for (Case& c : cases)
      if (c.name == line.substr(0, tab)) c.status = std::stoi(line.substr(tab + 1));
  }
  return cases;
}

std::string Gunzip(const std::string& path) {
  gzFile g = gzopen(path.c_str(), "rb");
  if (g == nullptr) return "<cannot open " + path + ">";
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(g, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(g);
  return out;
}

/// First line where two texts differ, for the failure message.
std::string FirstDifference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  size_t line =
      static_cast<size_t>(std::count(want.begin(), want.begin() + static_cast<long>(i), '\n')) + 1;
  auto around = [i](const std::string& s) {
    size_t b = s.rfind('\n', i == 0 ? 0 : i - 1);
    b = b == std::string::npos ? 0 : b + 1;
    size_t e = s.find('\n', i);
    return s.substr(b, std::min<size_t>(e == std::string::npos ? s.size() : e, b + 300) - b);
  };
  return "line " + std::to_string(line) + ":\n  golden: " + around(want) +
         "\n  actual: " + around(got);
}

class Golden : public ::testing::TestWithParam<Case> {};

TEST_P(Golden, OutputMatches) {
  const Case& c = GetParam();
  const std::string actual_dir = std::string(KPROF_BINARY_DIR) + "/golden-actual";
  std::filesystem::create_directories(actual_dir);
  const std::string actual = actual_dir + "/" + c.name;
  std::filesystem::remove(actual);  // kprof never overwrites a --trace file without --force
  std::string args = c.args;
  const bool to_file = args.find("{OUT}") != std::string::npos;
  if (to_file) args.replace(args.find("{OUT}"), 5, actual);
  std::string cmd = "cd '" + kSource + "' && '" + test::Kprof() + "' " + args + " 2>/dev/null";
  if (!to_file)
    cmd += " >'" + actual + "'";
  else
    cmd += " >/dev/null";
  int st = std::system(cmd.c_str());
  int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  EXPECT_EQ(status, c.status) << "kprof " << c.args;
  const std::string want = Gunzip(kGolden + "/out/" + c.name + ".gz");
  const std::string got = test::ReadAll(actual);
  ASSERT_FALSE(want.empty()) << "golden output " << c.name << " is empty or missing";
  EXPECT_TRUE(want == got) << "kprof " << c.args << "\ndiffers from tests/golden/out/" << c.name
                           << ".gz (" << want.size() << " vs " << got.size() << " bytes) at "
                           << FirstDifference(want, got) << "\nactual output: " << actual;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& param_info) {
  std::string n = param_info.param.name;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, ::testing::ValuesIn(LoadCases()), CaseName);

TEST(GoldenCases, EveryFixtureIsCovered) {
  // A fixture added without regenerating the goldens would go unchecked.
  std::vector<Case> cases = LoadCases();
  ASSERT_GE(cases.size(), 100u);
  for (const auto& d : std::filesystem::directory_iterator(kSource + "/tests/fixtures/gpu")) {
    std::string name = d.path().filename().string();
    if (name == "diff") continue;
    bool found = false;
    for (const Case& c : cases) found = found || c.name.rfind(name + ".", 0) == 0;
    EXPECT_TRUE(found) << "tests/fixtures/gpu/" << name << " has no golden output";
  }
}

}  // namespace
}  // namespace kprof
