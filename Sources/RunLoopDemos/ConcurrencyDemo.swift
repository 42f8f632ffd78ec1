import CRunLoopShims
import Dispatch
import Glibc
import RunLoopKit
import RunLoopKitExecutors

/// `concurrency`: the main thread runs `Loop.main`, and three kinds of Swift concurrency work
/// each wake it — a hop to the main actor, a `Task.sleep` timed by `Loop.main`'s own timer
/// (RunLoopKitExecutors), a `DispatchQueue.main` block — and a nested run in a mode outside
/// the common set holds the main queue back. Runs on the main thread only (the demo's
/// `main` runs there; its test is an XCTest case, which runs there too).
public enum ConcurrencyDemo {
  public static let tracking = Loop.Mode("tracking")

  // Longer than ~60 lines on purpose: a scenario is a script the demo prints step by
  // step, and it reads best top to bottom, in the order the steps appear in its output.
  public static func run() throws -> DemoReport {
    guard crl_is_main_thread() != 0 else {
      throw DemoError("the concurrency scenario runs Loop.main, so it must run on the main thread")
    }
    var report = DemoReport(name: "concurrency", title: "Swift concurrency wakes Loop.main")
    let loop = Loop.main
    let seen = Locked<[String]>([])
    @Sendable func note(_ what: String) {
      seen.withLock { $0.append("\(what) ran on the main thread: \(loop.isCurrent)") }
    }

    let hop = try tracedRun(loop) {
      Task { @MainActor in
        note("the @MainActor task")
        loop.stop()
      }
    }
    let sleep = try tracedRun(loop) {
      // A task that prefers Loop.main's executor: its sleep is a Loop.main timer.
      Task(executorPreference: loop.executor) {
        try? await Task.sleep(for: .milliseconds(20))
        note("the code after Task.sleep")
        loop.stop()
      }
    }
    let block = try tracedRun(loop) {
      DispatchQueue.main.async {
        note("the DispatchQueue.main block")
        loop.stop()
      }
    }

    // "tracking" is not a common mode: a main-queue block posted during it waits.
    let touch = try LoopTimer(
      label: "touch", after: .milliseconds(10), repeating: .milliseconds(30)
    ) { _ in }
    try loop.add(touch, to: tracking)
    defer { touch.invalidate() }
    let held = try tracedRun(loop, mode: tracking, expect: .timedOut, for: .milliseconds(100)) {
      DispatchQueue.main.async {
        note("the block posted during \"tracking\"")
        loop.stop()
      }
    }
    let released = try tracedRun(loop, startWhenAsleep: false) {}

    report.steps = [
      DemoStep(
        caption: "From a Dispatch worker: Task { @MainActor in … } while Loop.main sleeps",
        trace: hop,
        notes: [
          "Woken by \(hop.wakeCausesText): the main actor's jobs go through the main dispatch queue, "
            + "whose eventfd Loop.main watches in its common modes.",
          seen.value[0],
        ]),
      DemoStep(
        caption:
          "Task(executorPreference: Loop.main.executor) { try await Task.sleep(for: 20 ms) }",
        trace: sleep,
        notes: [
          "Woken by \(sleep.wakeCausesText): the task's first job arrived as a perform block; the "
            + "sleep is the one-shot timer labelled \"Task.sleep\" on Loop.main's timerfd.",
          seen.value[1],
        ]),
      DemoStep(
        caption: "From a Dispatch worker: DispatchQueue.main.async { … }",
        trace: block,
        notes: ["Woken by \(block.wakeCausesText).", seen.value[2]]),
      DemoStep(
        caption:
          "A nested run in \"tracking\" (not a common mode) for 100 ms; a main-queue block is posted",
        trace: held,
        notes: [
          "No main-queue work ran: \"tracking\" is outside the common set, so the loop does "
            + "not watch the main queue there (CF behaves the same). It woke only for \"touch\"."
        ]),
      DemoStep(
        caption: "Back in the default mode",
        trace: released,
        notes: [
          "The held block runs on the first pass, without sleeping: the eventfd was already "
            + "readable.", seen.value[3],
        ]),
    ]
    report.explanation = """
      On Linux, the main actor's executor is libdispatch's main queue, and libdispatch exposes \
      that queue to run loops as an eventfd. Loop.main adds it as a source in its common modes \
      the first time it runs, exactly as CFRunLoop does for Foundation's RunLoop.main, so \
      @MainActor code and DispatchQueue.main blocks run while Loop.main runs — and wait while a \
      nested run is in a mode outside the common set, like a timer that is not in .common. \
      Task.sleep is different: it is timed by whichever executor the task prefers. With \
      RunLoopKitExecutors, a loop's executor is a scheduling executor, so a task that prefers \
      it sleeps on that loop's own timer and resumes on its thread, with no Dispatch thread in \
      between.
      """
    return report
  }
}
