import RunLoopKit

/// `observers`: an observer of every activity, told about a few iterations in order.
public enum ObserversDemo {
  public static func run() throws -> (report: DemoReport, told: [String]) {
    var report = DemoReport(name: "observers", title: "every activity of a few iterations")
    let thread = DemoThread(name: "observed") { () throws -> (LoopTracer.Snapshot, [String]) in
      let loop = Loop.current
      let told = Locked<[String]>([])
      let observer = LoopObserver(activities: .all) { _, activity in
        told.withLock { $0.append("\(activity)") }
      }
      try loop.add(observer, to: .default)
      defer { observer.invalidate() }
      let fires = Locked(0)
      let tick = try LoopTimer(
        label: "tick", after: .milliseconds(15), repeating: .milliseconds(15)
      ) {
        timer in
        if fires.withLock({
          $0 += 1
          return $0
        }) == 2 {
          timer.invalidate()
        }
      }
      try loop.add(tick, to: .default)
      try loop.perform {}
      let tracer = LoopTracer()
      try tracer.attach(to: loop)
      loop.run(in: .default, for: .seconds(5))
      tracer.detach()
      return (tracer.snapshot(), told.value)
    }
    let (trace, told) = try thread.join()
    let passes = trace.events.filter { $0.kind == .activity(.beforeTimers) }.count
    report.steps.append(
      DemoStep(
        caption: "A run with a queued block and a timer that fires twice, then invalidates itself",
        trace: trace,
        notes: [
          "The observer was told \(told.count) times, in this order: "
            + told.joined(separator: ", ") + ".",
          "\(passes) passes. Each starts with beforeTimers and beforeSources; a pass only says "
            + "beforeWaiting/afterWaiting when it is about to sleep (the first one had run a "
            + "block and still slept, because blocks are not sources).",
          "When the timer invalidated itself the mode had nothing left (observers do not keep a "
            + "mode alive), so the run ended with .finished.",
        ]))
    report.explanation = """
      Observers are how CFRunLoop lets you watch an iteration: entry when a run begins, \
      beforeTimers and beforeSources at the top of every pass, beforeWaiting just before the \
      thread blocks and afterWaiting just after it wakes, exit when the run returns. UIKit uses \
      beforeWaiting to draw and autorelease pools hang off entry and exit. Note what observers \
      cannot see: the wait itself and what ended it, or which timer or source ran; the \
      tracer's lines without an activity are those.
      """
    return (report, told)
  }
}
