import RunLoopKit

/// `modes`: a timer in the default mode stops firing while the loop runs a "tracking" mode,
/// and fires there too once it is added to the common modes — the scrolling-list question.
public enum ModesDemo {
  public static let tracking = Loop.Mode("tracking")

  // Longer than ~60 lines on purpose: a scenario is a script the demo prints step by
  // step, and it reads best top to bottom, in the order the steps appear in its output.
  public static func run() throws -> DemoReport {
    var report = DemoReport(name: "modes", title: "a timer that stops while you scroll")
    let thread = DemoThread(name: "ui") { () throws -> [DemoStep] in
      let loop = Loop.current
      // Like UITrackingRunLoopMode, "tracking" is one of the common modes.
      try loop.addCommonMode(tracking)
      let clock = try LoopTimer(
        label: "clock", after: .milliseconds(20), repeating: .milliseconds(20)
      ) {
        _ in
      }
      try loop.add(clock, to: .default)
      // While a finger is down the loop runs "tracking", fed by its own touch events.
      let touches = try LoopTimer(
        label: "touch", after: .milliseconds(15), repeating: .milliseconds(30)
      ) { _ in }
      try loop.add(touches, to: tracking)
      defer {
        clock.invalidate()
        touches.invalidate()
      }

      func traced(_ mode: Loop.Mode) throws -> LoopTracer.Snapshot {
        let tracer = LoopTracer()
        try tracer.attach(to: loop)
        loop.run(in: mode, for: .milliseconds(110))
        tracer.detach()
        return tracer.snapshot()
      }
      let idle = try traced(.default)
      let scrolling = try traced(tracking)
      try loop.add(clock, to: .common)
      let scrollingCommon = try traced(tracking)
      return [
        DemoStep(
          caption: "Nobody touches the screen: the loop runs the default mode for 110 ms",
          trace: idle,
          notes: [
            "\"clock\" (every 20 ms, in default) fired \(idle.events.fires(of: "clock")) times."
          ]),
        DemoStep(
          caption: "A finger scrolls the list: the loop runs \"tracking\" for 110 ms",
          trace: scrolling,
          notes: [
            "\"clock\" fired \(scrolling.events.fires(of: "clock")) times: it is only in the "
              + "default mode, and the loop is not running that mode; \"touch\" fired "
              + "\(scrolling.events.fires(of: "touch")) times."
          ]),
        DemoStep(
          caption: "After loop.add(clock, to: .common), scrolling again for 110 ms",
          trace: scrollingCommon,
          notes: [
            "\"clock\" fired \(scrollingCommon.events.fires(of: "clock")) times in \"tracking\": "
              + ".common means every mode in the common set, and \"tracking\" is one.",
            "Its first fire there was late (the dates it missed while scrolling are not made "
              + "up): a repeating timer that falls behind fires once and rejoins its grid.",
          ]),
      ]
    }
    report.steps = try thread.join()
    report.explanation = """
      A loop runs one mode at a time, and only that mode's sources and timers can fire. An app \
      runs the default mode when idle and a tracking mode while the user drags, so that only \
      the work meant for dragging competes with it; a timer scheduled in the default mode \
      simply waits, and its missed fires are skipped rather than queued. To keep a timer \
      running in both, add it to .common: the item goes into every mode in the loop's \
      common-mode set (default plus whatever addCommonMode put there), including modes added \
      to the set later. That is the whole answer to "why does my timer stop while I scroll".
      """
    return report
  }
}
