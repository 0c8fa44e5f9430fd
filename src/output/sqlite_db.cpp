#include "output/sqlite_db.h"

#include <utility>

#include "kprof/trace.h"

namespace kprof::sqlite {

Db::Db(const std::string& file, std::string label) : label_(std::move(label)) {
  const int rc =
      sqlite3_open_v2(file.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw InputError(label_ + ": sqlite: " + msg + " (open)");
  }
  sqlite3_extended_result_codes(db_, 1);
}

Db::~Db() {
  if (db_ != nullptr) sqlite3_close_v2(db_);  // error path only; Close() checks the result
}

void Db::Check(int rc, const char* what, int ok, int ok2) const {
  if (rc == ok || rc == ok2) return;
  const char* msg =
      db_ != nullptr && sqlite3_errcode(db_) == rc ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  throw InputError(label_ + ": sqlite: " + msg + " (" + what + ")");
}

void Db::Exec(const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return;
  std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  throw InputError(label_ + ": sqlite: " + msg);
}

void Db::Close() {
  if (db_ == nullptr) return;
  const int rc = sqlite3_close(db_);
  if (rc != SQLITE_OK) Check(rc, "close");
  db_ = nullptr;
}

Stmt::Stmt(Db& db, const std::string& sql) : db_(db) {
  db_.Check(sqlite3_prepare_v3(db_.handle(), sql.c_str(), static_cast<int>(sql.size()),
                               SQLITE_PREPARE_PERSISTENT, &st_, nullptr),
            "prepare");
}

Stmt::~Stmt() { sqlite3_finalize(st_); }

void Stmt::Bind(int i, std::string_view s) {
  // SQLITE_TRANSIENT: SQLite copies the bytes, so the caller's storage may go away.
  db_.Check(sqlite3_bind_text64(st_, i, s.data(), s.size(), SQLITE_TRANSIENT, SQLITE_UTF8), "bind");
}

void Stmt::Bind(int i, Null) { db_.Check(sqlite3_bind_null(st_, i), "bind"); }

void Stmt::Bind(int i, double v) { db_.Check(sqlite3_bind_double(st_, i, v), "bind"); }

void Stmt::BindInt(int i, int64_t v) {
  db_.Check(sqlite3_bind_int64(st_, i, static_cast<sqlite3_int64>(v)), "bind");
}

void Stmt::Step() {
  db_.Check(sqlite3_step(st_), "insert", SQLITE_DONE);
  db_.Check(sqlite3_reset(st_), "reset");
}

std::string InsertSql(std::string_view table, std::string_view columns) {
  std::string sql = "INSERT INTO ";
  sql += table;
  sql += " (";
  sql += columns;
  sql += ") VALUES (";
  size_t n = 1;
  for (char c : columns) n += c == ',' ? 1 : 0;
  for (size_t i = 0; i < n; ++i) sql += i == 0 ? "?" : ", ?";
  sql += ")";
  return sql;
}

}  // namespace kprof::sqlite
