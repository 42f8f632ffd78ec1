/// The manual sources signalled since the loop last looked, in the order they were signalled:
/// how a signal reaches the ready sources (`ReadySources`) of its source's modes without the
/// signalling thread taking the loop's lock.
///
/// Its own lock, a leaf lock held for an append or a swap: a thread signalling flat out and
/// the loop taking what it signalled meet only here, never on the loop's lock, which a pass
/// takes several times. A source is appended when its flag goes from clear to set, so the
/// inbox holds each source at most once per signal and never more than the sources there are
/// (a second entry, from a source that joined a mode signalled and was performed before the
/// loop took the first, finds it already placed or no longer signalled, and is dropped).
final class SignalInbox: @unchecked Sendable {  // `sources` is guarded by `lock`
  private let lock = Lock.make()
  @exclusivity(unchecked) private var sources: [ManualSource] = []

  func append(_ source: ManualSource) {
    lock.lock()
    sources.append(source)
    lock.unlock()
  }

  /// Takes `source` out (a first add that failed unbinds its source, which may have been
  /// signalled meanwhile: its next loop may be another). O(what is in the inbox); rare.
  func remove(_ source: ManualSource) {
    lock.lock()
    sources.removeAll { $0 === source }
    lock.unlock()
  }

  /// Everything appended so far, swapped for `spare` (which the caller has emptied, keeping
  /// its capacity), so taking allocates nothing once both buffers have grown.
  func take(swapping spare: inout [ManualSource]) {
    if !spare.isEmpty { spare.removeAll(keepingCapacity: true) }
    lock.lock()
    swap(&sources, &spare)
    lock.unlock()
  }
}
