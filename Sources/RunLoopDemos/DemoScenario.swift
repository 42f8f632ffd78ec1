/// A scenario of `runloop-demo`, by name.
public struct DemoScenario: Sendable {
  public let name: String
  public let summary: String
  public let run: @Sendable () throws -> DemoReport
  /// Runs `Loop.main`, so only on the main thread (the demo's `main` runs there).
  public let needsMainThread: Bool

  init(
    name: String, summary: String, needsMainThread: Bool = false,
    run: @escaping @Sendable () throws -> DemoReport
  ) {
    self.name = name
    self.summary = summary
    self.needsMainThread = needsMainThread
    self.run = run
  }

  /// Every scenario, in the order the demo lists them.
  public static let all: [DemoScenario] = [
    DemoScenario(
      name: "keepalive",
      summary: "a thread without an input source exits at once; which loops can be stopped",
      run: KeepAliveDemo.run),
    DemoScenario(
      name: "modes",
      summary: "a default-mode timer stops while \"tracking\" runs, until it is added to .common",
      run: ModesDemo.run),
    DemoScenario(
      name: "observers", summary: "every activity of a few iterations, in order",
      run: { try ObserversDemo.run().report }),
    DemoScenario(
      name: "step",
      summary: "one loop stepped pass by pass in virtual time: the same output on every run",
      run: StepDemo.run),
    DemoScenario(
      name: "retry",
      summary: "a client's 30 s timeouts and 1-64 s backoff, as async code in virtual time",
      run: RetryDemo.run),
    DemoScenario(
      name: "sources",
      summary: "a signalled manual source waits; a descriptor source wakes the loop",
      run: SourcesDemo.run),
    DemoScenario(
      name: "search",
      summary: "search as you type on one resident thread: stale queries are dropped mid-search",
      run: { try SearchDemo.run().report }),
    DemoScenario(
      name: "network",
      summary: "a resident network thread serving a loopback TCP echo through descriptor sources",
      run: { try NetworkDemo.run().report }),
    DemoScenario(
      name: "concurrency",
      summary: "a @MainActor hop, a Task.sleep and a DispatchQueue.main block wake Loop.main",
      needsMainThread: true, run: ConcurrencyDemo.run),
    DemoScenario(
      name: "signals",
      summary: "a daemon on Loop.main: SIGUSR1 reloads, a child watched to its exit, SIGTERM stops",
      needsMainThread: true, run: SignalsDemo.run),
  ]

  public static func named(_ name: String) -> DemoScenario? { all.first { $0.name == name } }
}
