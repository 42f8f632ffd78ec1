import Dispatch
import Glibc
import RunLoopKit

/// Runs `loop` in `mode` with a tracer attached and returns its snapshot; for the scenarios on
/// `Loop.main`. `start` runs on a Dispatch worker once the loop sleeps, so what it posts or
/// sends shows up as what woke the loop (with `startWhenAsleep` false, nothing is started).
func tracedRun(
  _ loop: Loop, mode: Loop.Mode = .default, expect: Loop.RunResult = .stopped,
  for duration: Duration = .seconds(5), startWhenAsleep: Bool = true,
  start: @escaping @Sendable () -> Void
) throws -> LoopTracer.Snapshot {
  let tracer = LoopTracer()
  try tracer.attach(to: loop)
  if startWhenAsleep {
    DispatchQueue.global().async {
      while !loop.isWaiting { usleep(100) }
      start()
    }
  }
  let result = loop.run(in: mode, for: duration)
  tracer.detach()
  guard result == expect else {
    throw DemoError("Loop.main's run in \(mode) returned \(result), not \(expect)")
  }
  return tracer.snapshot()
}

extension LoopTracer.Snapshot {
  /// What ended the snapshot's sleeps, in order (see the events' `wakeCausesText`).
  var wakeCausesText: String { events.wakeCausesText }
}

extension [LoopTracer.Event] {
  /// What ended the sleeps of these events, in order: "main queue", "timer", …
  var wakeCausesText: String {
    let causes = flatMap { event -> [LoopTracer.WakeCause] in
      if case .slept(let causes) = event.kind { return causes }
      return []
    }
    return causes.isEmpty
      ? "nothing (it never slept)" : causes.map(\.description).joined(separator: ", then ")
  }
}
