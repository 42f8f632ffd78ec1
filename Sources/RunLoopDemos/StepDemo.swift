import RunLoopKit

/// `step`: one loop stepped pass by pass on a `VirtualLoop`, with a timer, a manual source,
/// an observer and blocks, each pass printed as it happened. Virtual time: the same output on
/// every run, and no waiting.
public enum StepDemo {
  // Longer than ~60 lines on purpose: a scenario is a script the demo prints step by
  // step, and it reads best top to bottom, in the order the steps appear in its output.
  public static func run() throws -> DemoReport {
    var report = DemoReport(name: "step", title: "one pass at a time, in virtual time")
    let virtual = VirtualLoop()
    let loop = virtual.loop
    var told: [String] = []
    let captions = [
      "A block is queued and a 100 ms timer armed; the pass runs the block, then sleeps",
      "The timer signalled the \"button\" source, which does not wake a loop: this pass runs it",
      "Nothing is ready: the pass sleeps until the timer's next grid point",
      "The timer invalidated itself; the source keeps the mode alive, and nothing is left to do",
    ]
    try virtual.asCurrent {
      let view = loop.assumeIsolated()
      try view.addObserver([.beforeWaiting, .afterWaiting]) { _, activity in
        told.append("\(activity)")
      }
      let button = try view.addManualSource(label: "button") {
        try? Loop.current.assumeIsolated().perform {}  // a reply, run in the same pass
      }
      var ticks = 0
      try view.addTimer(label: "tick", after: .milliseconds(100), repeating: .milliseconds(100)) {
        timer in
        ticks += 1
        if ticks == 1 { button.signal() }  // signalled, not woken: see pass 2
        if ticks == 2 { timer.invalidate() }
      }
      try view.perform {}
    }
    for caption in captions {
      told = []
      let pass = virtual.step()
      var notes = [
        "The clock went from \(LoopTracer.format(offset(pass.start))) to "
          + "\(LoopTracer.format(offset(pass.end))); the run returned .\(pass.result)."
      ]
      if let causes = pass.wokenBy {
        notes.append(
          "It slept until woken by \(causes.map(\.description).joined(separator: ", ")); "
            + "the observer was told \(told.joined(separator: " and ")).")
      } else if pass.callouts.isEmpty {
        notes.append("No timer lay ahead to sleep until, so it only looked and returned.")
      } else {
        notes.append("A source was handled, so the pass only looked at the kernel: no sleep.")
      }
      // The pass's events count from where the virtual clock began, as its tracer's did; the
      // export names a virtual loop's track itself.
      let trace = LoopTracer.Snapshot(origin: VirtualLoop.defaultStart, events: pass.events)
      report.steps.append(DemoStep(caption: caption, trace: trace, notes: notes))
    }
    report.explanation = """
      Each step() is one pass of the real loop code in CFRunLoop's order — beforeTimers, \
      beforeSources, queued blocks, signalled sources, then the wait, then timers, descriptors \
      and blocks again — run in a VirtualLoop whose clock moves only when the loop would sleep. \
      Pass 1 shows that blocks are not sources: after running one, the loop still sleeps. Pass \
      2 shows the CF rule that a signalled manual source (source0) does not wake the loop: the \
      timer signalled it during pass 1, and it ran only on the next pass, which then did not \
      sleep because a source was handled. The times are virtual, so this output is the same on \
      every run: run it again and compare.
      """
    return report
  }

  private static func offset(_ instant: LoopClock.Instant) -> Duration {
    VirtualLoop.defaultStart.duration(to: instant)
  }
}
