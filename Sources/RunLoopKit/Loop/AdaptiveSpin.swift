/// What the `.adaptive` wait policy remembers: the gaps between the loop starting to wait and
/// work arriving, over the last few waits, and whether its recent spins found anything.
///
/// Spinning pays off only when work arrives within the window: then the loop answers in about
/// a microsecond instead of a kernel wake, and the poster makes no syscall. When work arrives
/// later, the spin is pure cost (CPU, and the wake still happens). So the policy spins only
/// when most recent gaps were short, for about twice the typical one, and backs off
/// exponentially after a spin that found nothing: a poster that shares the loop's CPU cannot
/// post while the loop spins, and such spins always miss. Nothing here is for the user to
/// tune: the bounds below are where a spin stops paying for itself on the machines measured
/// (a sleeping wake costs 3–5 µs on the same CPU and 15–30 µs across CPUs there).
///
/// Used by the loop's own thread only, while it waits.
struct AdaptiveSpin {
  /// Longer gaps are slept through: spinning for them costs more CPU than a wake-up does.
  static let longestWindow: Int64 = 25_000
  /// A shorter window would end before a spin could see a post made "at once".
  static let shortestWindow: Int64 = 1_000
  /// Spins skipped at most after misses in a row (64 waits).
  static let longestBackoff = 64

  /// The last gaps, in nanoseconds; "very long" until measured, so a new loop sleeps.
  private var gaps = [Int64](repeating: .max, count: 8)
  private var nextGap = 0
  /// Waits to sleep through before spinning again, and how many the next miss will add.
  private var skip = 0
  private var backoff = 1

  /// The window to spin for before this wait sleeps, or nil to sleep at once.
  mutating func window() -> Duration? {
    if skip > 0 {
      skip -= 1
      return nil
    }
    // The 75th percentile of eight: most recent gaps, not just the median, must be short.
    let typical = gaps.sorted()[5]
    guard typical <= AdaptiveSpin.longestWindow else { return nil }
    let window = min(max(2 * typical, AdaptiveSpin.shortestWindow), AdaptiveSpin.longestWindow)
    return .nanoseconds(window)
  }

  /// Notes how long this wait took for work to arrive.
  mutating func record(gap: Duration) {
    gaps[nextGap] = max(0, gap.saturatedNanoseconds)
    nextGap = (nextGap + 1) % gaps.count
  }

  /// Notes whether a spin found work; a miss skips the next spins, more after each miss.
  mutating func spinEnded(found: Bool) {
    if found {
      backoff = 1
    } else {
      skip = backoff
      backoff = min(backoff * 2, AdaptiveSpin.longestBackoff)
    }
  }
}
