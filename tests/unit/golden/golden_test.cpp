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

/// The decoded difference, for the failure message: each differing line (up to 20) as the
/// golden has it and as the output has it, with its line number; then how many more differ.
std::string Difference(const std::string& want, const std::string& got) {
  const auto lines = [](const std::string& s) {
    std::vector<std::string> v;
    size_t at = 0;
    while (at < s.size()) {
      const size_t nl = s.find('\n', at);
      const size_t end = nl == std::string::npos ? s.size() : nl;
      v.push_back(s.substr(at, std::min<size_t>(end - at, 300)));
      at = end + 1;
    }
    return v;
  };
  const std::vector<std::string> w = lines(want), g = lines(got);
  std::string out;
  size_t shown = 0, more = 0;
  for (size_t i = 0; i < std::max(w.size(), g.size()); ++i) {
    const std::string* a = i < w.size() ? &w[i] : nullptr;
    const std::string* b = i < g.size() ? &g[i] : nullptr;
    if (a != nullptr && b != nullptr && *a == *b) continue;
    if (shown++ >= 20) {
      ++more;
      continue;
    }
    out += "line " + std::to_string(i + 1) + ":\n  - " + (a ? *a : "(none)") + "\n  + " +
           (b ? *b : "(none)") + "\n";
  }
  if (more) out += "... and " + std::to_string(more) + " more differing lines\n";
  return out;
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
                           << ".gz (" << want.size() << " vs " << got.size() << " bytes):\n"
                           << Difference(want, got) << "actual output: " << actual
                           << " (scripts/make_goldens.sh rewrites the goldens after an intended "
                              "change)";
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
