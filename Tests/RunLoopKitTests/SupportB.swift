import Testing

@testable import RunLoopKit

/// What a repeating timer's callout saw (`fire`: the date being served), or what was seen of it
/// outside its callouts (`observed`: the date it is armed for, read by a `beforeWaiting`
/// observer or after the run), with when the callback began and ended.
struct GridEvent: Sendable {
  enum Kind: Sendable { case fire, observed }
  let kind: Kind
  let fireDate: LoopClock.Instant
  let at: LoopClock.Instant
  let end: LoopClock.Instant
}

/// How many whole `step`s fit in `duration` (rounded down; a negative duration gives -1 or less).
func whole(_ duration: Duration, _ step: Duration) -> Int {
  let (quotient, remainder) = duration.saturatedNanoseconds.quotientAndRemainder(
    dividingBy: step.saturatedNanoseconds)
  return Int(remainder < 0 ? quotient - 1 : quotient)
}

/// `k` if `date` is exactly `start + k × step`, nil if it is off that grid.
func gridIndex(_ date: LoopClock.Instant, start: LoopClock.Instant, step: Duration) -> Int? {
  let offset = start.duration(to: date).saturatedNanoseconds
  guard offset % step.saturatedNanoseconds == 0 else { return nil }
  return Int(offset / step.saturatedNanoseconds)
}

/// Checks a repeating timer whose grid is `start + k × step` (first fire at `k = 1`), from the
/// events its callout and a `beforeWaiting` observer logged, in order (end with one observation
/// after the run):
/// - every date it serves or is re-armed for is exactly on the grid (no drift);
/// - it fires first at `k = 1`, and each fire serves exactly the date it was last re-armed for,
///   never before that date;
/// - after each fire it is observed before the next fire (a pass tells `beforeWaiting`, or the
///   run ends), by which time it is re-armed for the first grid point after the callout ended:
///   not earlier (no double fire), and not later than the first grid point after the
///   observation (so no grid point is skipped unless the loop really was past it: a half-rate
///   timer fails).
/// Lateness itself is never bounded: a loaded machine only widens the window these allow.
func checkGrid(
  _ events: [GridEvent], start: LoopClock.Instant, step: Duration,
  sourceLocation: SourceLocation = #_sourceLocation
) {
  var due = 1
  var lastFireEnd: LoopClock.Instant?
  for event in events {
    guard let k = gridIndex(event.fireDate, start: start, step: step) else {
      Issue.record(
        "\(event.kind) saw fire date \(start.duration(to: event.fireDate)) after the start, off the \(step) grid",
        sourceLocation: sourceLocation)
      continue
    }
    switch event.kind {
    case .fire:
      #expect(
        lastFireEnd == nil, "two fires with no observation between", sourceLocation: sourceLocation)
      #expect(
        k == due, "fired for grid point \(k), re-armed for \(due)", sourceLocation: sourceLocation)
      #expect(event.at >= event.fireDate, "fire \(k) was early", sourceLocation: sourceLocation)
      lastFireEnd = event.end
    case .observed:
      if let end = lastFireEnd {
        let earliest = whole(start.duration(to: end), step) + 1
        let latest = whole(start.duration(to: event.at), step) + 1
        #expect(
          k >= earliest && k <= latest,
          "after grid point \(due) re-armed for \(k), not within \(earliest)...\(latest)",
          sourceLocation: sourceLocation)
        lastFireEnd = nil
      } else {
        #expect(
          k == due, "re-armed for \(k) with no fire since \(due)", sourceLocation: sourceLocation)
      }
      due = k
    }
  }
}

/// Whether every timer in `heap` records the index it really has there. The caller holds the
/// owning loop's lock.
func heapIndicesAreRecorded(_ heap: TimerHeap) -> Bool {
  heap.entries.enumerated().allSatisfy { index, entry in
    entry.timer.slots.index(in: heap) == index
  }
}
