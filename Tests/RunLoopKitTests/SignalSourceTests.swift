import CRunLoopShims
import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

/// The disposition the process has for `signal` now: default, ignored, another handler, ours.
private enum Disposition: Int32 {
  case standard = 0
  case ignored, other, ours
}
private func disposition(_ signal: Int32) -> Disposition? {
  Disposition(rawValue: crl_signal_disposition(signal))
}
private func realtime(_ offset: Int32) -> Int32 { crl_signal_min_realtime() + offset }

extension RunLoopKitTests {
  @Suite("Signal sources") struct SignalSources {
    @Test(
      "82. A burst of 1 000 queued signals is counted exactly on a resident thread's loop, while other threads that never blocked it run"
    )
    func test_82_burstCountedExactly() throws {
      let signal = realtime(4)
      let worker = try ResidentThread(name: "sig-worker")
      let bystander = try ResidentThread(name: "sig-bystander")
      // A Dispatch worker that runs (and never blocked the signal) for the whole burst.
      let done = Gate()
      let dispatchRunning = Gate()
      DispatchQueue.global().async {
        dispatchRunning.open()
        done.wait(seconds: 60)
      }
      #expect(dispatchRunning.wait())
      let total = Counter()
      let calls = Counter()
      let emptyCalls = Counter()
      let offThread = Counter()
      let source = try SignalSource(signal: signal) { count in
        if count < 1 { emptyCalls.increment() }
        if !worker.isCurrent { offThread.increment() }
        calls.increment()
        for _ in 0..<count { total.increment() }
      }
      try worker.loop.add(source, to: .default)
      #expect(disposition(signal) == .ours)
      // Real-time signals queue: each kill below is one delivery the kernel makes.
      for _ in 0..<1000 { kill(getpid(), signal) }
      #expect(waitUntil(seconds: 20) { total.value >= 1000 })
      // Nothing more arrives later, nothing was counted twice.
      try worker.performAndWait {}
      #expect(total.value == 1000)
      #expect(calls.value >= 1 && calls.value <= 1000)
      #expect(emptyCalls.value == 0)
      #expect(offThread.value == 0)
      done.open()
      source.invalidate()
      #expect(disposition(signal) == .standard)
      _ = bystander
    }

    @Test("82. Standard signals sent in a burst coalesce, and the counts add up to every delivery")
    func test_82_standardSignalsCoalesce() throws {
      let thread = try ResidentThread(name: "sig-usr")
      let total = Counter()
      let source = try SignalSource(signal: SIGUSR1) { count in
        for _ in 0..<count { total.increment() }
      }
      try thread.loop.add(source, to: .default)
      for _ in 0..<1000 { kill(getpid(), SIGUSR1) }
      #expect(waitUntil { total.value >= 1 })
      // Once nothing of the burst is pending in the kernel or inside a handler, one more
      // delivery is seen exactly once: nothing is lost between two calls of the handler.
      #expect(waitUntil { !isPending(SIGUSR1) && crl_signal_handlers_in_flight() == 0 })
      try thread.performAndWait {}
      let afterBurst = total.value
      #expect(afterBurst >= 1 && afterBurst <= 1000)
      kill(getpid(), SIGUSR1)
      #expect(waitUntil { total.value == afterBurst + 1 })
      try thread.performAndWait {}
      #expect(total.value == afterBurst + 1)
      source.invalidate()
    }

    @Test("82. A signal that has a source never takes its default action (SIGTERM, in a child)")
    func test_82_noDefaultAction() async {
      await #expect(processExitsWith: .success) {
        let thread = try ResidentThread(name: "sig-term")
        let seen = Gate()
        let source = try SignalSource(signal: SIGTERM) { _ in seen.open() }
        try thread.loop.add(source, to: .default)
        kill(getpid(), SIGTERM)
        precondition(seen.wait(), "SIGTERM never reached its source")
        source.invalidate()
        thread.stop()
        try thread.join()
      }
    }

    @Test("82. A source keeps its count while out of every mode and hands it over when added back")
    func test_82_countKeptWhileRemoved() throws {
      let signal = realtime(5)
      let thread = try ResidentThread(name: "sig-keep")
      let total = Counter()
      let source = try SignalSource(signal: signal) { count in
        for _ in 0..<count { total.increment() }
      }
      // A second source, on a loop that runs freely, tells when the deliveries were made. It
      // also keeps the default action away while `source` is out of its mode.
      let observer = try ResidentThread(name: "sig-observer")
      let observed = Counter()
      let other = try SignalSource(signal: signal) { count in
        for _ in 0..<count { observed.increment() }
      }
      try observer.loop.add(other, to: .default)
      // The source's loop is held in a block, so it handles nothing meanwhile.
      let hold = Gate()
      let held = Gate()
      try thread.loop.add(source, to: .default)
      try thread.perform {
        held.open()
        hold.wait()
      }
      #expect(held.wait())
      for _ in 0..<5 { kill(getpid(), signal) }
      // All five handled by the observer's loop, and no handler still inside its count (it
      // walks the slots in turn, so one may not have reached the source's slot yet).
      #expect(waitUntil { observed.value == 5 && crl_signal_handlers_in_flight() == 0 })
      thread.loop.remove(source, from: .default)
      hold.open()
      try thread.performAndWait {}
      #expect(total.value == 0)
      try thread.loop.add(source, to: .default)
      #expect(waitUntil { total.value == 5 })
      source.invalidate()
      other.invalidate()
    }

    @Test("83. Two loops watching one signal both see it; a third source on the same loop too")
    func test_83_twoLoopsBothSee() throws {
      let signal = realtime(6)
      let first = try ResidentThread(name: "sig-first")
      let second = try ResidentThread(name: "sig-second")
      let seen = [Counter(), Counter(), Counter()]
      let sources = try (0..<3).map { index in
        try SignalSource(signal: signal) { count in
          for _ in 0..<count { seen[index].increment() }
        }
      }
      try first.loop.add(sources[0], to: .default)
      try second.loop.add(sources[1], to: .default)
      try second.loop.add(sources[2], to: .default)
      for _ in 0..<3 { kill(getpid(), signal) }
      #expect(waitUntil { seen.allSatisfy { $0.value == 3 } })
      for source in sources { source.invalidate() }
      #expect(disposition(signal) == .standard)
    }

    @Test("83. Removing the last source puts back the disposition found before the first")
    func test_83_dispositionRestored() throws {
      let signal = realtime(7)
      let thread = try ResidentThread(name: "sig-restore")
      Glibc.signal(signal, SIG_IGN)
      defer { Glibc.signal(signal, SIG_DFL) }
      let one = try SignalSource(signal: signal) { _ in }
      let two = try SignalSource(signal: signal) { _ in }
      #expect(disposition(signal) == .ignored)
      try thread.loop.add(one, to: .default)
      try thread.loop.add(two, to: "other")
      #expect(disposition(signal) == .ours)
      thread.loop.remove(one, from: .default)
      #expect(disposition(signal) == .ours)
      two.invalidate()
      #expect(disposition(signal) == .ignored)
      // Added again: ours again, and put back again.
      try thread.loop.add(one, to: .default)
      #expect(disposition(signal) == .ours)
      one.invalidate()
      #expect(disposition(signal) == .ignored)
    }

    @Test("83. After the last source of SIGUSR2 is removed, SIGUSR2 kills the process (in a child)")
    func test_83_defaultActionAppliesAgain() async {
      await #expect(processExitsWith: .signal(SIGUSR2)) {
        let thread = try ResidentThread(name: "sig-dfl")
        let seen = Gate()
        let source = try SignalSource(signal: SIGUSR2) { _ in seen.open() }
        try thread.loop.add(source, to: .default)
        kill(getpid(), SIGUSR2)
        precondition(seen.wait(), "SIGUSR2 never reached its source")
        thread.loop.remove(source, from: .default)
        // Raised on this thread, unblocked here: the kernel delivers it before raise()
        // returns, so its default action ends the process before the next line.
        var usr2 = sigset_t()
        sigemptyset(&usr2)
        sigaddset(&usr2, SIGUSR2)
        pthread_sigmask(SIG_UNBLOCK, &usr2, nil)
        raise(SIGUSR2)
        preconditionFailure("SIGUSR2 did not take its default action")
      }
    }

    @Test("83. A loop torn down with its signal source in a mode puts the disposition back")
    func test_83_teardownRestores() throws {
      let signal = realtime(8)
      let source = try SignalSource(signal: signal) { _ in }
      try onLoopThread { loop in try loop.add(source, to: .default) }
      #expect(!source.isValid)
      #expect(disposition(signal) == .standard)
    }

    @Test(
      "83. Sharing a signal with Dispatch: its handler, found first, is chained and put back; one installed later is left alone"
    )
    func test_83_sharedWithDispatch() async {
      await #expect(processExitsWith: .success) {
        // Dispatch first: its handler is chained, so Dispatch still sees the signal. (Which
        // of the two counts a given delivery is a race: Dispatch's signalfd can take a
        // pending signal before any handler runs. The docs say so.)
        let dispatchSaw = Gate()
        let first = DispatchSource.makeSignalSource(signal: SIGUSR1, queue: .global())
        first.setEventHandler { dispatchSaw.open() }
        first.resume()
        // Dispatch installs its handler on its own thread, a little after resume().
        precondition(waitUntil { crl_signal_disposition(SIGUSR1) == 2 }, "no Dispatch handler")
        let thread = try ResidentThread(name: "sig-dispatch")
        let source = try SignalSource(signal: SIGUSR1) { _ in }
        try thread.loop.add(source, to: .default)
        precondition(crl_signal_disposition(SIGUSR1) == 3)
        kill(getpid(), SIGUSR1)
        precondition(dispatchSaw.wait(), "Dispatch's source never saw the signal")
        source.invalidate()
        precondition(crl_signal_disposition(SIGUSR1) == 2, "Dispatch's handler was not put back")
        // Dispatch second: it takes the disposition over, and the last source leaves it alone.
        let late = try SignalSource(signal: SIGUSR2) { _ in }
        try thread.loop.add(late, to: .default)
        let second = DispatchSource.makeSignalSource(signal: SIGUSR2, queue: .global())
        second.setEventHandler {}
        second.resume()
        precondition(waitUntil { crl_signal_disposition(SIGUSR2) == 2 }, "no Dispatch handler")
        late.invalidate()
        precondition(crl_signal_disposition(SIGUSR2) == 2, "Dispatch's handler was replaced")
      }
    }

    @Test(
      "84. SIGKILL, SIGSTOP, the synchronous faults and numbers that are no signal are refused with an error naming them"
    )
    func test_84_refused() {
      let cases: [(Int32, String)] = [
        (SIGKILL, "SIGKILL"), (SIGSTOP, "SIGSTOP"), (SIGSEGV, "SIGSEGV"), (SIGBUS, "SIGBUS"),
        (SIGFPE, "SIGFPE"), (SIGILL, "SIGILL"), (0, "0"), (32, "32"), (65, "65"),
      ]
      for (signal, name) in cases {
        do {
          _ = try SignalSource(signal: signal) { _ in }
          Issue.record("signal \(signal) was accepted")
        } catch {
          #expect("\(error)".contains(name), "\(error)")
          #expect(disposition(signal) != .ours)
        }
      }
      #expect(SignalSource.name(of: SIGTERM) == "SIGTERM")
      #expect(SignalSource.name(of: realtime(3)) == "SIGRTMIN+3")
    }
  }
}

/// Deliveries seen by a plain C-convention handler installed before any source.
private let chainedDeliveries = Atomic<Int>(0)

extension RunLoopKitTests.SignalSources {
  @Test("83. A handler installed before the first source keeps being called after the count")
  func test_83_chainsToEarlierHandler() async {
    await #expect(processExitsWith: .success) {
      _ = chainedDeliveries.load(ordering: .relaxed)  // initialised before any delivery
      signal(SIGUSR2) { _ in chainedDeliveries.add(1, ordering: .relaxed) }
      let thread = try ResidentThread(name: "sig-chained")
      let counted = Counter()
      let source = try SignalSource(signal: SIGUSR2) { count in
        for _ in 0..<count { counted.increment() }
      }
      try thread.loop.add(source, to: .default)
      for sent in 1...3 {
        kill(getpid(), SIGUSR2)
        precondition(waitUntil { counted.value == sent }, "the source missed delivery \(sent)")
        precondition(waitUntil { chainedDeliveries.load(ordering: .relaxed) == sent })
      }
      source.invalidate()
      precondition(crl_signal_disposition(SIGUSR2) == 2, "the earlier handler was not put back")
      kill(getpid(), SIGUSR2)
      precondition(waitUntil { chainedDeliveries.load(ordering: .relaxed) == 4 })
      precondition(counted.value == 3)
    }
  }

  @Test(
    "82. While a signal has a source, the library's catcher thread leaves it unblocked and hands what it receives to the source; removing the source blocks it there before returning, and the last one ends the thread (in a child)"
  )
  func test_82_catcherKeepsWatchedSignalsDeliverable() async {
    await #expect(processExitsWith: .success) {
      let thread = try ResidentThread(name: "sig-catch")
      let seen = Counter()
      let source = try SignalSource(signal: SIGUSR1) { count in
        for _ in 0..<count { seen.increment() }
      }
      try thread.loop.add(source, to: .default)
      // The catcher leaves exactly the watched signals unblocked.
      precondition(waitUntil { threadsNotBlocking(SIGUSR1).contains("rlk-signals") })
      precondition(!threadsNotBlocking(SIGUSR2).contains("rlk-signals"))
      // Sent to the catcher itself, where the kernel sends a process-directed signal that
      // every other thread blocks (runloop-demo signals shows that case end to end): the
      // source sees it.
      let catcher = crl_signal_catcher_thread_id()
      precondition(catcher > 0 && crl_thread_kill(catcher, SIGUSR1) == 0)
      precondition(waitUntil { seen.value == 1 }, "SIGUSR1 on the catcher never reached the source")
      source.invalidate()
      // Once no source watches it, the catcher blocks it again, before invalidate() returns.
      precondition(!threadsNotBlocking(SIGUSR1).contains("rlk-signals"))
      // With no signal watched at all, the catcher is gone (joined before invalidate()
      // returned), and a new source starts another that works as the first did.
      precondition(crl_signal_catcher_thread_id() == 0)
      precondition(!threadNames().contains("rlk-signals"), "\(threadNames())")
      let again = try SignalSource(signal: SIGUSR2) { count in
        for _ in 0..<count { seen.increment() }
      }
      try thread.loop.add(again, to: .default)
      precondition(threadsNotBlocking(SIGUSR2).contains("rlk-signals"))
      let second = crl_signal_catcher_thread_id()
      precondition(second > 0 && crl_thread_kill(second, SIGUSR2) == 0)
      precondition(waitUntil { seen.value == 2 }, "SIGUSR2 on the new catcher never arrived")
      again.invalidate()
      precondition(crl_signal_catcher_thread_id() == 0)
    }
  }
}

/// The names of this process's threads, from /proc.
private func threadNames() -> [String] {
  let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
  return tasks.compactMap { task in
    (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
      .trimmingCharacters(in: .whitespacesAndNewlines)
  }.sorted()
}

/// The names of this process's threads whose blocked mask lacks `signal`, from /proc.
private func threadsNotBlocking(_ signal: Int32) -> [String] {
  let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
  return tasks.compactMap { task -> String? in
    guard
      let status = try? String(contentsOfFile: "/proc/self/task/\(task)/status", encoding: .utf8)
    else { return nil }
    var name = ""
    var blocked: UInt64 = 0
    for line in status.split(separator: "\n") {
      if line.hasPrefix("Name:") { name = line.dropFirst(5).trimmingCharacters(in: .whitespaces) }
      if line.hasPrefix("SigBlk:") {
        blocked = UInt64(line.dropFirst(7).trimmingCharacters(in: .whitespaces), radix: 16) ?? 0
      }
    }
    return blocked & (UInt64(1) << UInt64(signal - 1)) == 0 ? name : nil
  }.sorted()
}

/// Whether `signal` is pending for the process or for any of its threads, from /proc.
private func isPending(_ signal: Int32) -> Bool {
  let bit = UInt64(1) << UInt64(signal - 1)
  func mask(_ path: String, _ field: String) -> UInt64 {
    guard let status = try? String(contentsOfFile: path, encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix(field) {
      return UInt64(line.dropFirst(field.count).trimmingCharacters(in: .whitespaces), radix: 16)
        ?? 0
    }
    return 0
  }
  if mask("/proc/self/status", "ShdPnd:") & bit != 0 { return true }
  let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
  return tasks.contains { mask("/proc/self/task/\($0)/status", "SigPnd:") & bit != 0 }
}

extension RunLoopKitTests.SignalSources {
  @Test(
    "82. A delivery whose handler call races the source's invalidation on another thread reads no closed eventfd and calls nothing"
  )
  func test_82_deliveryRacingInvalidation() throws {
    let signal = realtime(9)
    let thread = try ResidentThread(name: "sig-race")
    let called = Counter()
    let source = try SignalSource(signal: signal) { _ in called.increment() }
    let (arrived, release) = holdAt(.signalDeliveryStarting, for: source.source)
    try thread.loop.add(source, to: .default)
    kill(getpid(), signal)
    #expect(arrived.wait())
    source.invalidate()  // closes the eventfd while the delivery is held
    #expect(crl_signal_disposition(signal) == 0)
    release.open()
    try thread.performAndWait {}
    #expect(called.value == 0)
    #expect(!source.isValid)
  }
}
