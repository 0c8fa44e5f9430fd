// A thin RAII layer over the SQLite C library for the export: every call's return code is
// checked, and a failure becomes InputError("PATH: sqlite: MESSAGE"). Data only ever reaches
// SQL through bound parameters; statement text is kprof's own constants.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace kprof::sqlite {

/// A NULL parameter.
struct Null {};

class Db {
 public:
  /// Opens (creates) the database file `file`; `label` names it in error messages (the path the
  /// user gave, not the temporary file).
  Db(const std::string& file, std::string label);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  /// Runs statements without parameters (schema, pragmas, transactions).
  void Exec(const char* sql);
  /// Throws InputError("LABEL: sqlite: MESSAGE (what)") unless rc is one of the accepted codes.
  void Check(int rc, const char* what, int ok = SQLITE_OK, int ok2 = SQLITE_OK) const;
  /// Closes the database, checking the result (before the file is renamed into place).
  void Close();

  sqlite3* handle() const { return db_; }
  const std::string& label() const { return label_; }

 private:
  sqlite3* db_ = nullptr;
  std::string label_;
};

/// A prepared statement, reset and re-bound for each row.
class Stmt {
 public:
  Stmt(Db& db, const std::string& sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  /// Binds the values to parameters 1..N, runs the statement (expects no result row) and
  /// resets it for the next row.
  template <class... A>
  void Insert(const A&... values) {
    int i = 0;
    (Bind(++i, values), ...);
    Step();
  }

  void Bind(int i, std::string_view s);
  void Bind(int i, Null);
  void Bind(int i, double v);
  template <class T, class = std::enable_if_t<std::is_integral_v<T>>>
  void Bind(int i, T v) {
    BindInt(i, static_cast<int64_t>(v));
  }
  template <class T>
  void Bind(int i, const std::optional<T>& v) {
    if (v) {
      Bind(i, *v);
    } else {
      Bind(i, Null{});
    }
  }
  void Bind(int i, const std::string& s) { Bind(i, std::string_view(s)); }
  void Bind(int i, const char* s) { Bind(i, std::string_view(s)); }

  /// Runs the statement to completion and resets it.
  void Step();

 private:
  void BindInt(int i, int64_t v);
  Db& db_;
  sqlite3_stmt* st_ = nullptr;
};

/// "INSERT INTO table (c1, c2, ...) VALUES (?, ?, ...)" for a table and its column list.
std::string InsertSql(std::string_view table, std::string_view columns);

}  // namespace kprof::sqlite
