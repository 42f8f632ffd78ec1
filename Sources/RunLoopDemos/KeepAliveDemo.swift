import RunLoopKit
import Synchronization

/// `keepalive`: a thread whose loop has no input source exits at once; with one it stays;
/// a `RunLoop.run()`-style loop cannot be stopped, the flag-plus-`run(in:until:)` loop can.
public enum KeepAliveDemo {
  public static func run() throws -> DemoReport {
    var report = DemoReport(name: "keepalive", title: "keeping a thread alive, and stopping it")
    report.steps.append(try emptyLoop())
    report.steps += try portKeepsItAlive()
    report.explanation = """
      A run loop sleeps until one of its mode's sources, timers or blocks gives it a reason to \
      wake. With none of them, nothing could ever wake it, so run returns .finished at once \
      and a thread that was meant to wait for work simply ends. Adding an input source (here a \
      LoopPort, the stand-in for the NSMachPort people add to an NSThread) keeps the mode \
      alive, and the thread sleeps in epoll_wait until a message comes. Stopping is the second \
      half of the lesson: stop() ends only the innermost run call. Foundation's RunLoop.run() \
      calls run(mode:before:) again every time one returns, so it cannot be stopped and its \
      thread never exits. The loop that can be stopped runs one run(in:until:) at a time and \
      checks a flag between them; whoever wants it gone sets the flag on the thread and calls \
      stop(). (This library's Loop.run() follows CFRunLoopRun and does return on stop(); \
      ResidentThread packages the whole pattern, draining posted work before it exits.)
      """
    return report
  }

  /// Step 1: nothing in the default mode.
  static func emptyLoop() throws -> DemoStep {
    let thread = DemoThread(name: "empty") { () throws -> (LoopTracer, Loop.RunResult, Duration) in
      let loop = Loop.current
      let tracer = LoopTracer()
      try tracer.attach(to: loop)
      let started = LoopClock.Instant.now
      let result = loop.run(in: .default, for: .seconds(2))
      let took = started.duration(to: .now)
      tracer.detach()
      return (tracer, result, took)
    }
    let (tracer, result, took) = try thread.join()
    return DemoStep(
      caption: "A new thread runs its loop for up to 2 s with nothing in the default mode",
      trace: tracer.snapshot(),
      notes: [
        "run(in: .default, for: 2 s) returned .\(result) after \(LoopTracer.format(took)), "
          + "without even an entry: the thread's work is over and it exits."
      ])
  }

  /// Steps 2–4: one thread with a port, run three ways.
  // Longer than ~60 lines on purpose: a scenario is a script the demo prints step by
  // step, and it reads best top to bottom, in the order the steps appear in its output.
  static func portKeepsItAlive() throws -> [DemoStep] {
    let loopBox = Locked<Loop?>(nil)
    let round = Atomic<Int>(0)
    let handled = Atomic<Int>(0)
    let shouldExit = Atomic<Bool>(false)
    let port = try LoopPort<String>(label: "work") { _ in
      handled.add(1, ordering: .relaxed)
    }
    let worker = DemoThread(name: "worker") { () throws -> [LoopTracer] in
      let loop = Loop.current
      try loop.add(port, to: .default)
      defer { port.invalidate() }
      loopBox.value = loop
      var tracers: [LoopTracer] = []

      // Step 2: the port keeps the mode alive; the run sleeps until messages come.
      tracers.append(LoopTracer())
      try tracers[0].attach(to: loop)
      round.store(1, ordering: .releasing)
      loop.run(in: .default, until: .now.advanced(by: .seconds(10)))
      tracers[0].detach()

      // Step 3: Foundation's RunLoop.run() is `while run(mode: .default, before: .distantFuture)
      // {}`; stop() ends one call and the next begins. Capped at three rounds so the demo ends.
      tracers.append(LoopTracer())
      try tracers[1].attach(to: loop)
      // (The flag is set early only when the demo fails, so the worker can end.)
      for _ in 0..<3 where !shouldExit.load(ordering: .acquiring) {
        round.add(1, ordering: .releasing)
        loop.run(in: .default, until: .now.advanced(by: .seconds(10)))
      }
      tracers[1].detach()

      // Step 4: the loop that can be stopped: a flag checked between runs.
      tracers.append(LoopTracer())
      try tracers[2].attach(to: loop)
      while !shouldExit.load(ordering: .acquiring) {
        round.add(1, ordering: .releasing)
        if loop.run(in: .default, until: .now.advanced(by: .seconds(10))) == .finished { break }
      }
      tracers[2].detach()
      return tracers
    }

    // If a step below fails, let the worker's loops end (each run has a 10 s deadline).
    var finished = false
    defer {
      if !finished {
        shouldExit.store(true, ordering: .releasing)
        loopBox.value?.stop()
      }
    }
    try waitFor("the worker's loop") { loopBox.value != nil }
    let loop = loopBox.value!
    func waitUntilAsleep(inRound wanted: Int) throws {
      try waitFor("round \(wanted) to sleep") {
        round.load(ordering: .acquiring) == wanted && loop.isWaiting
      }
    }
    // Step 2: two messages, then stop().
    try waitUntilAsleep(inRound: 1)
    for message in 1...2 {
      try waitFor("the worker to sleep") { loop.isWaiting }
      try port.send("job \(message)")
      try waitFor("job \(message) to be handled") {
        handled.load(ordering: .relaxed) == message && loop.isWaiting
      }
    }
    loop.stop()
    // Step 3: three stops, and the loop is entered again after each.
    for wanted in 2...4 {
      try waitUntilAsleep(inRound: wanted)
      loop.stop()
    }
    // Step 4: set the flag on the thread, then stop the run in progress.
    try waitUntilAsleep(inRound: 5)
    try loop.perform {
      shouldExit.store(true, ordering: .releasing)
      Loop.current.stop()
    }
    finished = true
    let tracers = try worker.join()
    return [
      DemoStep(
        caption: "The same kind of thread with a LoopPort in its default mode: it stays, and "
          + "sleeps until messages come; then another thread calls stop()",
        trace: tracers[0].snapshot(),
        notes: [
          "Two messages each woke the loop from epoll_wait through the port's eventfd; between "
            + "them the thread slept, using no CPU.",
          "stop() from another thread ended the run with .stopped.",
        ]),
      DemoStep(
        caption:
          "RunLoop.run()-style: `while true { loop.run(in: .default, until: .distantFuture) }`"
          + " (capped at 3 rounds here), stopped 3 times",
        trace: tracers[1].snapshot(),
        notes: [
          "Each stop() ended one run with .stopped, and the loop around it entered the mode "
            + "again at once: this thread would never exit."
        ]),
      DemoStep(
        caption: "The stoppable loop: `while !shouldExit { loop.run(in: .default, until: …) }`; "
          + "a block sets the flag on the thread, then calls stop()",
        trace: tracers[2].snapshot(),
        notes: [
          "The run returned .stopped, the loop saw the flag, and the thread finished."
        ]),
    ]
  }
}
