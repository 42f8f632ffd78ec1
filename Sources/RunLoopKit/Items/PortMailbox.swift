/// A `LoopPort`'s queue and eventfd, shared by the port handle and the descriptor source's
/// handler so the loop keeps it alive for as long as the port is scheduled.
///
/// The queue is two plain buffers rather than arrays: the mailbox is generic over the
/// message, and its code runs unspecialised when the port's type lives in another module
/// (every user's). An `Array<Message>` there asks the runtime for its type's metadata on every
/// send and every delivery, and empties itself through value witnesses (measured with
/// callgrind: ~1 000 instructions on the way from `send` to the handler, ~2 000 more after
/// it); a buffer of `Message` needs none of that. Senders fill the queue; the loop's thread
/// swaps it for `spare` and hands the messages out of the buffer it took, so a send never
/// waits for a delivery to finish.
// @unchecked Sendable: every mutable field is guarded by `lock`.
final class PortMailbox<Message: Sendable>: AcceptedMessages, @unchecked Sendable {
  let eventFD: EventFD
  private let lock = Lock.make()
  /// The queue, in the class's own fields rather than a `Buffer`: a generic struct in a field
  /// costs a metadata lookup on every access from unspecialised code.
  @exclusivity(unchecked) private var queueBase: UnsafeMutablePointer<Message>
  @exclusivity(unchecked) private var queueCount = 0
  @exclusivity(unchecked) private var queueCapacity: Int
  /// The buffer of the last batch delivered, empty, for the queue to go on in.
  @exclusivity(unchecked) private var spare: Buffer?
  @exclusivity(unchecked) private var signalled = false
  @exclusivity(unchecked) private var closed = false
  /// Why sends are refused, once they are.
  private var refusal: LoopError?

  /// Messages in `base[0..<count]`, room for `capacity`.
  struct Buffer {
    var base: UnsafeMutablePointer<Message>
    var count = 0
    var capacity: Int

    init(capacity: Int) {
      base = .allocate(capacity: capacity)
      self.capacity = capacity
    }

    init(base: UnsafeMutablePointer<Message>, count: Int, capacity: Int) {
      self.base = base
      self.count = count
      self.capacity = capacity
    }

    /// Frees the buffer and whatever it still holds.
    func free() {
      base.deinitialize(count: count)
      base.deallocate()
    }
  }

  /// A buffer above this many messages (after a flood) is let go rather than kept as spare.
  private static var spareLimit: Int { 1024 }

  init() throws(LoopError) {
    eventFD = try EventFD()
    queueBase = .allocate(capacity: 8)
    queueCapacity = 8
  }

  deinit {
    queueBase.deinitialize(count: queueCount)
    queueBase.deallocate()
    spare?.free()
  }

  func post(_ message: Message) throws(LoopError) {
    let write = try lock.withLock { () throws(LoopError) -> Bool in
      if let refusal { throw refusal }
      if queueCount == queueCapacity {
        let grown = UnsafeMutablePointer<Message>.allocate(capacity: queueCapacity * 2)
        grown.moveInitialize(from: queueBase, count: queueCount)
        queueBase.deallocate()
        queueBase = grown
        queueCapacity *= 2
      }
      (queueBase + queueCount).initialize(to: message)
      queueCount += 1
      // One eventfd write per idle-to-busy transition; the handler takes everything.
      guard !signalled else { return false }
      signalled = true
      eventFD.reserveSignal()
      return true
    }
    // Written after the lock is released: the woken handler takes this lock first.
    if write { try eventFD.completeSignal() }
  }

  /// Hands every queued message to `handler`, in the order sent. The eventfd is left
  /// readable: reading it here would put a syscall between the wake-up and the first message
  /// (measured: most of the port's lead over a bare descriptor source), so the loop calls
  /// `drainIfIdle()` before it next waits.
  func deliver(to handler: (Message) -> Void) {
    guard let batch = takeBatch() else { return }
    for index in 0..<batch.count { handler((batch.base + index).move()) }
    recycle(batch)
  }

  private func takeBatch() -> Buffer? {
    lock.withLock {
      guard !closed else { return nil }
      signalled = false
      guard queueCount > 0 else { return nil }
      let taken = Buffer(base: queueBase, count: queueCount, capacity: queueCapacity)
      let next = spare ?? Buffer(capacity: 8)
      spare = nil
      queueBase = next.base
      queueCount = 0
      queueCapacity = next.capacity
      return taken
    }
  }

  /// Keeps a delivered batch's buffer (its messages all moved out) for the queue to reuse.
  private func recycle(_ batch: Buffer) {
    var emptied = batch
    emptied.count = 0
    let kept = lock.withLock { () -> Bool in
      guard spare == nil, !closed, emptied.capacity <= Self.spareLimit else { return false }
      spare = emptied
      return true
    }
    if !kept { emptied.free() }
  }

  /// Resets the eventfd unless messages are waiting: a send that lands after this read sees
  /// `signalled` false and writes again, and one that landed before it left the queue
  /// non-empty, so no message is left without a wake-up.
  func drainIfIdle() {
    lock.withLock {
      guard !closed, queueCount == 0 else { return }
      _ = try? eventFD.drain()
    }
  }

  var pendingCount: Int { lock.withLock { queueCount } }

  var hasPending: Bool { pendingCount > 0 }

  /// Refuses later sends with `error`; queued messages stay for `close()` to hand back.
  func refuse(_ error: LoopError) {
    lock.withLock {
      if refusal == nil { refusal = error }
    }
  }

  func close() -> [Message] {
    let pending = lock.withLock { () -> [Message] in
      closed = true
      refusal = .invalidated(item: "LoopPort")
      let taken = (0..<queueCount).map { (queueBase + $0).move() }
      queueCount = 0
      return taken
    }
    // Sends are refused now; close() lets the writes already decided finish first.
    eventFD.close()
    return pending
  }
}
