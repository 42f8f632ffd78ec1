import RunLoopKit
import RunLoopKitExecutors
import Testing

extension RunLoopKitTests {
  @Suite("Task.sleep on a virtual loop") struct VirtualTaskSleep {
    @Test("78. Task.sleep on a virtual loop's executor counts from the virtual now")
    func taskSleepCountsFromVirtualNow() throws {
      let virtual = VirtualLoop()
      let (start, woke, task) = startHourLongVirtualSleep(on: virtual) { _ in
        try await Task.sleep(for: .seconds(3600))
      }
      virtual.advance(by: .seconds(1))
      // The resumption passes through Swift's global executor on its way back to the loop.
      #expect(virtual.runUntil { woke.value != nil })
      #expect(woke.value == start.advanced(by: .seconds(3600)))
      withExtendedLifetime(task) {}
    }
  }
}
