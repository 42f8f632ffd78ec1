extension Loop {
  /// A block waiting in the loop's queue for a mode it may run in (`perform`). Mirrors the
  /// block list CF keeps for `CFRunLoopPerformBlock`.
  struct QueuedBlock {
    /// Which modes may run it. One mode needs no array, so the common case allocates nothing,
    /// and the two modes nearly every block names have cases of their own, so queuing and
    /// running such a block copies no mode name (a String's retain and release each time).
    enum Modes {
      case common
      case defaultMode
      case one(Mode)
      case list([Mode])
      /// Whatever mode the loop runs next (the resident thread's stop block).
      case any
      /// An executor job: runs in the common modes like `.common`, but never from a run
      /// nested inside another job (see `Loop.enqueueJob`). A `LoopExecutor` job is carried
      /// here, in the payload room the mode cases have anyway, and run by the loop itself
      /// (`run(on:)`): no closure, so queuing one allocates nothing (a closure context cost
      /// two allocations per job), and the block stays 40 bytes. Other executors' jobs (a
      /// group's, the main executor's) come as a closure, with no job here.
      case executorJob(UnownedJob?)

      init(_ mode: Mode) {
        switch mode.predefined {
        case .defaultMode: self = .defaultMode
        case .common: self = .common
        case .none: self = .one(mode)
        }
      }

      /// A list of one mode is that mode's case, which queuing and running read faster.
      init(_ modes: [Mode]) {
        self = modes.count == 1 ? Modes(modes[0]) : .list(modes)
      }

      /// Whether a block for these modes runs in a drain for `target`. Borrowed in place: a
      /// drain asks it of every block it took.
      func applies(to target: Target) -> Bool {
        switch self {
        case .common, .executorJob: return target.isCommon
        case .defaultMode: return target.isDefault
        case .one(let wanted): return target.matches(wanted)
        case .list(let wanted): return wanted.contains(where: target.matches)
        case .any: return true
        }
      }
    }
    let modes: Modes
    /// `modes` in one byte for the common cases: a drain asks every block it took whether it
    /// applies, and reading the enum (whose payload holds a String) copies it through an
    /// outlined function, ~30 instructions a block.
    let simpleModes: SimpleModes
    /// Empty for a `LoopExecutor` job (`Modes.executorJob`), which needs no context.
    let block: () -> Void

    enum SimpleModes: UInt8 {
      /// `.common`, or an executor job that came as a closure.
      case common
      /// A `LoopExecutor` job carried in `modes` (applies like `.common`).
      case loopExecutorJob
      case defaultMode
      case any
      /// Named modes: ask `modes`.
      case named
    }

    init(modes: Modes, block: @escaping () -> Void) {
      self.modes = modes
      switch modes {
      case .common, .executorJob: simpleModes = .common
      case .defaultMode: simpleModes = .defaultMode
      case .any: simpleModes = .any
      case .one, .list: simpleModes = .named
      }
      self.block = block
    }

    /// A job for this loop's own executor (`Loop.executor`).
    init(job: UnownedJob) {
      modes = .executorJob(job)
      simpleModes = .loopExecutorJob
      block = {}
    }

    /// Runs the block, or the executor job as `loop`'s running job.
    @inline(__always)
    func run(on loop: Loop) {
      // `modes` is read only for a job: asking every block for it would copy its payload
      // through an outlined function (see `simpleModes`).
      if simpleModes == .loopExecutorJob, case .executorJob(let job?) = modes {
        loop.runExecutorJob(job)
      } else {
        block()
      }
    }

    /// What a drain asks of every block: worked out once per drain, so the two common cases
    /// compare no mode names per block.
    struct Target: Equatable {
      let mode: Mode
      let isDefault: Bool
      let isCommon: Bool

      init(_ mode: Mode, commonModes: [Mode]) {
        // `.default` is in the common set from the start and never leaves it.
        self.init(
          mode, isCommon: mode.predefined == .defaultMode || commonModes.contains(mode))
      }

      init(_ mode: Mode, isCommon: Bool) {
        self.mode = mode
        isDefault = mode.predefined == .defaultMode
        self.isCommon = isCommon
      }

      func matches(_ wanted: Mode) -> Bool {
        wanted == mode || (isCommon && wanted == .common)
      }
    }

    @inline(__always)
    func applies(to target: Target) -> Bool {
      switch simpleModes {
      case .common, .loopExecutorJob: return target.isCommon
      case .defaultMode: return target.isDefault
      case .any: return true
      case .named: return modes.applies(to: target)
      }
    }

    var isExecutorJob: Bool {
      if case .executorJob = modes { return true }
      return false
    }
  }
}
