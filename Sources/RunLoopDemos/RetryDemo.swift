import RunLoopKit

/// `retry`: a client that gives each attempt 30 s and backs off 1, 2, 4 … 64 s between
/// attempts, run as async code in virtual time with `VirtualLoop.runTask`. The server answers
/// only the eighth attempt, after 5 s: 342 simulated seconds, the same output on every run,
/// and no waiting.
public enum RetryDemo {
  /// The server: silent for seven attempts, then a reply after 5 s.
  static func replyDelay(attempt: Int) -> Duration? { attempt < 8 ? nil : .seconds(5) }

  struct TimedOut: Error {}

  public static func run() throws -> DemoReport {
    var report = DemoReport(
      name: "retry", title: "a client's timeouts and backoff, in virtual time")
    let virtual = VirtualLoop()
    let tracer = LoopTracer(capacity: 4096)
    try tracer.attach(to: virtual.loop)
    let attempts = try virtual.runTask { () -> [Duration] in
      let loop = Loop.current
      var attempts: [Duration] = []
      var backoff = Duration.seconds(1)
      while true {
        attempts.append(VirtualLoop.defaultStart.duration(to: loop.now))
        do {
          try await attempt(attempts.count, on: loop)
          return attempts
        } catch is TimedOut {
          try await loop.sleep(for: backoff)
          backoff = min(backoff * 2, .seconds(64))
        }
      }
    }
    tracer.detach()
    let trace = tracer.snapshot()
    var step = DemoStep(
      caption: "runTask runs the client as a task on the virtual loop; the clock moves to each "
        + "timer when nothing else is ready",
      trace: trace,
      notes: [
        "Attempts began at "
          + attempts.map { LoopTracer.format($0) }.joined(separator: ", ") + ".",
        "Seven 30 s timeouts and seven backoffs (1 … 64 s), then a reply 5 s into attempt 8: "
          + "the clock ends at \(LoopTracer.format(VirtualLoop.defaultStart.duration(to: virtual.now))).",
      ])
    step.shown = trace.events.filter {
      if case .timer = $0.kind { true } else { false }
    }
    step.filterNote = "the timer callouts: timeouts, backoff sleeps, the reply"
    report.steps.append(step)
    report.explanation = """
      The task prefers the virtual loop's executor, so its code runs on the loop that runTask \
      drives. runTask runs whatever is ready; when nothing is, the task is waiting for a timer \
      (a timeout armed with a view's addTimer, a loop.sleep), and runTask moves the clock to \
      the first one, as a loop of a thread would sleep until it. Nothing ever races the clock: \
      by the time it moves, the task has done everything it could do before then. The times \
      are virtual, so this output is the same on every run, and a task that waited for \
      something that can never come would end runTask with VirtualLoop.TaskStalled instead of \
      hanging.
      """
    return report
  }

  /// One attempt: a 30 s timeout and, when the server answers, its reply, both timers of the
  /// loop; whichever fires first ends the attempt and cancels the other.
  private static func attempt(_ number: Int, on loop: Loop) async throws {
    try await withUnsafeThrowingContinuation {
      (continuation: UnsafeContinuation<Void, any Error>) in
      arm(number, on: loop, continuation)
    }
  }

  /// Synchronous, so it may take the loop's view (the continuation's body runs on the loop).
  private static func arm(
    _ number: Int, on loop: Loop, _ continuation: UnsafeContinuation<Void, any Error>
  ) {
    var done = false
    do {
      let view = loop.assumeIsolated()
      let timeout = try view.addTimer(label: "timeout of attempt \(number)", after: .seconds(30)) {
        _ in
        guard !done else { return }
        done = true
        continuation.resume(throwing: TimedOut())
      }
      if let delay = replyDelay(attempt: number) {
        try view.addTimer(label: "reply to attempt \(number)", after: delay) { _ in
          guard !done else { return }
          done = true
          timeout.invalidate()
          continuation.resume()
        }
      }
    } catch {
      continuation.resume(throwing: error)
    }
  }
}
