import CGLib
import Dispatch
import Foundation
import RunLoopKit

/// Part (a): GLib's main loop runs the program and hosts `Loop.main`, the way a GTK application
/// would. Main-queue blocks, main-actor tasks, `Task.sleep` on the main actor and a
/// `LoopTimer` all run on the GLib thread, inside GLib's dispatch, and an idle second costs
/// (almost) no CPU and no pass.
@MainActor final class LoopMainInGLib {
  /// The work the host must see done, in any order.
  static let expected: Set<String> = [
    "DispatchQueue.main.async", "Task.sleep on the main actor",
    "LoopTimer armed from @MainActor code",
    "@MainActor task started on another thread",
  ]
  private var done: Set<String> = []
  private var checks = Checks()
  private var ticks = 0
  private let mainLoop = g_main_loop_new(nil, 0)
  private var host: EmbeddingGSource?
  private var idleStart: (passes: Int, cpu: Duration)?
  private(set) var idlePasses = 0
  private(set) var idleCPU = Duration.zero

  /// Runs GLib's main loop until the work is done and an idle second has passed; returns
  /// what went wrong, if anything.
  func run() throws -> [String] {
    host = EmbeddingGSource(embedding: try Loop.main.makeEmbedding(), context: nil)

    DispatchQueue.main.async { self.finished("DispatchQueue.main.async") }
    Task { @MainActor in
      try await Task.sleep(for: .milliseconds(20))
      self.finished("Task.sleep on the main actor")
    }
    // Armed from main-actor code through the loop's view: the closure is main-actor isolated,
    // so it uses `self` with no MainActor.assumeIsolated.
    try Loop.main.assumeIsolated().addTimer(after: .milliseconds(10), repeating: .milliseconds(10))
    {
      timer in
      self.ticks += 1
      if self.ticks == 3 {
        timer.invalidate()
        self.finished("LoopTimer armed from @MainActor code")
      }
    }
    Thread.detachNewThread {
      Task { @MainActor in self.finished("@MainActor task started on another thread") }
    }
    // GLib's own timeout ends the program if the work never arrives.
    let guardTimer = g_timeout_source_new(10_000)
    g_source_set_callback(
      guardTimer,
      { data in
        g_main_loop_quit(OpaquePointer(data))
        return 0
      }, UnsafeMutableRawPointer(mainLoop), nil)
    g_source_attach(guardTimer, nil)

    g_main_loop_run(mainLoop)

    g_source_destroy(guardTimer)
    g_source_unref(guardTimer)
    checks.expect(done == Self.expected, "ran \(done.sorted()), expected \(Self.expected.sorted())")
    checks.expect(idleStart != nil, "the idle second never started")
    checks.expect(idlePasses == 0, "an idle second ran \(idlePasses) passes of Loop.main")
    checks.expect(
      idleCPU < .milliseconds(50), "an idle second cost \(milliseconds(idleCPU)) of CPU")
    host?.invalidate()
    g_main_loop_unref(mainLoop)
    return checks.failures
  }

  /// Records one piece of work, checking it runs where a GTK program needs it: on the GLib
  /// thread, inside GLib's dispatch of the embedding's source.
  private func finished(_ work: String) {
    checks.expect(Thread.isMainThread, "\(work) ran off the main thread")
    checks.expect(g_main_depth() > 0, "\(work) ran outside GLib's dispatch")
    checks.expect(
      g_main_context_is_owner(g_main_context_default()) != 0,
      "\(work) ran on a thread that does not own GLib's context")
    done.insert(work)
    print("  GLib hosts Loop.main: \(work), on the GLib thread")
    if done == Self.expected { startIdleSecond() }
  }

  /// Nothing is pending now: for one second GLib sleeps in its poll and Loop.main should
  /// neither run a pass nor cost CPU.
  private func startIdleSecond() {
    idleStart = (host?.passes ?? 0, processCPUTime())
    g_timeout_add(
      1000,
      { data in
        let this = Unmanaged<LoopMainInGLib>.fromOpaque(data!).takeUnretainedValue()
        MainActor.assumeIsolated { this.endIdleSecond() }
        return 0
      }, Unmanaged.passUnretained(self).toOpaque())
  }

  private func endIdleSecond() {
    guard let idleStart else { return }
    idlePasses = (host?.passes ?? 0) - idleStart.passes
    idleCPU = processCPUTime() - idleStart.cpu
    print("  idle second: \(idlePasses) passes, \(milliseconds(idleCPU)) of CPU")
    g_main_loop_quit(mainLoop)
  }
}
