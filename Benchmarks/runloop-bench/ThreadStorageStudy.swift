import RunLoopKit

/// What a per-thread value costs: a counter read and written 2 000 000 times on a resident
/// thread, kept in `ThreadStorage` (by a typed key) and in a `LoopBoundBox`, in one job each
/// (the store, not the posting), back to back in alternating order, 7 rounds.
struct ThreadStorageResult: Codable {
  let accesses: Int
  /// Medians, nanoseconds per read and write.
  let storageNanoseconds: Double
  let boxNanoseconds: Double
  let rounds: [[Double]]
}

enum ThreadStorageStudy {
  static let accesses = 2_000_000
  private static let counter = ThreadStorageKey<Int>("bench counter")

  static func run(_ options: Options, progress: Progress) throws -> ThreadStorageResult {
    progress.note("thread storage: a counter in ThreadStorage and in a LoopBoundBox")
    let thread = try ResidentThread(name: "bench-storage")
    let box = try thread.performAndWait { LoopBoundBox(0, loop: thread.loop) }
    let count = options.quick ? accesses / 10 : accesses
    var rounds: [[Double]] = []
    for round in 0..<(options.quick ? 3 : 7) {
      var storage = 0.0
      var boxed = 0.0
      for storageSide in round % 2 == 0 ? [true, false] : [false, true] {
        let time = try thread.performAndWait { () -> Double in
          let start = LoopClock.Instant.now
          if storageSide {
            let store = ThreadStorage.current
            for _ in 0..<count { store[counter] = (store[counter] ?? 0) &+ 1 }
          } else {
            for _ in 0..<count { box.value = box.value &+ 1 }
          }
          let elapsed = start.duration(to: .now)
          return
            (Double(elapsed.components.seconds) * 1e9
            + Double(elapsed.components.attoseconds) / 1e9) / Double(count)
        }
        if storageSide { storage = time } else { boxed = time }
      }
      rounds.append([storage, boxed])
    }
    thread.stop()
    try thread.join()
    return ThreadStorageResult(
      accesses: count, storageNanoseconds: medianOf(rounds.map { $0[0] }),
      boxNanoseconds: medianOf(rounds.map { $0[1] }), rounds: rounds)
  }
}

extension Report {
  func printThreadStorage() {
    guard let threadStorage else { return }
    print(
      "\nThread-bound values: a counter read and written \(threadStorage.accesses) times on a "
        + "resident thread (median of \(threadStorage.rounds.count) rounds)\n")
    print(
      "  ThreadStorage (typed key)  \(formatNanoseconds(threadStorage.storageNanoseconds))"
        + "   LoopBoundBox  \(formatNanoseconds(threadStorage.boxNanoseconds))"
        + "   ratio  \(fixed(threadStorage.storageNanoseconds / threadStorage.boxNanoseconds, 2))×")
  }
}
