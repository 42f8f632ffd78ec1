import RunLoopKit

/// The search field of a UI that runs on the main thread. Keystrokes arrive on `Loop.main`; one
/// debounce timer, moved on every keystroke, waits for the typing to pause; the search then runs
/// on the database's thread and its answer comes back to the main actor. An answer that a newer
/// search has overtaken is dropped.
///
/// Everything here is main-actor isolated, the loop callbacks included: they are armed through
/// `Loop.main.assumeIsolated()` from main-actor code, so they capture `self` with no
/// `MainActor.assumeIsolated`.
@MainActor final class SearchBox {
  private let database: ResidentThread
  private let index: LoopBound<SearchIndex>
  private let pause: Duration
  private var debounce: LoopTimer?
  private(set) var text = ""
  private var generation = 0
  private var inFlight = 0
  /// The answers shown, in order, with how long each took from the pause to the screen.
  private(set) var shown: [(result: SearchResult, latency: Duration)] = []
  private(set) var dropped = 0
  private(set) var problems: [String] = []
  private var typingEnds: LoopClock.Instant = .distantFuture

  init(database: ResidentThread, index: LoopBound<SearchIndex>, pause: Duration) throws {
    self.database = database
    self.index = index
    self.pause = pause
    // One timer for the box's life: parked far away, moved by each keystroke.
    debounce = try Loop.main.assumeIsolated().addTimer(
      label: "search debounce", fireAt: .distantFuture, repeating: .seconds(86_400 * 365)
    ) { _ in self.search() }
  }

  /// Types `script` on `Loop.main`: each character at its offset from now.
  func type(_ script: [(offset: Duration, character: Character)]) throws {
    let start = LoopClock.now
    for (offset, character) in script {
      try Loop.main.assumeIsolated().perform(at: start.advanced(by: offset)) {
        self.text.append(character)
        self.debounce?.fireDate = LoopClock.now.advanced(by: self.pause)
      }
    }
    typingEnds = start.advanced(by: script.last?.offset ?? .zero)
  }

  /// True once the typing is over and every search has come back.
  var isSettled: Bool {
    LoopClock.now > typingEnds && inFlight == 0 && debounce?.fireDate == .distantFuture
  }

  func close() { debounce?.invalidate() }

  private func search() {
    debounce?.fireDate = .distantFuture
    generation += 1
    let (mine, prefix, index, asked) = (generation, text, index, LoopClock.now)
    inFlight += 1
    Task {  // main-actor isolated, like the method that makes it
      defer { inFlight -= 1 }
      do {
        let result = try await database.run { try index.value.find(prefix: prefix) }
        if !Loop.main.isCurrent {
          problems.append("the answer for \(prefix) came back off the main thread")
        }
        guard mine == generation else {
          dropped += 1  // the user typed on and a newer search is under way
          return
        }
        shown.append((result, asked.duration(to: .now)))
      } catch {
        problems.append("search for \(prefix): \(error)")
      }
    }
  }
}
