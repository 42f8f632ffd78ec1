import CSQLite

/// A SQLite connection that lives on one resident thread. Opened with `SQLITE_OPEN_NOMUTEX`:
/// SQLite takes no lock of its own, because only that thread ever touches the connection
/// (a `LoopBound` holds it, and traps anywhere else).
final class SearchIndex {
  private var database: OpaquePointer?
  private var search: OpaquePointer?
  private var count: OpaquePointer?
  static let limit = 10

  /// Opens an in-memory database and fills it with `words`, in one transaction.
  init(words: [String]) throws(SQLiteError) {
    let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
    try check(sqlite3_open_v2(":memory:", &database, flags, nil), "sqlite3_open_v2")
    try execute("CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    try execute("BEGIN")
    let insert = try prepare("INSERT INTO products (name) VALUES (?1)")
    defer { sqlite3_finalize(insert) }
    for word in words {
      sqlite3_bind_text(insert, 1, word, -1, transient)
      guard sqlite3_step(insert) == SQLITE_DONE else { throw error("INSERT") }
      sqlite3_reset(insert)
    }
    try execute("COMMIT")
    try execute("CREATE INDEX products_by_name ON products (name)")
    // A prefix as a range of the index: names >= prefix and < prefix followed by 0xFF.
    search = try prepare(
      "SELECT name FROM products WHERE name >= ?1 AND name < ?1 || x'FF' ORDER BY name LIMIT \(Self.limit)"
    )
    count = try prepare("SELECT count(*) FROM products WHERE name >= ?1 AND name < ?1 || x'FF'")
  }

  /// The names that start with `prefix`: how many, and the first few in byte order.
  func find(prefix: String) throws(SQLiteError) -> SearchResult {
    var result = SearchResult(prefix: prefix, count: 0, first: [])
    sqlite3_bind_text(count, 1, prefix, -1, transient)
    defer { sqlite3_reset(count) }
    guard sqlite3_step(count) == SQLITE_ROW else { throw error("SELECT count(*)") }
    result.count = Int(sqlite3_column_int64(count, 0))
    sqlite3_bind_text(search, 1, prefix, -1, transient)
    defer { sqlite3_reset(search) }
    while true {
      switch sqlite3_step(search) {
      case SQLITE_ROW: result.first.append(String(cString: sqlite3_column_text(search, 0)))
      case SQLITE_DONE: return result
      default: throw error("SELECT name")
      }
    }
  }

  /// Finalizes the statements and closes the connection; returns SQLite's result code.
  func close() -> Int32 {
    sqlite3_finalize(search)
    sqlite3_finalize(count)
    (search, count) = (nil, nil)
    defer { database = nil }
    return sqlite3_close(database)
  }

  private func execute(_ sql: String) throws(SQLiteError) {
    try check(sqlite3_exec(database, sql, nil, nil, nil), sql)
  }

  private func prepare(_ sql: String) throws(SQLiteError) -> OpaquePointer? {
    var statement: OpaquePointer?
    try check(sqlite3_prepare_v2(database, sql, -1, &statement, nil), sql)
    return statement
  }

  private func check(_ code: Int32, _ call: String) throws(SQLiteError) {
    if code != SQLITE_OK { throw error(call, code: code) }
  }

  private func error(_ call: String, code: Int32? = nil) -> SQLiteError {
    let message = database.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
    return SQLiteError(call: call, code: code ?? sqlite3_errcode(database), message: message)
  }
}

/// SQLITE_TRANSIENT: SQLite copies the bound text (the Swift string's buffer is temporary).
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A SQLite call that failed, with its result code and SQLite's message.
struct SQLiteError: Error, CustomStringConvertible {
  var call: String
  var code: Int32
  var message: String
  var description: String { "\(call): SQLite error \(code): \(message)" }
}
