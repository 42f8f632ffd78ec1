import Foundation
import Testing

@testable import RunLoopKit

/// Checklist line 104: sources signalled in the order they are performed (one `order`, one
/// signal after another, the common case) join the ready queue of `ReadySources` and leave it
/// with no sift, so performing them moves no other source; the others go through the heap,
/// and together the two give CF's order. Counted (`ReadySources.moves`), not timed.
extension RunLoopKitTests {
  @Suite("Sources signalled in order are performed without a sift") struct ReadyQueueTests {
    @Test(
      "104. 10 000 sources of one order, signalled one after another, are performed in signal order in one pass, each placed once and taken once"
    )
    func test_104_inOrderSignalsAreQueued() throws {
      let count = 10_000
      let performed = Box([Int]())
      try onLoopThread { loop in
        var sources: [ManualSource] = []
        for index in 0..<count {
          let source = ManualSource { performed.value.append(index) }
          try loop.add(source, to: .default)
          sources.append(source)
        }
        let mode = try #require(loop.lock.withLock { loop.modeStates[.default] })
        let moves = { loop.lock.withLock { mode.ready.moves } }
        // Signalled in a shuffled order of indices: the signal order is what counts.
        var generator = SplitMixGenerator(seed: 104)
        let signalOrder = Array(0..<count).shuffled(using: &generator)
        for index in signalOrder { sources[index].signal() }
        let before = moves()
        #expect(loop.run(for: .zero) == .timedOut)
        // A binary heap would add about log2(10 000) ≈ 13 moves to every removal.
        #expect(moves() - before == 2 * count)
        #expect(performed.value == signalOrder)
        for source in sources { source.invalidate() }
      }
    }

    @Test(
      "104. A source that waits at the head of a mode's ready queue while 10 000 others come and go through that mode (performed in another) keeps the queue within twice what is ready, and runs once"
    )
    func test_104_holesBehindAWaitingHeadAreBounded() throws {
      let waited = Box(0)
      let passed = Box(0)
      try onLoopThread { loop in
        let waiting = ManualSource { waited.value += 1 }
        try loop.add(waiting, to: "other")
        let passing = ManualSource { passed.value += 1 }
        try loop.add(passing, to: .default)
        try loop.add(passing, to: "other")
        waiting.signal()
        let mode = try #require(loop.lock.withLock { loop.modeStates["other"] })
        var largest = 0
        for _ in 0..<10_000 {
          passing.signal()
          // Performed in `.default`: it leaves a hole in the other mode's queue.
          #expect(loop.run(in: .default, for: .zero) == .timedOut)
          largest = max(largest, loop.lock.withLock { mode.ready.queueSlots })
        }
        #expect(passed.value == 10_000)
        #expect(largest <= 2 * 1 + 64 + 1, "the queue grew to \(largest) slots for 1 ready source")
        #expect(loop.run(in: "other", for: .zero) == .timedOut)
        #expect(waited.value == 1)
        #expect(passed.value == 10_000)
        #expect(loop.lock.withLock { mode.ready.isEmpty })
        waiting.invalidate()
        passing.invalidate()
      }
    }

    @Test(
      "104. Sources of several orders signalled in a random order, some invalidated, removed or performed in another mode while ready, run by order then signal time, each once"
    )
    func test_104_queueAndHeapTogetherKeepCFOrder() throws {
      let performed = Box([Int]())
      try onLoopThread { loop in
        var generator = SplitMixGenerator(seed: 1_040)
        for round in 0..<200 {
          performed.value = []
          var sources: [ManualSource] = []
          for index in 0..<40 {
            let order = Int.random(in: 0..<3, using: &generator)
            let source = ManualSource(order: order) { performed.value.append(index) }
            try loop.add(source, to: .default)
            try loop.add(source, to: "other")
            sources.append(source)
          }
          // Signal a random selection, some twice (the second signal changes nothing).
          var signalled: [Int] = []
          for _ in 0..<60 {
            let index = Int.random(in: 0..<40, using: &generator)
            if !signalled.contains(index) { signalled.append(index) }
            sources[index].signal()
          }
          // Take some out while ready: invalidated, removed from the mode, or performed in
          // the other mode first (which takes them out of this mode's ready sources too).
          var gone: Set<Int> = []
          var removed: Set<Int> = []
          for index in signalled.shuffled(using: &generator).prefix(8) {
            if Int.random(in: 0..<2, using: &generator) == 0 {
              sources[index].invalidate()
            } else {
              loop.remove(sources[index], from: .default)
              removed.insert(index)
            }
            gone.insert(index)
          }
          for _ in 0..<4 {
            let result = loop.run(in: "other", for: .zero, returnAfterSourceHandled: true)
            #expect(result == .handledSource)
            gone.formUnion(performed.value)
            removed.subtract(performed.value)
            performed.value = []
          }
          let expected = signalled.filter { !gone.contains($0) }
            .enumerated()
            .sorted { left, right in
              let (a, b) = (sources[left.element].order, sources[right.element].order)
              return a != b ? a < b : left.offset < right.offset
            }
            .map(\.element)
          #expect(loop.run(in: .default, for: .zero) == .timedOut)
          #expect(performed.value == expected, "round \(round)")
          // Everything signalled was performed or taken out: the other mode finds only the
          // sources removed from `.default` (still signalled there), in CF's order.
          performed.value = []
          #expect(loop.run(in: "other", for: .zero) == .timedOut)
          let removedOnly = signalled.filter { removed.contains($0) }
            .enumerated()
            .sorted { left, right in
              let (a, b) = (sources[left.element].order, sources[right.element].order)
              return a != b ? a < b : left.offset < right.offset
            }
            .map(\.element)
          #expect(performed.value == removedOnly, "round \(round), other mode")
          for source in sources { source.invalidate() }
        }
      }
    }
  }
}
