import Foundation
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Re-arming one timer") struct TimerRearm {
    /// The recipe for a C library's timer callback (curl's, c-ares's): one timer, parked at
    /// `.distantFuture` with an interval longer than any wait, its fire date moved on every
    /// callback ("fire in n ms", "now", "never"). A one-shot timer would be invalid after its
    /// first firing, and setting an invalid timer's date does nothing, as in CF.
    @Test(
      "34. One timer parked at distantFuture fires each time its fire date is moved, and not when moved back"
    )
    func test_34_parkedTimerRearms() throws {
      let (fired, results) = try onLoopThread { loop -> (Int, [Loop.RunResult]) in
        let count = Box(0)
        let timer = try LoopTimer(fireAt: .distantFuture, interval: .seconds(86_400 * 365)) {
          _ in
          count.value += 1
          loop.stop()
        }
        try loop.add(timer, to: .default)
        defer { timer.invalidate() }
        var results: [Loop.RunResult] = []
        for _ in 0..<3 {
          timer.fireDate = LoopClock.now.advanced(by: .milliseconds(5))  // "in 5 ms"
          results.append(loop.run(for: .seconds(10)))
        }
        timer.fireDate = LoopClock.now  // "now": the next pass
        results.append(loop.run(for: .seconds(10)))
        timer.fireDate = .distantFuture  // "never"
        results.append(loop.run(for: .milliseconds(50)))
        #expect(timer.isValid)
        return (count.value, results)
      }
      #expect(results == [.stopped, .stopped, .stopped, .stopped, .timedOut])
      #expect(fired == 4)
    }
  }
}
