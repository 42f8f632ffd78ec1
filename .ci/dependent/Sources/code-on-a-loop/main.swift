import Glibc
import RunLoopKit

// Code that lives on a loop, as a user writes it from the README: plain classes whose timers,
// sources and observers capture `self`, with no Sendable conformance, no lock and no escape
// hatch (.ci/dependent-check greps this target for them).

struct Failure: Error, CustomStringConvertible {
  let description: String
}

/// On this thread's loop: a connection's ticking timer, a debouncer fed three quick inputs,
/// and an observer counting the passes it took.
func runOnThisThread() throws -> String {
  let connection = Connection()
  var actions = 0
  let debouncer = Debouncer(delay: .milliseconds(20)) { actions += 1 }
  let counter = PassCounter()
  try counter.start()
  try connection.start()
  for _ in 0..<3 { try debouncer.input() }
  // The timer and the delayed action keep the mode alive; the run ends once both are done.
  Loop.current.run(in: .default, for: .seconds(10))
  counter.stop()
  guard connection.ticks == 3, actions == 1, counter.passes > 0 else {
    throw Failure(
      description: "ticks \(connection.ticks), actions \(actions), passes \(counter.passes)")
  }
  return "connection ticked 3 times, debouncer ran once, \(counter.passes) passes counted"
}

/// On a resident thread: a reader made there reads a pipe this thread writes, and hands back
/// only a String.
func readThroughResidentThread() async throws -> String {
  let thread = try ResidentThread(name: "reader")
  defer {
    thread.stop()
    try? thread.join()
  }
  var fds: [Int32] = [0, 0]
  guard pipe(&fds) == 0 else { throw Failure(description: "pipe failed") }
  let writeEnd = fds[1]
  let readEnd = fds[0]
  return try await withCheckedThrowingContinuation { continuation in
    do {
      try thread.perform {
        let reader = PipeReader(fd: readEnd) { continuation.resume(returning: $0) }
        do { try reader.start() } catch { continuation.resume(throwing: error) }
      }
    } catch {
      continuation.resume(throwing: error)
    }
    for word in ["hello ", "run ", "loop"] { _ = write(writeEnd, word, word.utf8.count) }
    close(writeEnd)
  }
}

print(try runOnThisThread())
let text = try await readThroughResidentThread()
guard text == "hello run loop" else { throw Failure(description: "reader got \"\(text)\"") }
print("reader on its own thread read \"\(text)\"")
