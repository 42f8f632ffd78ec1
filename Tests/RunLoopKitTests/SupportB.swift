import Testing

@testable import RunLoopKit

/// Whether every timer in `heap` records the index it really has there. The caller holds the
/// owning loop's lock.
func heapIndicesAreRecorded(_ heap: TimerHeap) -> Bool {
  heap.entries.enumerated().allSatisfy { index, entry in
    entry.timer.slots.index(in: heap) == index
  }
}

/// Starts a task preferring `virtual`'s loop executor that runs `sleep` (an hour long) and
/// then notes the virtual time it woke at. Returns once the sleep is a loop timer an hour from
/// the start and the clock stands one second short of it, the task still asleep (checked).
func startHourLongVirtualSleep(
  on virtual: VirtualLoop, _ sleep: @escaping @Sendable (Loop) async throws -> Void
) -> (start: LoopClock.Instant, woke: Box<LoopClock.Instant?>, task: Task<Void, Never>) {
  let loop = virtual.loop
  let start = virtual.now
  let woke = Box<LoopClock.Instant?>(nil)
  let task = Task(executorPreference: loop.executor) {
    do {
      try await sleep(loop)
      woke.value = loop.now
    } catch {}
  }
  // The task's first job comes from the runtime: run it, and its sleep is a loop timer.
  #expect(virtual.runUntil { loop.nextTimerFireDate(in: .default) != nil })
  #expect(loop.nextTimerFireDate(in: .default) == start.advanced(by: .seconds(3600)))
  virtual.advance(by: .seconds(3599))
  #expect(woke.value == nil, "a second early: still asleep")
  return (start, woke, task)
}
