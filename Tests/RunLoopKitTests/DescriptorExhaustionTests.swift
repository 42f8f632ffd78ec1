import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// Issue 28, defect 2 (checklist line 91): running out of descriptors never stops the
/// process. Each test runs in a child process (an exit test), because it lowers the process's
/// descriptor limit until no new descriptor can be opened: `Loop.current` still answers, adds
/// throw `EMFILE`, and the rebuild that sheds a descriptor closed behind the loop's back uses
/// the loop's spare epoll set — or, without one, degrades to polling instead of spinning.
extension RunLoopKitTests {
  @Suite("Out of descriptors") struct DescriptorExhaustion {
    @Test(
      "91. Out of descriptors, Loop.current answers, an add throws EMFILE, and a posted block waits until a mode can be made"
    )
    func test_91_loopWithoutDescriptors() async {
      reportFailure(
        await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
          exhaustion_loopWithoutDescriptors()
        })
    }

    @Test(
      "91. Out of descriptors, a descriptor closed behind its source's back is shed with the spare epoll set: reported once, no spin"
    )
    func test_91_rebuildUsesTheSpareSet() async {
      reportFailure(
        await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
          exhaustion_rebuildWithSpare()
        })
    }

    @Test(
      "91. Out of descriptors with no spare set, the mode polls between short sleeps instead of spinning, and sheds the registration once it can"
    )
    func test_91_rebuildDegradesThenRecovers() async {
      reportFailure(
        await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
          exhaustion_rebuildDegrades()
        })
    }

    @Test(
      "91. Degraded under a spinning wait policy, the mode still polls between short sleeps; once the lost registration is gone and descriptors are free, the next pass rebuilds"
    )
    func test_91_degradedWhileSpinningThenRecovers() async {
      reportFailure(
        await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
          exhaustion_degradedWhileSpinning()
        })
    }

    @Test("91. Out of descriptors, a ResidentThread is refused with an error naming EMFILE")
    func test_91_residentThreadRefused() async {
      reportFailure(
        await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
          exhaustion_residentThread()
        })
    }
  }
}

/// Records each check the child reported failed (on its standard error) as an issue of the
/// test. A child that crashed instead fails the exit test's own expectation.
private func reportFailure(_ result: ExitTest.Result?) {
  guard let result else { return }
  let text = String(decoding: result.standardErrorContent, as: UTF8.self)
  for line in text.split(separator: "\n") where line.hasPrefix("check failed: ") {
    Issue.record(Comment(rawValue: String(line)))
  }
}

// MARK: - The child processes' bodies

/// Makes every new descriptor fail with EMFILE (the soft limit becomes the lowest free
/// number); returns the limits to restore.
private func exhaustDescriptors() -> rlimit {
  var saved = rlimit()
  getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &saved)
  let lowest = dup(0)
  close(lowest)
  var limit = saved
  limit.rlim_cur = rlim_t(lowest)
  setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
  return saved
}

private func restoreDescriptors(_ saved: rlimit) {
  var limit = saved
  setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
}

/// In a child process: says on standard error what failed, for the parent to record (an
/// expectation recorded in the child would not reach the parent's results).
private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
  guard !condition else { return }
  let line = Array("check failed: \(message())\n".utf8)
  _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}

private func exhaustion_loopWithoutDescriptors() {
  let thread = TestThread {
    let saved = exhaustDescriptors()
    let loop = Loop.current
    var refusal = ""
    do {
      try loop.add(ManualSource {}, to: .default)
    } catch {
      refusal = "\(error)"
    }
    let ran = Box(false)
    do {
      try loop.perform { ran.value = true }
    } catch {
      check(false, "a block was refused: \(error)")
    }
    let starved = loop.run(for: .milliseconds(10))
    restoreDescriptors(saved)
    check(refusal.contains("EMFILE"), "the add was not refused with EMFILE: \"\(refusal)\"")
    check(starved == .finished, "a run without a mode returned \(starved)")
    check(!ran.value, "the block ran without a mode")
    let fed = loop.run(for: .milliseconds(10))
    check(ran.value, "the block did not run once descriptors were free (\(fed))")
  }
  thread.join()
}

/// A loop watching a pipe whose fd was closed while a `dup` keeps the file open and readable:
/// the kernel's registration reports for a number the source no longer owns. Runs `body`
/// with the loop, what the source was told, and a pass counter.
private func withStaleRegistration(
  _ body: @escaping @Sendable (Loop, Recorder, Box<Int>, _ keepOpen: Box<Int32>) -> Void
) {
  let thread = TestThread {
    let loop = Loop.current
    let calls = Recorder()
    let passes = Box(0)
    do {
      try loop.add(ManualSource {}, to: .default)
      try loop.add(
        LoopObserver(activities: .beforeSources) { _, _ in passes.value += 1 }, to: .default)
      let pipe = makePipe()
      let keepOpen = Box(dup(pipe.read))
      let source = DescriptorSource(fileDescriptor: pipe.read) { _, events in
        calls.log("\(events)")
      }
      try loop.add(source, to: .default)
      close(pipe.read)
      writeByte(pipe.write)
      body(loop, calls, passes, keepOpen)
      source.invalidate()
      if keepOpen.value >= 0 { close(keepOpen.value) }
      close(pipe.write)
    } catch {
      check(false, "setting up failed: \(error)")
    }
  }
  thread.join()
}

private func exhaustion_rebuildWithSpare() {
  withStaleRegistration { loop, calls, passes, _ in
    let saved = exhaustDescriptors()
    loop.run(for: .milliseconds(300))
    restoreDescriptors(saved)
    let metrics = loop.metrics
    check(calls.all == ["[error, invalidDescriptor]"], "the source was told \(calls.all)")
    check(metrics.epollRebuilds == 1, "\(metrics.epollRebuilds) rebuilds")
    check(metrics.epollRebuildFailures == 0, "\(metrics.epollRebuildFailures) failed rebuilds")
    check(passes.value < 20, "\(passes.value) passes in 300 ms: the loop spun")
  }
}

private func exhaustion_rebuildDegrades() {
  degradeThenRecover(spinning: false, registrationGoesAway: false)
}

private func exhaustion_degradedWhileSpinning() {
  degradeThenRecover(spinning: true, registrationGoesAway: true)
}

/// Out of descriptors with no spare set, the rebuild fails: the mode must poll between short
/// sleeps (even under a spinning policy), then rebuild once descriptors are free again —
/// whether the lost registration still reports then, or went away by itself (its last
/// descriptor closed) and nothing reports any more.
private func degradeThenRecover(spinning: Bool, registrationGoesAway: Bool) {
  withStaleRegistration { loop, calls, passes, keepOpen in
    if spinning { loop.waitPolicy = .spinThenSleep(.microseconds(50)) }
    _ = loop.lock.withLock { loop.spareEpoll.take() }
    let saved = exhaustDescriptors()
    loop.run(for: .milliseconds(300))
    let failed = loop.metrics.epollRebuildFailures
    let degradedPasses = passes.value
    if registrationGoesAway {
      close(keepOpen.value)
      keepOpen.value = -1
    }
    restoreDescriptors(saved)
    check(calls.all == ["[error, invalidDescriptor]"], "the source was told \(calls.all)")
    check(failed >= 1, "no rebuild failed")
    // One look every 10 ms: about 30 passes, where a spin makes tens of thousands.
    check(degradedPasses < 100, "\(degradedPasses) passes in 300 ms: the loop spun")
    passes.value = 0
    loop.run(for: .milliseconds(300))
    let metrics = loop.metrics
    check(metrics.epollRebuilds == 1, "\(metrics.epollRebuilds) rebuilds after recovering")
    check(passes.value < 10, "\(passes.value) passes in 300 ms after recovering")
    let (degraded, spare) = loop.lock.withLock {
      (loop.modeStates[.default]!.rebuildFailed, loop.spareEpoll != nil)
    }
    check(!degraded, "the mode still polls after recovering")
    check(spare, "no spare set was made after the rebuild")
  }
}

private func exhaustion_residentThread() {
  let saved = exhaustDescriptors()
  var refusal = ""
  do {
    let thread = try ResidentThread(name: "starved")
    thread.stop()
    try thread.join()
  } catch {
    refusal = "\(error)"
  }
  restoreDescriptors(saved)
  check(refusal.contains("EMFILE"), "the thread was not refused with EMFILE: \"\(refusal)\"")
}
