import CSQLite
import Glibc
import RunLoopKit
import Synchronization

// SQLite confined to a resident thread, searched as you type from Loop.main. Every answer shown
// is checked against a plain scan of the same catalogue. Exits with status 1 if a check failed.
var failures: [String] = []
@MainActor func expect(_ condition: Bool, _ what: @autoclosure () -> String) {
  if !condition { failures.append(what()) }
}

let words = Words.make(count: 100_000)
let database = try ResidentThread(name: "sqlite")
let filling = LoopClock.now
let index = try database.performAndWait {
  LoopBound(try SearchIndex(words: words), loop: .current)  // made, and kept, on "sqlite"
}
print(
  "filled \(words.count) rows on thread \"sqlite\" in \(milliseconds(filling.duration(to: .now)))")
// The connection is closed on its own thread, after the last search it accepted.
let closeResult = Mutex<Int32?>(nil)
try database.onStop { closeResult.withLock { $0 = index.value.close() } }

let box = try SearchBox(database: database, index: index, pause: .milliseconds(50))
// "qu", a pause, then "ick": two searches, for "qu" and for "quick".
try box.type([
  (.zero, "q"), (.milliseconds(10), "u"), (.milliseconds(400), "i"), (.milliseconds(410), "c"),
  (.milliseconds(420), "k"),
])
let giveUp = LoopClock.now.advanced(by: .seconds(30))
while !box.isSettled && LoopClock.now < giveUp {
  Loop.main.run(in: .default, for: .milliseconds(100))
}
box.close()
database.stop()
try database.join()

for (result, latency) in box.shown {
  print(
    "  \"\(result.prefix)\": \(result.count) matches, first \(result.first.prefix(3)) — shown \(milliseconds(latency)) after the pause"
  )
  let expected = Words.scan(words, prefix: result.prefix, limit: SearchIndex.limit)
  expect(result == expected, "\"\(result.prefix)\" answered \(result), a scan finds \(expected)")
  expect(
    result.count > 0, "\"\(result.prefix)\" matched nothing: the catalogue is not what it should be"
  )
}
expect(box.isSettled, "the searches did not settle within 30 s")
expect((1...2).contains(box.shown.count), "\(box.shown.count) answers shown for two pauses")
expect(
  box.shown.last?.result.prefix == "quick",
  "the last answer is for \(box.shown.last?.result.prefix ?? "nothing")")
expect(box.text == "quick", "typed \(box.text)")
for problem in box.problems { expect(false, problem) }
let closed = closeResult.withLock { $0 }
expect(
  closed == SQLITE_OK,
  "sqlite3_close on the \"sqlite\" thread returned \(closed.map(String.init) ?? "nothing")")
print(
  "  \(box.shown.count) searches shown, \(box.dropped) overtaken; connection closed on its thread: \(closed == SQLITE_OK)"
)

func milliseconds(_ duration: Duration) -> String {
  let (seconds, attoseconds) = duration.components
  return "\(Double(seconds) * 1000 + Double(attoseconds / 1_000_000_000_000) / 1000) ms"
}

for failure in failures { print("FAILED: \(failure)") }
print(
  failures.isEmpty
    ? "sqlite-search: all checks passed" : "sqlite-search: \(failures.count) checks failed")
exit(failures.isEmpty ? 0 : 1)
