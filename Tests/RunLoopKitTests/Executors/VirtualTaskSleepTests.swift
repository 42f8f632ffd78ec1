import RunLoopKit
import RunLoopKitExecutors
import Testing

extension RunLoopKitTests {
  @Suite("Task.sleep on a virtual loop") struct VirtualTaskSleep {
    @Test("78. Task.sleep on a virtual loop's executor counts from the virtual now")
    func taskSleepCountsFromVirtualNow() throws {
      let virtual = VirtualLoop()
      let loop = virtual.loop
      let start = virtual.now
      let woke = Box<LoopClock.Instant?>(nil)
      let task = Task(executorPreference: loop.executor) {
        try? await Task.sleep(for: .seconds(3600))
        woke.value = loop.now
      }
      // The task's first job comes from the runtime: run it, and its sleep is a loop timer.
      #expect(virtual.runUntil { loop.nextTimerFireDate(in: .default) != nil })
      #expect(loop.nextTimerFireDate(in: .default) == start.advanced(by: .seconds(3600)))
      virtual.advance(by: .seconds(3599))
      #expect(woke.value == nil, "a second early: still asleep")
      virtual.advance(by: .seconds(1))
      // The resumption passes through Swift's global executor on its way back to the loop.
      #expect(virtual.runUntil { woke.value != nil })
      #expect(woke.value == start.advanced(by: .seconds(3600)))
      withExtendedLifetime(task) {}
    }
  }
}
