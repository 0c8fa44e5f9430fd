// Helpers of the SQLite export tests: export a run, read the database back through the sqlite3
// C library.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/sqlite_export.h"
#include "kprof/timeline.h"

namespace kprof::test {

/// A value read back: NULL, an integer, a real or text (kept as bytes).
struct Value {
  int type = SQLITE_NULL;
  int64_t i = 0;
  double d = 0;
  std::string s;
};
using Row = std::vector<Value>;

/// A read-only connection to an exported database.
class Db {
 public:
  explicit Db(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
      throw std::runtime_error("cannot open " + path);
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  /// All rows of `sql`, parameters bound as text.
  std::vector<Row> Query(const std::string& sql, const std::vector<std::string>& params = {}) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("prepare: ") + sqlite3_errmsg(db_) + ": " + sql);
    for (size_t i = 0; i < params.size(); ++i)
      sqlite3_bind_text(st, static_cast<int>(i + 1), params[i].data(),
                        static_cast<int>(params[i].size()), SQLITE_TRANSIENT);
    std::vector<Row> rows;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      Row row(static_cast<size_t>(sqlite3_column_count(st)));
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        Value& v = row[static_cast<size_t>(c)];
        v.type = sqlite3_column_type(st, c);
        if (v.type == SQLITE_INTEGER) v.i = sqlite3_column_int64(st, c);
        if (v.type == SQLITE_FLOAT) v.d = sqlite3_column_double(st, c);
        if (v.type == SQLITE_TEXT) {
          const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st, c));
          v.s.assign(p, static_cast<size_t>(sqlite3_column_bytes(st, c)));
        }
      }
      rows.push_back(std::move(row));
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) throw std::runtime_error(std::string("step: ") + sqlite3_errmsg(db_));
    return rows;
  }
  /// The single integer `sql` returns.
  int64_t Int(const std::string& sql) {
    auto rows = Query(sql);
    if (rows.size() != 1 || rows[0].empty()) throw std::runtime_error("not one value: " + sql);
    return rows[0][0].i;
  }

 private:
  sqlite3* db_ = nullptr;
};

/// A run with its timeline, analysis and hints, as `kprof export` computes them.
struct Analysed {
  Run run;
  Timeline timeline;
  Analysis analysis;
  std::vector<Hint> hints;
  explicit Analysed(Run r) : run(std::move(r)) {
    timeline = BuildTimeline(run);
    analysis = Analyze(timeline);
    hints = ComputeHints(timeline, analysis);
  }
  void Export(const std::string& path) const {
    SqliteExportOptions o;
    o.force = true;
    WriteSqlite(path, timeline, analysis, hints, o);
  }
};

inline std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

/// A run analysed and exported to a temporary database named `name`, open for reading; the file
/// goes with it.
struct Exported {
  std::string path;
  Analysed an;
  std::optional<Db> db;
  Exported(Run run, const std::string& name) : path(TempPath(name)), an(std::move(run)) {
    an.Export(path);
    db.emplace(path);
  }
  ~Exported() {
    db.reset();
    std::filesystem::remove(path);
  }
  Exported(const Exported&) = delete;
  Exported& operator=(const Exported&) = delete;
};

}  // namespace kprof::test
