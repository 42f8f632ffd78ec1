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
    let session = SearchSession(
      tracer: tracer, isOnThread: { [weak thread] in thread?.isCurrent == true })
    let matcher = ManualSource(label: "matcher") { session.searchOneSlice() }
    session.matcher.withLock { $0 = matcher }
    let keystrokes = try LoopPort<String>(label: "keystrokes") { query in session.receive(query) }
    try thread.loop.add(matcher, to: .default)
    try thread.loop.add(keystrokes, to: .default)
    defer {
      keystrokes.invalidate()
      matcher.invalidate()
      session.matcher.withLock { $0 = nil }
    }

    // The typist: the next key goes in as soon as the search for the previous one has
    // started, which is faster than any search can finish.
    var typed: [String] = []
    try waitFor("the search thread to sleep") { thread.loop.isWaiting }
    for length in 1...text.count {
      let query = String(text.prefix(length))
      typed.append(query)
      session.note("keystroke \"\(query.last!)\": query \"\(query)\" sent to the port")
      try keystrokes.send(query)
      try waitFor("the search for \"\(query)\" to start") { session.hasStarted(query) }
    }
    try waitFor("the search for \"\(text)\" to complete") { session.fate(of: text) != nil }
    // Detached from the loop's own thread, after the last slice's callout has been recorded.
    try thread.performAndWait { tracer.detach() }
    let events = tracer.events

    let fates = typed.map { query in (query, session.fate(of: query)!) }
    let slicesPerSearch = (FuzzyMatcher.corpus.count + sliceSize - 1) / sliceSize
    var report = DemoReport(name: "search", title: "search as you type on one resident thread")
    var step = DemoStep(
      caption: "\"\(text)\" typed into a search box; \(FuzzyMatcher.corpus.count) names searched "
        + "in slices of \(sliceSize), one slice per pass of the loop",
      events: events, notes: session.notes)
    step.shown = events.filter {
      switch $0.kind {
      case .activity, .blocks: false
      default: true
      }
    }
    step.filterNote = "activities and blocks left out"
    if case .completed(let best, let matches, _) = fates.last!.1 {
      step.notes.append("Best \(best.count) of \(matches) names matching \"\(text)\":")
      step.notes += best.map { "    \($0.highlighted)" }
    }
    report.steps = [step]
    report.explanation = """
      Everything here happened on one thread, in one run loop, with no second worker: only \
      callbacks on that thread touch the search (its mutex is there so the demo can report \
      from outside). Keystrokes came in through a LoopPort, whose \
      eventfd woke the loop; the port handler only recorded the newest query and signalled \
      the "matcher" manual source. The matcher does one slice of the work and signals itself \
      again, so after every slice the loop finishes its pass, polls the kernel without \
      sleeping, and delivers any keystroke that came in meanwhile. The next slice then sees \
      that its query is stale and drops it: a search that can never finish in time costs at \
      most one slice once it is obsolete. This is how a UI thread stays responsive with long \
      work on its own loop — and why CF sources should do a little at a time.
      """
    return Outcome(
      report: report, fates: fates, callbacksOffThread: session.callbacksOffThread,
      slicesPerSearch: slicesPerSearch)
  }
}

/// The search's state: touched only by the resident thread's callbacks, and read by the
/// demo's thread through the same mutex.
final class SearchSession: Sendable {
  struct Job {
    let query: String
    let bytes: [UInt8]
    var next = 0
    var slices = 0
    var matches = 0
    var best: [SearchMatch] = []
  }

  struct State {
    var latest: String?
    var job: Job?
    var started: Set<String> = []
    var fates: [String: SearchDemo.Fate] = [:]
    var notes: [String] = []
    var offThread = 0
  }

  let tracer: LoopTracer
  let isOnThread: @Sendable () -> Bool
  let state = Locked(State())
  /// Set once the source exists and cleared at the end, breaking the reference cycle.
  let matcher = Locked<ManualSource?>(nil)

  init(tracer: LoopTracer, isOnThread: @escaping @Sendable () -> Bool) {
    self.tracer = tracer
    self.isOnThread = isOnThread
  }

  /// The port handler: remember the newest query and let the matcher pick it up.
  func receive(_ query: String) {
    state.withLock { state in
      if !isOnThread() { state.offThread += 1 }
      state.latest = query
    }
    matcher.withLock { $0 }?.signal()
  }

  /// The matcher: drop a stale search, start the newest one, search one slice.
  func searchOneSlice() {
    // Decide under the lock, search with it released (the typist polls it meanwhile), then
    // store the result. Only this thread's callbacks change the job, so nothing moves between.
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
    let more = state.withLock { state -> Bool in
      guard end == corpus.count else {
        state.job = job
        return true
      }
      state.fates[job.query] = .completed(best: job.best, matches: job.matches, slices: job.slices)
      state.notes.append(
        "\(stamp(tracer)): search for \"\(job.query)\" completed in \(job.slices) slices")
      state.job = nil
      return false
    }
    // More to do: signalled from the loop's own thread, so no wake-up is needed; the loop
    // polls after a pass that handled a source and performs this again on the next one.
    if more { matcher.withLock { $0 }?.signal() }
  }

  /// The search to continue: the current one, or the newest query if the current one is
  /// stale (it is dropped) or finished. Nil when there is nothing to do.
  private func nextJob() -> Job? {
    state.withLock { state -> Job? in
      if !isOnThread() { state.offThread += 1 }
      guard let latest = state.latest else { return nil }
      if let job = state.job, job.query != latest {
        state.fates[job.query] = .superseded(afterSlices: job.slices, by: latest)
        state.notes.append(
          "\(stamp(tracer)): search for \"\(job.query)\" dropped after \(job.slices) slice"
            + "\(job.slices == 1 ? "" : "s"): \"\(latest)\" is newer")
        state.job = nil
      }
      if state.job == nil {
        guard state.fates[latest] == nil else { return nil }
        state.job = SearchSession.Job(query: latest, bytes: Array(latest.lowercased().utf8))
        state.started.insert(latest)
        state.notes.append("\(stamp(tracer)): search for \"\(latest)\" started")
      }
      return state.job
    }
  }

  func note(_ text: String) {
    state.withLock { $0.notes.append("\(stamp(tracer)): \(text)") }
  }

  func hasStarted(_ query: String) -> Bool { state.withLock { $0.started.contains(query) } }
  func fate(of query: String) -> SearchDemo.Fate? { state.withLock { $0.fates[query] } }
  var notes: [String] { state.withLock { $0.notes } }
  var callbacksOffThread: Int { state.withLock { $0.offThread } }
}
