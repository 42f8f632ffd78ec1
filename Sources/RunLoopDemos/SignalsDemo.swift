import CRunLoopShims
import Dispatch
import Foundation
import Glibc
import RunLoopKit

/// `signals`: a small daemon on `Loop.main` with a group of two worker threads. It sends
/// itself SIGUSR1 three times (each a "reload", counted on the main thread), watches a child
/// process to its exit, and stops gracefully on SIGTERM: the workers finish the jobs queued
/// before the stop, then the loop returns and the program exits 0. Runs on the main thread
/// only (its test is an XCTest case, which runs there).
public enum SignalsDemo {
  // A script read top to bottom, in the order its steps appear in the output.
  public static func run() throws -> DemoReport {
    guard crl_is_main_thread() != 0 else {
      throw DemoError("the signals scenario runs Loop.main, so it must run on the main thread")
    }
    var report = DemoReport(name: "signals", title: "A daemon: signals, a child, two workers")
    let loop = Loop.main
    // Like many daemons, this one blocks the signals it handles in its main thread before it
    // starts any thread, so every thread it makes inherits the block (Dispatch's block them
    // already). No thread is left to take them but the library's own catcher.
    var handled = sigset_t()
    sigemptyset(&handled)
    sigaddset(&handled, SIGUSR1)
    sigaddset(&handled, SIGTERM)
    var saved = sigset_t()
    pthread_sigmask(SIG_BLOCK, &handled, &saved)
    defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
    let workers = try ResidentThreadGroup(count: 2, name: "worker")

    // 1. SIGUSR1 = reload. The sender waits for each reload, so none coalesce.
    let reloads = Locked(0)
    let reload = try SignalSource(signal: SIGUSR1) { count in
      reloads.withLock { $0 += count }
      if reloads.value == 3 { loop.stop() }
    }
    try loop.add(reload, to: .default)
    defer { reload.invalidate() }
    // The catcher has taken SIGUSR1 in when `add` returns; it shows in /proc once the thread
    // is back in its wait.
    try? waitFor("the catcher's wait") { !threadsAccepting(SIGUSR1).isEmpty }
    let accepting = threadsAccepting(SIGUSR1)
    let reloadTrace = try tracedRun(loop, for: .seconds(10)) {
      for sent in 1...3 {
        kill(getpid(), SIGUSR1)
        try? waitFor("reload \(sent)") { reloads.value >= sent }
      }
    }

    // 2. A child process, watched to its exit through its pidfd.
    let termination = Locked<ChildProcessSource.Termination?>(nil)
    // SpawnedProcess starts it with no signal blocked and every disposition at its default.
    let child = try SpawnedProcess(executable: "/bin/sh", arguments: ["-c", "exit 7"]).processID
    let watch = try ChildProcessSource(processID: child) { ended in
      termination.value = ended
      loop.stop()
    }
    try loop.add(watch, to: .default)
    let childTrace = try tracedRun(loop, startWhenAsleep: false) {}

    // 3. SIGTERM = graceful stop: jobs are queued on the workers, then the signal arrives.
    let finished = Locked(0)
    let queued = 8
    let stop = try SignalSource(signal: SIGTERM) { _ in
      workers.stop()
      try? workers.join()
      loop.stop()
    }
    try loop.add(stop, to: .default)
    defer { stop.invalidate() }
    let started = Locked(0)
    let stopTrace = try tracedRun(loop, for: .seconds(10)) {
      for _ in 0..<queued {
        try? workers.next().perform {
          started.withLock { $0 += 1 }
          usleep(5_000)  // a job's work
          finished.withLock { $0 += 1 }
        }
      }
      try? waitFor("the first jobs to start") { started.value >= 2 }
      kill(getpid(), SIGTERM)
    }
    let refused = (try? workers.next().perform {}) == nil

    report.steps = [
      DemoStep(
        caption:
          "A Dispatch thread sends SIGUSR1 three times; Loop.main's SignalSource counts reloads",
        trace: reloadTrace,
        notes: [
          "Woken by \(reloadTrace.wakeCausesText): the process-wide handler counted each delivery and "
            + "wrote the source's eventfd; the count reached the handler on the main thread.",
          "reloads counted: \(reloads.value)",
          "Threads that accept SIGUSR1: \(accepting.joined(separator: ", ")). Every other "
            + "thread blocks it, so the kernel delivers it there, and the count reaches "
            + "Loop.main all the same.",
        ]),
      DemoStep(
        caption: "A child process (`sh -c 'exit 7'`) watched through its pidfd",
        trace: childTrace,
        notes: [
          "The child \(termination.value.map(\.description) ?? "never ended") and was reaped: "
            + "no zombie is left (waitpid now says ECHILD: \(isReaped(child)))."
        ]),
      DemoStep(
        caption: "\(queued) jobs queued on the two workers, then SIGTERM",
        trace: stopTrace,
        notes: [
          "The SIGTERM handler called workers.stop() and workers.join(): every job queued "
            + "before the stop ran (\(finished.value) of \(queued)), then Loop.main stopped.",
          "A job posted after the stop is refused with an error, not dropped: \(refused).",
        ]),
    ]
    report.explanation = """
      A signal can arrive on any thread, at any moment, and a signal handler may do almost \
      nothing safely. So a SignalSource installs one process-wide handler per signal that only \
      counts the delivery and writes the source's eventfd; the loop sees the eventfd as any \
      other descriptor and calls your handler on its own thread, with the count. No thread has \
      to block the signal, which is what makes signalfd hard to use in a program whose \
      libraries start threads of their own. A child's exit needs no signal at all: its pidfd \
      becomes readable, and the source reaps the child. A ResidentThreadGroup's stop() lets \
      each thread finish what was posted before it, so a SIGTERM handler that stops and joins \
      the group shuts the program down without losing queued work.
      """
    return report
  }

  /// The names of the threads that do not block `signal`, from /proc.
  static func threadsAccepting(_ signal: Int32) -> [String] {
    let bit = UInt64(1) << UInt64(signal - 1)
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { task -> String? in
      guard
        let status = try? String(contentsOfFile: "/proc/self/task/\(task)/status", encoding: .utf8)
      else { return nil }
      let lines = status.split(separator: "\n")
      let name = lines.first { $0.hasPrefix("Name:") }?.dropFirst(5)
      let blocked = lines.first { $0.hasPrefix("SigBlk:") }?.dropFirst(7)
      guard let name, let blocked,
        let mask = UInt64(blocked.trimmingCharacters(in: .whitespaces), radix: 16)
      else { return nil }
      return mask & bit == 0 ? name.trimmingCharacters(in: .whitespaces) : nil
    }.sorted()
  }

  private static func isReaped(_ pid: pid_t) -> Bool {
    waitpid(pid, nil, WNOHANG) == -1 && errno == ECHILD
  }
}
