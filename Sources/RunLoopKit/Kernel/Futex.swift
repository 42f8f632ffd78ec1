import CRunLoopShims
import Glibc

/// A process-private futex word: the kernel's cheapest way to put a thread to sleep and wake
/// it. A loop whose mode has no descriptor to watch sleeps here instead of in `epoll_wait`,
/// which saves the eventfd's and epoll's share of every wake (see `Loop+Wait.swift`).
///
/// The word counts wake-ups: a waker adds one and calls `wake()`; a sleeper reads the count
/// first (under the lock wakers take) and sleeps only while it is unchanged, so a wake that
/// lands between the read and the sleep makes the sleep return at once.
final class Futex: @unchecked Sendable {  // the word is only touched through C atomics
  private let word: UnsafeMutablePointer<UInt32>

  init() {
    word = .allocate(capacity: 1)
    word.initialize(to: 0)
  }

  deinit { word.deallocate() }

  /// The current count.
  var value: UInt32 { crl_futex_load(word) }

  /// Adds one to the count, so a sleeper that read the old value will not sleep (or wakes).
  func increment() { crl_futex_increment(word) }

  /// Wakes the thread sleeping on the word, if any.
  func wake() {
    do {
      try Syscall.retryingEINTR("futex(FUTEX_WAKE)", on: "a loop's wake-up word") {
        crl_futex_wake(word, 1)
      }
    } catch {
      preconditionFailure("\(error)")
    }
  }

  /// Sleeps while the count is `seen`, until woken or `deadline` (nil: no deadline); returns
  /// at once if the count has already changed. A signal makes it sleep again until the same
  /// deadline. The caller tells a wake-up from a timeout by the count, which it reads under
  /// its lock anyway.
  func wait(whileValueIs seen: UInt32, until deadline: LoopClock.Instant?) throws(LoopError) {
    let deadlineNanoseconds = deadline.map { max(0, $0.nanoseconds) } ?? -1
    while true {
      if crl_futex_wait(word, seen, deadlineNanoseconds) == 0 { return }
      switch crl_errno() {
      case EINTR: continue
      case EAGAIN, ETIMEDOUT: return
      case let code:
        throw .system(
          SystemError(
            operation: "futex(FUTEX_WAIT_BITSET)", subject: "a loop's wake-up word", errno: code))
      }
    }
  }
}
