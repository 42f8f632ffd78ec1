import Foundation
import Testing

@testable import RunLoopKit

/// Randomised model testing: seeded random sequences of operations run against the real `Loop`
/// and against `LoopModel`, a small pure-Swift statement of the semantics; the callback traces
/// (and membership and next-fire-date checks after every step) must match.
///
/// Every run is zero-length, so a sequence is deterministic: timers are given fire dates far in
/// the future (they keep modes alive and move around, but do not fire; firing is covered by
/// the timer tests, where real time is involved).
extension RunLoopKitTests {
  @Suite("Randomised model") struct Model {
    @Test("Thousands of random sequences behave like the reference model")
    func randomSequencesMatchTheModel() throws {
      let sequences = 2_000
      var failures: [String] = []
      for seed in 1...UInt64(sequences) {
        var generator = SplitMixGenerator(seed: seed)
        let ops = ModelOp.randomSequence(length: 40, using: &generator)
        let expected = LoopModel().execute(ops)
        let actual = try onLoopThread { loop in RealLoopDriver(loop: loop).execute(ops) }
        if expected != actual {
          let index =
            Array(zip(expected, actual)).firstIndex { $0 != $1 }
            ?? min(expected.count, actual.count)
          failures.append(
            """
            seed \(seed): traces differ at line \(index)
              model: \(expected.dropFirst(max(0, index - 3)).prefix(6))
              real:  \(actual.dropFirst(max(0, index - 3)).prefix(6))
              ops:   \(ops)
            """)
          if failures.count >= 3 { break }
        }
      }
      #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }
  }
}

/// A seedable generator, so a failing sequence can be replayed from the seed printed.
struct SplitMixGenerator: RandomNumberGenerator {
  var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

enum ModelOp: CustomStringConvertible {
  case addSource(Int, String)
  case removeSource(Int, String)
  case invalidateSource(Int)
  case signal(Int)
  case perform(Int, [String])
  case addObserver(Int, String)
  case removeObserver(Int, String)
  case addTimer(Int, String)
  case removeTimer(Int, String)
  case invalidateTimer(Int)
  case setFireDate(Int, Int64)
  case addCommonMode(String)
  case run(String, returnAfterSourceHandled: Bool)

  static let modes = ["default", "X", "Y", "common"]
  static let sourceCount = 4
  static let observerCount = 3
  static let timerCount = 3

  /// Source i has order `sourceOrders[i]`, observer i `observerOrders[i]`.
  static let sourceOrders = [1, 0, 1, 2]
  static let observerOrders = [1, 0, 1]

  static func randomSequence(length: Int, using generator: inout SplitMixGenerator) -> [ModelOp] {
    var ops: [ModelOp] = []
    var nextBlock = 0
    func mode() -> String { modes.randomElement(using: &generator)! }
    func runnable() -> String {
      ["default", "X", "Y", "default", "common"].randomElement(using: &generator)!
    }
    for _ in 0..<length {
      let source = Int.random(in: 0..<sourceCount, using: &generator)
      let observer = Int.random(in: 0..<observerCount, using: &generator)
      let timer = Int.random(in: 0..<timerCount, using: &generator)
      switch Int.random(in: 0..<20, using: &generator) {
      case 0, 1, 2: ops.append(.addSource(source, mode()))
      case 3: ops.append(.removeSource(source, mode()))
      case 4: ops.append(.invalidateSource(source))
      case 5, 6, 7: ops.append(.signal(source))
      case 8, 9:
        let modes = [["default"], ["X"], ["common"], ["X", "Y"]].randomElement(using: &generator)!
        ops.append(.perform(nextBlock, modes))
        nextBlock += 1
      case 10: ops.append(.addObserver(observer, mode()))
      case 11: ops.append(.removeObserver(observer, mode()))
      case 12: ops.append(.addTimer(timer, mode()))
      case 13: ops.append(.removeTimer(timer, mode()))
      case 14: ops.append(.invalidateTimer(timer))
      case 15: ops.append(.setFireDate(timer, Int64.random(in: 1...50, using: &generator)))
      case 16: ops.append(.addCommonMode(["X", "Y"].randomElement(using: &generator)!))
      default:
        ops.append(.run(runnable(), returnAfterSourceHandled: Bool.random(using: &generator)))
      }
    }
    return ops
  }

  var description: String {
    switch self {
    case .addSource(let s, let m): "add s\(s)→\(m)"
    case .removeSource(let s, let m): "remove s\(s)←\(m)"
    case .invalidateSource(let s): "invalidate s\(s)"
    case .signal(let s): "signal s\(s)"
    case .perform(let b, let m): "perform b\(b)\(m)"
    case .addObserver(let o, let m): "add o\(o)→\(m)"
    case .removeObserver(let o, let m): "remove o\(o)←\(m)"
    case .addTimer(let t, let m): "add t\(t)→\(m)"
    case .removeTimer(let t, let m): "remove t\(t)←\(m)"
    case .invalidateTimer(let t): "invalidate t\(t)"
    case .setFireDate(let t, let s): "fireDate t\(t)=+\(s)"
    case .addCommonMode(let m): "common+\(m)"
    case .run(let m, let once): "run \(m)\(once ? " once" : "")"
    }
  }
}

/// Runs a sequence against a real loop on the calling (loop) thread and records the trace.
struct RealLoopDriver {
  let loop: Loop
  let log = Recorder()
  /// Far in the future: timers never fire during a sequence.
  let base = LoopClock.Instant.now.advanced(by: .seconds(100_000))

  func execute(_ ops: [ModelOp]) -> [String] {
    let sources = (0..<ModelOp.sourceCount).map { index in
      ManualSource(
        order: ModelOp.sourceOrders[index],
        schedule: { [log] _, mode in log.log("schedule s\(index) \(mode)") },
        cancel: { [log] _, mode in log.log("cancel s\(index) \(mode)") },
        perform: { [log] in log.log("perform s\(index)") })
    }
    let observers = (0..<ModelOp.observerCount).map { index in
      LoopObserver(activities: .all, order: ModelOp.observerOrders[index]) { [log] _, activity in
        log.log("o\(index) \(activity)")
      }
    }
    let timers = (0..<ModelOp.timerCount).map { index in
      try! LoopTimer(fireAt: base.advanced(by: .seconds(100 + index))) { [log] _ in
        log.log("FIRED t\(index)")
      }
    }
    for op in ops {
      switch op {
      case .addSource(let s, let m):
        do throws(LoopError) { try loop.add(sources[s], to: Loop.Mode(m)) } catch {
          log.log("error add s\(s)")
        }
      case .removeSource(let s, let m): loop.remove(sources[s], from: Loop.Mode(m))
      case .invalidateSource(let s): sources[s].invalidate()
      case .signal(let s): sources[s].signal()
      case .perform(let b, let modes):
        try? loop.perform(in: modes.map { Loop.Mode($0) }) { [log] in log.log("block b\(b)") }
      case .addObserver(let o, let m): try? loop.add(observers[o], to: Loop.Mode(m))
      case .removeObserver(let o, let m): loop.remove(observers[o], from: Loop.Mode(m))
      case .addTimer(let t, let m):
        do throws(LoopError) { try loop.add(timers[t], to: Loop.Mode(m)) } catch {
          log.log("error add t\(t)")
        }
      case .removeTimer(let t, let m): loop.remove(timers[t], from: Loop.Mode(m))
      case .invalidateTimer(let t): timers[t].invalidate()
      case .setFireDate(let t, let seconds):
        timers[t].fireDate = base.advanced(by: .seconds(seconds))
      case .addCommonMode(let m): try? loop.addCommonMode(Loop.Mode(m))
      case .run(let m, let once):
        let result = loop.run(in: Loop.Mode(m), for: .zero, returnAfterSourceHandled: once)
        log.log("run \(m) → \(result)")
      }
      // After every step: who is where, and each mode's next timer.
      for mode in ModelOp.modes {
        let name = Loop.Mode(mode)
        let members = sources.indices.filter { loop.contains(sources[$0], in: name) }
        let timerMembers = timers.indices.filter { loop.contains(timers[$0], in: name) }
        let next =
          loop.nextTimerFireDate(in: name).map { "+\(base.duration(to: $0).components.seconds)" }
          ?? "-"
        log.log("state \(mode) s\(members) t\(timerMembers) next \(next)")
      }
    }
    for source in sources { source.invalidate() }
    return log.all
  }
}

/// The semantics of checklist lines 5–49 for zero-length runs, written as plainly as
/// possible: no kernel, no threads, no locks.
final class LoopModel {
  struct Source {
    var valid = true
    var signalled = false
    var signalSequence = 0
    var modes: [String] = []  // in the order joined
  }
  struct Timer {
    var valid = true
    var fireSeconds: Int64
    var modes: [String] = []
  }

  var sources = (0..<ModelOp.sourceCount).map { _ in Source() }
  var observersValid = Array(repeating: true, count: ModelOp.observerCount)
  var timers = (0..<ModelOp.timerCount).map { Timer(fireSeconds: 100 + Int64($0)) }
  /// Per mode: sources in the order added, observers in notification order, timer ids.
  var modeSources: [String: [Int]] = [:]
  var modeObservers: [String: [Int]] = [:]
  var modeTimers: [String: [Int]] = [:]
  var existingModes: Set<String> = []
  var commonModes = ["default"]
  /// Items added to `.common`, in order: ("s", i), ("o", i), ("t", i).
  var commonItems: [(kind: String, id: Int)] = []
  var blocks: [(id: Int, modes: [String])] = []
  var signalClock = 0
  var trace: [String] = []

  func execute(_ ops: [ModelOp]) -> [String] {
    for op in ops {
      apply(op)
      for mode in ModelOp.modes {
        let members = (0..<ModelOp.sourceCount).filter { isMember("s", $0, of: mode) }
        let timerMembers = (0..<ModelOp.timerCount).filter { isMember("t", $0, of: mode) }
        let next = nextFire(in: mode).map { "+\($0)" } ?? "-"
        trace.append("state \(mode) s\(members) t\(timerMembers) next \(next)")
      }
    }
    for index in sources.indices { invalidateSource(index) }
    return trace
  }

  private func apply(_ op: ModelOp) {
    switch op {
    case .addSource(let s, let m):
      guard sources[s].valid else { return trace.append("error add s\(s)") }
      add("s", s, to: m)
    case .removeSource(let s, let m): remove("s", s, from: m)
    case .invalidateSource(let s): invalidateSource(s)
    case .signal(let s):
      if sources[s].valid && !sources[s].signalled {
        sources[s].signalled = true
        signalClock += 1
        sources[s].signalSequence = signalClock
      }
    case .perform(let b, let modes): blocks.append((b, modes))
    case .addObserver(let o, let m): if observersValid[o] { add("o", o, to: m) }
    case .removeObserver(let o, let m): remove("o", o, from: m)
    case .addTimer(let t, let m):
      guard timers[t].valid else { return trace.append("error add t\(t)") }
      add("t", t, to: m)
    case .removeTimer(let t, let m): remove("t", t, from: m)
    case .invalidateTimer(let t):
      guard timers[t].valid else { return }
      timers[t].valid = false
      commonItems.removeAll { $0 == ("t", t) }
      for mode in timers[t].modes { detach("t", t, from: mode) }
    case .setFireDate(let t, let seconds): timers[t].fireSeconds = seconds
    case .addCommonMode(let m):
      guard !commonModes.contains(m) else { return }
      existingModes.insert(m)
      commonModes.append(m)
      for item in commonItems where !isMember(item.kind, item.id, of: m) {
        attach(item.kind, item.id, to: m)
      }
    case .run(let m, let once): run(m, returnAfterSourceHandled: once)
    }
  }

  // MARK: Membership

  private func isMember(_ kind: String, _ id: Int, of mode: String) -> Bool {
    // `contains(_, in: .common)` asks whether the item was added to `.common` itself.
    if mode == "common" { return commonItems.contains { $0 == (kind, id) } }
    switch kind {
    case "s": return sources[id].modes.contains(mode)
    case "o": return modeObservers[mode, default: []].contains(id)
    default: return timers[id].modes.contains(mode)
    }
  }

  private func add(_ kind: String, _ id: Int, to mode: String) {
    if mode == "common" {
      guard !commonItems.contains(where: { $0 == (kind, id) }) else { return }
      for common in commonModes where !isMember(kind, id, of: common) {
        attach(kind, id, to: common)
      }
      commonItems.append((kind, id))
    } else if !isMember(kind, id, of: mode) {
      attach(kind, id, to: mode)
    }
  }

  private func remove(_ kind: String, _ id: Int, from mode: String) {
    if mode == "common" {
      commonItems.removeAll { $0 == (kind, id) }
      for common in commonModes where isMember(kind, id, of: common) {
        detach(kind, id, from: common)
      }
    } else if isMember(kind, id, of: mode) {
      detach(kind, id, from: mode)
    }
  }

  private func attach(_ kind: String, _ id: Int, to mode: String) {
    existingModes.insert(mode)
    switch kind {
    case "s":
      modeSources[mode, default: []].append(id)
      sources[id].modes.append(mode)
      trace.append("schedule s\(id) \(mode)")
    case "o":
      var list = modeObservers[mode, default: []]
      let order = ModelOp.observerOrders[id]
      let index = list.firstIndex { ModelOp.observerOrders[$0] > order } ?? list.endIndex
      list.insert(id, at: index)
      modeObservers[mode] = list
    default:
      modeTimers[mode, default: []].append(id)
      timers[id].modes.append(mode)
    }
  }

  private func detach(_ kind: String, _ id: Int, from mode: String) {
    switch kind {
    case "s":
      modeSources[mode]?.removeAll { $0 == id }
      sources[id].modes.removeAll { $0 == mode }
      trace.append("cancel s\(id) \(mode)")
    case "o": modeObservers[mode]?.removeAll { $0 == id }
    default:
      modeTimers[mode]?.removeAll { $0 == id }
      timers[id].modes.removeAll { $0 == mode }
    }
  }

  private func invalidateSource(_ s: Int) {
    guard sources[s].valid else { return }
    sources[s].valid = false
    sources[s].signalled = false
    commonItems.removeAll { $0 == ("s", s) }
    for mode in sources[s].modes { detach("s", s, from: mode) }
  }

  private func nextFire(in mode: String) -> Int64? {
    let names = mode == "common" ? commonModes : [mode]
    return names.flatMap { modeTimers[$0, default: []] }.map { timers[$0].fireSeconds }.min()
  }

  // MARK: A zero-length run

  private func applies(_ modes: [String], to mode: String) -> Bool {
    modes.contains { $0 == mode || ($0 == "common" && commonModes.contains(mode)) }
  }

  private func isEmpty(_ mode: String) -> Bool {
    modeSources[mode, default: []].isEmpty && modeTimers[mode, default: []].isEmpty
      && !blocks.contains { applies($0.modes, to: mode) }
  }

  private func notify(_ activity: String, in mode: String) {
    for observer in modeObservers[mode, default: []] where observersValid[observer] {
      trace.append("o\(observer) \(activity)")
    }
  }

  private func performBlocks(in mode: String) {
    let runnable = blocks.filter { applies($0.modes, to: mode) }
    blocks.removeAll { applies($0.modes, to: mode) }
    for block in runnable { trace.append("block b\(block.id)") }
  }

  private func run(_ mode: String, returnAfterSourceHandled: Bool) {
    guard mode != "common", !isEmpty(mode) else {
      return trace.append("run \(mode) → finished")
    }
    notify("entry", in: mode)
    notify("beforeTimers", in: mode)
    notify("beforeSources", in: mode)
    performBlocks(in: mode)
    let signalled = modeSources[mode, default: []].filter { sources[$0].signalled }
      .sorted {
        (ModelOp.sourceOrders[$0], sources[$0].signalSequence)
          < (ModelOp.sourceOrders[$1], sources[$1].signalSequence)
      }
    var handled = false
    for source in signalled {
      sources[source].signalled = false
      trace.append("perform s\(source)")
      handled = true
      if returnAfterSourceHandled { break }
    }
    // The deadline has passed: a zero-length run polls, so no beforeWaiting/afterWaiting.
    let result = handled && returnAfterSourceHandled ? "handledSource" : "timedOut"
    notify("exit", in: mode)
    trace.append("run \(mode) → \(result)")
  }
}
