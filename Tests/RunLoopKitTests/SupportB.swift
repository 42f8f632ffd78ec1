import Testing

@testable import RunLoopKit

/// Whether every timer in `heap` records the index it really has there. The caller holds the
/// owning loop's lock.
func heapIndicesAreRecorded(_ heap: TimerHeap) -> Bool {
  heap.entries.enumerated().allSatisfy { index, entry in
    entry.timer.slots.index(in: heap) == index
  }
}
