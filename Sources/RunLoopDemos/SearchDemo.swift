import RunLoopKit

/// `search`: search-as-you-type on one resident thread. Keystrokes arrive through a port
/// faster than a search finishes; the search runs in slices, one per pass of the loop, so a
/// newer query is noticed between slices and the stale search is dropped.
public enum SearchDemo {
  /// Names matched per slice, i.e. per pass of the loop.
  public static let sliceSize = 2_500
  public static let resultLimit = 5

  /// What became of one typed query.
  public enum Fate: Sendable, Equatable {
    /// The search ran to the end.
    case completed(best: [SearchMatch], matches: Int, slices: Int)
    /// A newer query arrived first; the search stopped after this many slices.
    case superseded(afterSlices: Int, by: String)
  }

  public struct Outcome: Sendable {
    public let report: DemoReport
    /// Every typed query, in order, with what became of it.
    public let fates: [(query: String, fate: Fate)]
    /// Callbacks of the search that ran anywhere but on the resident thread (should be 0).
    public let callbacksOffThread: Int
    /// Slices of the whole corpus: the number a search needs to complete.
    public let slicesPerSearch: Int
  }

  // Longer than ~60 lines on purpose: a scenario is a script the demo prints step by
  // step, and it reads best top to bottom, in the order the steps appear in its output.
  public static func run(typing text: String = "runloop") throws -> Outcome {
    let thread = try ResidentThread(name: "search")
    defer {
      thread.stop()
      try? thread.join()
    }
    _ = FuzzyMatcher.corpus.count  // built once, before anything is timed
    let tracer = LoopTracer()
    try tracer.attach(to: thread.loop)
    let report = SearchReport(tracer: tracer)
    // The search and its results live on the search thread: made there, kept in a
    // LoopBoundBox that the port handler and the matcher share, and never touched elsewhere.
    // `SearchSession` is a plain class, neither Sendable nor locked.
    let (session, keystrokes) = try thread.performAndWait {
      () throws -> (LoopBoundBox<SearchSession>, LoopPort<String>) in
      let loop = Loop.current
      let session = LoopBoundBox(SearchSession(report: report, loop: loop), loop: loop)
      let matcher = ManualSource(label: "matcher") { session.value.searchOneSlice() }
      session.value.matcher = matcher
      let keystrokes = try LoopPort<String>(label: "keystrokes") { query in
        session.value.receive(query)
      }
      try loop.add(matcher, to: .default)
      try loop.add(keystrokes, to: .default)
      return (session, keystrokes)
    }
    defer {
      // On the search thread: invalidating releases the handlers, and with them the box.
      try? thread.performAndWait {
        keystrokes.invalidate()
        session.value.matcher?.invalidate()
        session.value.matcher = nil
      }
    }

    // The typist: the next key goes in as soon as the search for the previous one has
    // started, which is faster than any search can finish.
    var typed: [String] = []
    try waitFor("the search thread to sleep") { thread.loop.isWaiting }
    for length in 1...text.count {
      let query = String(text.prefix(length))
      typed.append(query)
      report.note("keystroke \"\(query.last!)\": query \"\(query)\" sent to the port")
      try keystrokes.send(query)
      try waitFor("the search for \"\(query)\" to start") { report.hasStarted(query) }
    }
    try waitFor("the search for \"\(text)\" to complete") { report.fate(of: text) != nil }
    // Detached from the loop's own thread, after the last slice's callout has been recorded.
    // The results are asked of the thread that holds them; only Sendable matches come back.
    let stored = try thread.performAndWait {
      tracer.detach()
      return session.value.results[text] ?? []
    }
    let events = tracer.events

    let fates = typed.map { query in (query, report.fate(of: query)!) }
    let slicesPerSearch = (FuzzyMatcher.corpus.count + sliceSize - 1) / sliceSize
    var demoReport = DemoReport(
      name: "search", title: "search as you type on one resident thread")
    var step = DemoStep(
      caption: "\"\(text)\" typed into a search box; \(FuzzyMatcher.corpus.count) names searched "
        + "in slices of \(sliceSize), one slice per pass of the loop",
      events: events, notes: report.notes)
    step.shown = events.filter {
      switch $0.kind {
      case .activity, .blocks: false
      default: true
      }
    }
    step.filterNote = "activities and blocks left out"
    if case .completed(let best, let matches, _) = fates.last!.1 {
      step.notes.append(
        "Best \(stored.count) of \(matches) names matching \"\(text)\", "
          + "asked of the search thread, which keeps them:")
      step.notes += stored.map { "    \($0.highlighted)" }
      if stored != best { throw DemoError("the stored results differ from the reported ones") }
    }
    demoReport.steps = [step]
    demoReport.explanation = """
      Everything here happened on one thread, in one run loop, with no second worker. The \
      search and its results are a plain class, not Sendable and without a lock: it was made \
      on the search thread and lives in a LoopBoundBox, which only that thread may open, so \
      the port handler and the matcher share it and the demo asks the thread for the \
      results instead of reaching in. Keystrokes came in through a LoopPort, whose \
      eventfd woke the loop; the port handler only recorded the newest query and signalled \
      the "matcher" manual source. The matcher does one slice of the work and signals itself \
      again, so after every slice the loop finishes its pass, polls the kernel without \
      sleeping, and delivers any keystroke that came in meanwhile. The next slice then sees \
      that its query is stale and drops it: a search that can never finish in time costs at \
      most one slice once it is obsolete. This is how a UI thread stays responsive with long \
      work on its own loop — and why CF sources should do a little at a time.
      """
    return Outcome(
      report: demoReport, fates: fates, callbacksOffThread: report.callbacksOffThread,
      slicesPerSearch: slicesPerSearch)
  }
}

/// The search and its results. A plain class: it lives on the search thread, inside a
/// `LoopBoundBox`, and only that thread's callbacks touch it, so it needs no lock and no
/// `Sendable` conformance. What the demo shows from outside goes to `report`.
final class SearchSession {
  struct Job {
    let query: String
    let bytes: [UInt8]
    var next = 0
    var slices = 0
    var matches = 0
    var best: [SearchMatch] = []
  }

  let report: SearchReport
  let loop: Loop
  /// The newest query received, and the search under way.
  var latest: String?
  var job: Job?
  /// Completed searches: the best matches of each query.
  var results: [String: [SearchMatch]] = [:]
  /// Set once the source exists and cleared at the end, breaking the reference cycle.
  var matcher: ManualSource?

  init(report: SearchReport, loop: Loop) {
    self.report = report
    self.loop = loop
  }

  /// The port handler: remember the newest query and let the matcher pick it up.
  func receive(_ query: String) {
    report.checkThread(loop)
    latest = query
    matcher?.signal()
  }

  /// The matcher: drop a stale search, start the newest one, search one slice.
  func searchOneSlice() {
    report.checkThread(loop)
    guard var job = nextJob() else { return }
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

  /// The search to continue: the current one, or the newest query if the current one is
  /// stale (it is dropped) or finished. Nil when there is nothing to do.
  private func nextJob() -> Job? {
    guard let latest else { return nil }
    if let job, job.query != latest {
      report.finished(job.query, .superseded(afterSlices: job.slices, by: latest))
      self.job = nil
    }
    if job == nil {
      guard results[latest] == nil, !report.hasStarted(latest) else { return nil }
      job = Job(query: latest, bytes: Array(latest.lowercased().utf8))
      report.started(latest)
    }
    return job
  }
}

/// What the demo reports from outside the search thread: notes, and each query's fate.
/// Sendable through its lock; it holds copies, never the search's own state.
final class SearchReport: Sendable {
  struct State {
    var started: Set<String> = []
    var fates: [String: SearchDemo.Fate] = [:]
    var notes: [String] = []
    var offThread = 0
  }

  let tracer: LoopTracer
  let state = Locked(State())

  init(tracer: LoopTracer) { self.tracer = tracer }

  func started(_ query: String) {
    state.withLock {
      $0.started.insert(query)
      $0.notes.append("\(stamp(tracer)): search for \"\(query)\" started")
    }
  }

  func finished(_ query: String, _ fate: SearchDemo.Fate) {
    state.withLock {
      $0.fates[query] = fate
      switch fate {
      case .completed(_, _, let slices):
        $0.notes.append(
          "\(stamp(tracer)): search for \"\(query)\" completed in \(slices) slices")
      case .superseded(let slices, let newer):
        $0.notes.append(
          "\(stamp(tracer)): search for \"\(query)\" dropped after \(slices) slice"
            + "\(slices == 1 ? "" : "s"): \"\(newer)\" is newer")
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

  func hasStarted(_ query: String) -> Bool { state.withLock { $0.started.contains(query) } }
  func fate(of query: String) -> SearchDemo.Fate? { state.withLock { $0.fates[query] } }
  var notes: [String] { state.withLock { $0.notes } }
  var callbacksOffThread: Int { state.withLock { $0.offThread } }
}
