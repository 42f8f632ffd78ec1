import CGLib
import Dispatch
import Glibc
import RunLoopKit

/// Part (b): a resident thread's loop drives a `GMainContext`. A `g_timeout_add`-style timeout
/// and a GIOChannel watch on a pipe, both attached to that context, run on the loop's thread
/// while the loop runs in its default mode; an idle context costs the loop no wake-up.
struct GLibInLoop {
  static let ticks = 3
  static let messages = 5
  static let message = Array("hello from another thread\n".utf8)

  func run() throws -> [String] {
    var checks = Checks()
    let thread = try ResidentThread(name: "glib-context")
    defer { thread.stop() }
    var pipeEnds: [Int32] = [0, 0]
    guard pipe(&pipeEnds) == 0 else { return ["pipe: errno \(errno)"] }
    let (readEnd, writeEnd) = (pipeEnds[0], pipeEnds[1])
    defer { close(writeEnd) }
    let allDone = DispatchSemaphore(value: 0)

    let driver = try thread.performAndWait {
      let context = g_main_context_new()!
      g_main_context_push_thread_default(context)
      let state = GLibSideState(thread: thread, onDone: { allDone.signal() })
      state.attachTimeout(to: context, every: 20, times: Self.ticks)
      state.attachWatch(on: readEnd, to: context, expecting: Self.messages * Self.message.count)
      let driver = try GMainContextDriver(context: context, loop: thread.assumeIsolated())
      return LoopBound(Driven(driver: driver, state: state), loop: thread.loop)
    }
    // Another thread writes into the pipe GLib watches.
    DispatchQueue.global().async {
      for _ in 0..<Self.messages {
        _ = Self.message.withUnsafeBytes { write(writeEnd, $0.baseAddress, $0.count) }
      }
    }
    checks.expect(
      allDone.wait(timeout: .now() + .seconds(10)) == .success, "GLib's work never finished")

    // Idle: the context has nothing to do, so the loop should sleep through 300 ms.
    // (The pass that signalled may still be finishing: it may count one more pass and wait.)
    let before = thread.loop.metrics
    usleep(300_000)
    let waits = thread.loop.metrics.waits - before.waits
    let passes = thread.loop.metrics.passes - before.passes

    let report = try thread.performAndWait {
      let driven = driver.value
      let report = driven.state.report(
        iterations: driven.driver.iterations, errors: driven.driver.errors)
      driven.driver.invalidate()
      g_main_context_pop_thread_default(driven.driver.context)
      g_main_context_unref(driven.driver.context)
      driven.state.release()
      return report
    }
    close(readEnd)
    print(
      "  timeout fired \(report.ticks) times, watch read \(report.bytesRead) bytes, on the loop's thread in its default mode"
    )
    print("  \(report.iterations) GLib iterations; idle 300 ms: \(waits) waits, \(passes) passes")
    checks.expect(
      report.ticks == Self.ticks, "the timeout fired \(report.ticks) times, not \(Self.ticks)")
    checks.expect(
      report.bytesRead == Self.messages * Self.message.count,
      "the watch read \(report.bytesRead) bytes, not \(Self.messages * Self.message.count)")
    for problem in report.problems { checks.expect(false, problem) }
    checks.expect(waits <= 1 && passes <= 1, "an idle context woke the loop: \(passes) passes")
    return checks.failures
  }
}

/// What part (b) hands back from the loop's thread.
struct Report: Sendable {
  var ticks: Int
  var bytesRead: Int
  var iterations: Int
  var problems: [String]
}

/// The driver and the GLib side's state, which live on the loop's thread.
struct Driven {
  let driver: GMainContextDriver
  let state: GLibSideState
}
