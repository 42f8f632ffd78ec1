import RunLoopKit

/// `search`: search-as-you-type on one resident thread. Keystrokes arrive through a port; a
/// debouncer starts a search once the keys have been quiet for a moment, and the search runs
/// in slices, one per pass of the loop, so a newer key is noticed between slices and the
/// stale search is dropped.
public enum SearchDemo {
  /// Names matched per slice, i.e. per pass of the loop.
  public static let sliceSize = 2_500
  public static let resultLimit = 5
  /// How long the keys must be quiet before a search starts.
  public static let debounceDelay: Duration = .milliseconds(40)

  /// What became of one typed query.
  public enum Fate: Sendable, Equatable {
    /// The search ran to the end.
    case completed(best: [SearchMatch], matches: Int, slices: Int)
    /// A newer key came while it ran; the search stopped after this many slices.
    case superseded(afterSlices: Int, by: String)
    /// A newer key came within the debounce delay: the search never started.
    case debounced(by: String)
  }

  /// Something that happened on the search thread, stamped there when it happened.
  public struct Event: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
      /// The port handler received this query (the debouncer was re-armed).
      case keystroke(String)
      /// The debouncer started the search for this query.
      case started(String)
      /// What became of this query.
      case finished(String, Fate)
    }
    public let kind: Kind
    public let instant: LoopClock.Instant
  }

  public struct Outcome: Sendable {
    public let report: DemoReport
    /// Every typed query, in order, with what became of it.
    public let fates: [(query: String, fate: Fate)]
    /// Keystrokes, starts and fates in the order the search thread saw them.
    public let log: [Event]
    /// Callbacks of the search that ran anywhere but on the resident thread (should be 0).
    public let callbacksOffThread: Int
    /// Slices of the whole corpus: the number a search needs to complete.
    public let slicesPerSearch: Int
  }

  // Longer than ~60 lines on purpose: a scenario is a script the demo prints step by
  // step, and it reads best top to bottom, in the order the steps appear in its output.
  /// Types `bursts` one after another: the keys of a burst back to back, and the next burst
  /// once the search for the text so far has started.
  public static func run(typing bursts: [String] = ["run", "loop"]) throws -> Outcome {
    let text = bursts.joined()
    let thread = try ResidentThread(name: "search")
    defer {
      thread.stop()
      try? thread.join()
    }
    _ = FuzzyMatcher.corpus.count  // built once, before anything is timed
    let tracer = LoopTracer()
    try tracer.attach(to: thread.loop)
    let report = SearchReport(tracer: tracer)
    // The search and its results live on the search thread: a plain class, neither Sendable
    // nor locked, made there and kept in the thread's storage, where the demo's later blocks
    // find it. Nothing but the port and Sendable copies ever comes back to this thread.
    let keystrokes = try thread.performAndWait { () throws -> LoopPort<String> in
      let session = SearchSession(report: report, view: thread.assumeIsolated())
      thread.storage[SearchSession.key] = session
      return try session.start()
    }
    defer {
      // On the search thread: invalidating the port releases its handler, and closing the
      // session invalidates the matcher and cancels a pending debounce, releasing theirs.
      try? thread.performAndWait {
        thread.storage[SearchSession.key]?.close()
        thread.storage[SearchSession.key] = nil
      }
    }

    // The typist: the keys of a burst go in back to back, well within the debounce delay,
    // then the user pauses until the search for what was typed so far has started.
    var typed: [String] = []
    try waitFor("the search thread to sleep") { thread.loop.isWaiting }
    for (number, burst) in bursts.enumerated() {
      for key in burst {
        let query = (typed.last ?? "") + String(key)
        typed.append(query)
        report.note("keystroke \"\(key)\": query \"\(query)\" sent to the port")
        try keystrokes.send(query)
      }
      guard number < bursts.count - 1, let query = typed.last else { continue }
      try waitFor("the search for \"\(query)\" to start") { report.hasStarted(query) }
    }
    try waitFor("the search for \"\(text)\" to complete") { report.fate(of: text) != nil }
    // Detached from the loop's own thread, after the last slice's callout has been recorded.
    // The results are asked of the thread that holds them; only Sendable matches come back.
    let stored = try thread.performAndWait {
      tracer.detach()
      return thread.storage[SearchSession.key]?.results[text] ?? []
    }
    let trace = tracer.snapshot()
    let events = trace.events

    let fates = try typed.map { query in
      guard let fate = report.fate(of: query) else {
        throw DemoError("the query \"\(query)\" has no fate")
      }
      return (query: query, fate: fate)
    }
    let slicesPerSearch = (FuzzyMatcher.corpus.count + sliceSize - 1) / sliceSize
    var demoReport = DemoReport(
      name: "search", title: "search as you type on one resident thread")
    let quoted = bursts.map { "\"\($0)\"" }.joined(separator: " then ")
    var step = DemoStep(
      caption: "\"\(text)\" typed into a search box as \(quoted); "
        + "\(FuzzyMatcher.corpus.count) names searched in slices of \(sliceSize), one slice per "
        + "pass of the loop",
      trace: trace, notes: report.notes)
    step.shown = events.filter {
      switch $0.kind {
      case .activity, .blocks: false
      default: true
      }
    }
    step.filterNote = "activities and blocks left out"
    if case .completed(let best, let matches, _) = fates.last?.fate {
      step.notes.append(
        "Best \(stored.count) of \(matches) names matching \"\(text)\", "
          + "asked of the search thread, which keeps them:")
      step.notes += stored.map { "    \($0.highlighted)" }
      if stored != best { throw DemoError("the stored results differ from the reported ones") }
    }
    demoReport.steps = [step]
    let delay = "\(Int(debounceDelay / .milliseconds(1))) ms"
    demoReport.explanation = """
      Everything here happened on one thread, in one run loop, with no second worker. The \
      search and its results are a plain class, not Sendable and without a lock: it was made \
      on the search thread and lives there, in the thread's storage, so the demo asks the \
      thread for the results instead of reaching in. It arms its own callbacks through the \
      view thread.assumeIsolated() returns, with closures that capture it: the "matcher" \
      manual source, and a debouncer that re-arms one perform(after: \(delay)) on every key, \
      cancelling the one before. Keystrokes came in through a LoopPort, whose eventfd woke \
      the loop; the port handler marked a search under way stale at once (the user typed, \
      its results are obsolete) and fed the key to the debouncer. Only after \(delay) without \
      a key did the debouncer start a search, so a key followed that soon by another was \
      never searched: the next key debounced it (in the trace, the sleeps of about \(delay) \
      ended by the "perform(after:)" timer). The matcher does one slice of the work and \
      signals itself again, so after every slice the loop finishes its pass, polls the \
      kernel without sleeping, and delivers any keystroke that came in meanwhile: a search \
      that can never finish in time costs at most one slice once it is obsolete. This is how \
      a UI thread stays responsive with long work on its own loop — and why CF sources \
      should do a little at a time.
      """
    return Outcome(
      report: demoReport, fates: fates, log: report.log,
      callbacksOffThread: report.callbacksOffThread, slicesPerSearch: slicesPerSearch)
  }
}

/// Runs an action once its input has been quiet for `delay`: each `input()` cancels the run
/// it armed before and arms a new one. It lives on one loop's thread and arms through that
/// loop's view, so the action is a plain closure that may capture anything there.
final class Debouncer {
  let delay: Duration
  private let view: IsolatedLoop
  private let action: () -> Void
  private var pending: ScheduledBlock?

  init(delay: Duration, view: IsolatedLoop, action: @escaping () -> Void) {
    self.delay = delay
    self.view = view
    self.action = action
  }

  /// More input: the quiet period starts again from now.
  func input() throws(LoopError) {
    pending?.cancel()
    // The block holds the debouncer only until it runs or is cancelled: either releases it.
    pending = try view.perform(after: delay) { [self] in
      pending = nil
      action()
    }
  }

  /// Drops the pending run, if any.
  func cancel() {
    pending?.cancel()
    pending = nil
  }
}

/// The search and its results. A plain class: it lives on the search thread, in its
/// `ThreadStorage`, and only that thread's callbacks touch it, so it needs no lock and no
/// `Sendable` conformance. What the demo shows from outside goes to `report`.
final class SearchSession {
  /// Where the search thread keeps the session between the demo's blocks.
  static let key = ThreadStorageKey<SearchSession>("search session")

  struct Job {
    let query: String
    let bytes: [UInt8]
    var next = 0
    var slices = 0
    var matches = 0
    var best: [SearchMatch] = []
  }

  let report: SearchReport
  let view: IsolatedLoop
  /// The newest query while it waits out the debounce delay; nil once its search started.
  private var waiting: String?
  /// The search under way.
  private var job: Job?
  /// Completed searches: the best matches of each query.
  private(set) var results: [String: [SearchMatch]] = [:]
  /// Set by `start()` and cleared by `close()`, breaking the reference cycle through its
  /// closure.
  private var matcher: ManualSource?
  /// The port keystrokes arrive on, made by `start()` and invalidated by `close()` likewise.
  private var keystrokes: LoopPort<String>?
  /// Weak in the action: the session owns the debouncer, not the other way round.
  private lazy var debouncer = Debouncer(delay: SearchDemo.debounceDelay, view: view) {
    [weak self] in self?.startSearch()
  }

  init(report: SearchReport, view: IsolatedLoop) {
    self.report = report
    self.view = view
  }

  /// Adds the matcher and the keystrokes' port to the loop; returns the port, for the typist.
  func start() throws(LoopError) -> LoopPort<String> {
    matcher = try view.addManualSource(label: "matcher") { [self] in searchOneSlice() }
    let port = try view.addPort(of: String.self, label: "keystrokes") { [self] in receive($0) }
    keystrokes = port
    return port
  }

  /// At the end: cancels a pending debounce and invalidates the matcher and the port, which
  /// releases their closures and the hold they have on this session.
  func close() {
    debouncer.cancel()
    matcher?.invalidate()
    matcher = nil
    keystrokes?.invalidate()
    keystrokes = nil
  }

  /// The port handler: a key makes the search under way obsolete at once, and the query
  /// still waiting out the delay too; the debouncer waits again for the new one.
  func receive(_ query: String) {
    report.checkThread(view.loop)
    report.keystroke(query)
    if let job {
      report.finished(job.query, .superseded(afterSlices: job.slices, by: query))
      self.job = nil
    }
    if let waiting { report.finished(waiting, .debounced(by: query)) }
    waiting = query
    // Refused only once the thread is stopping, when no search is wanted any more.
    try? debouncer.input()
  }

  /// The debouncer's action: the keys have been quiet for the delay; search the newest.
  private func startSearch() {
    report.checkThread(view.loop)
    guard let query = waiting else { return }
    waiting = nil
    job = Job(query: query, bytes: Array(query.lowercased().utf8))
    report.started(query)
    // Signalled from the loop's own thread, so no wake-up is needed: the loop runs its
    // sources before it next sleeps.
    matcher?.signal()
  }

  /// The matcher: search one slice of the current job, if a key has not dropped it.
  func searchOneSlice() {
    report.checkThread(view.loop)
    guard var job else { return }
    let corpus = FuzzyMatcher.corpus
    let end = min(job.next + SearchDemo.sliceSize, corpus.count)
    for entry in corpus[job.next..<end] {
      guard let match = FuzzyMatcher.match(job.bytes, in: entry) else { continue }
      job.matches += 1
      FuzzyMatcher.keepBest(&job.best, adding: match, limit: SearchDemo.resultLimit)
    }
    job.next = end
    job.slices += 1
    guard end == corpus.count else {
      self.job = job
      // More to do: signalled from the loop's own thread, so no wake-up is needed; the loop
      // polls after a pass that handled a source and performs this again on the next one.
      matcher?.signal()
      return
    }
    results[job.query] = job.best
    self.job = nil
    report.finished(
      job.query, .completed(best: job.best, matches: job.matches, slices: job.slices))
  }
}

/// What the demo reports from outside the search thread: notes, and what happened to each
/// query, stamped on the search thread. Sendable through its lock; it holds copies, never
/// the search's own state.
final class SearchReport: Sendable {
  struct State {
    var log: [SearchDemo.Event] = []
    var notes: [String] = []
    var offThread = 0

    /// When the port handler last received `query`.
    func keystroke(_ query: String) -> LoopClock.Instant? {
      log.last { $0.kind == .keystroke(query) }?.instant
    }
  }

  let tracer: LoopTracer
  let state = Locked(State())

  init(tracer: LoopTracer) { self.tracer = tracer }

  func keystroke(_ query: String) {
    let now = LoopClock.Instant.now
    state.withLock { $0.log.append(SearchDemo.Event(kind: .keystroke(query), instant: now)) }
  }

  func started(_ query: String) {
    let now = LoopClock.Instant.now
    state.withLock {
      let quiet = $0.log.last { if case .keystroke = $0.kind { true } else { false } }
        .map { LoopTracer.format($0.instant.duration(to: now)) }
      $0.log.append(SearchDemo.Event(kind: .started(query), instant: now))
      $0.notes.append(
        "\(stamp(tracer, now)): search for \"\(query)\" started, \(quiet ?? "?") after the "
          + "last key")
    }
  }

  func finished(_ query: String, _ fate: SearchDemo.Fate) {
    let now = LoopClock.Instant.now
    state.withLock {
      $0.log.append(SearchDemo.Event(kind: .finished(query, fate), instant: now))
      let stamped = "\(stamp(tracer, now)): search for \"\(query)\""
      switch fate {
      case .completed(_, _, let slices):
        $0.notes.append("\(stamped) completed in \(slices) slices")
      case .superseded(let slices, let newer):
        $0.notes.append(
          "\(stamped) dropped after \(slices) slice\(slices == 1 ? "" : "s"): "
            + "\"\(newer)\" is newer")
      case .debounced(let newer):
        var gap = "?"
        if let from = $0.keystroke(query), let to = $0.keystroke(newer) {
          gap = LoopTracer.format(from.duration(to: to))
        }
        $0.notes.append(
          "\(stamped) never started: \"\(newer)\" came \(gap) later, within the "
            + "debounce delay")
      }
    }
  }

  /// Counts a callback that ran anywhere but on the search thread (there should be none).
  func checkThread(_ loop: Loop) {
    if !loop.isCurrent { state.withLock { $0.offThread += 1 } }
  }

  func note(_ text: String) {
    state.withLock { $0.notes.append("\(stamp(tracer)): \(text)") }
  }

  func hasStarted(_ query: String) -> Bool {
    state.withLock { $0.log.contains { $0.kind == .started(query) } }
  }

  /// The first fate recorded for `query` (a query gets only one).
  func fate(of query: String) -> SearchDemo.Fate? {
    state.withLock {
      $0.log.lazy.compactMap {
        if case .finished(query, let fate) = $0.kind { fate } else { nil }
      }.first
    }
  }

  var log: [SearchDemo.Event] { state.withLock { $0.log } }
  var notes: [String] { state.withLock { $0.notes } }
  var callbacksOffThread: Int { state.withLock { $0.offThread } }
}
