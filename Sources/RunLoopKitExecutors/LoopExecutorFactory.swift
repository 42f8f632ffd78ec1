// Experimental toolchain interface: `ExecutorFactory`, behind
// `@_spi(ExperimentalCustomExecutors)` in `_Concurrency`. Checked on Swift 6.3.1.
@_spi(ExperimentalCustomExecutors) import _Concurrency

/// Makes `Loop.main` the program's main executor. A program opts in from its main module:
///
/// ```swift
/// import RunLoopKitExecutors
/// typealias DefaultExecutorFactory = LoopExecutorFactory
/// ```
///
/// and builds its executable with `-Xfrontend -disable-availability-checking` (see the
/// article *Swift concurrency on a run loop*: without it the compiler ignores the typealias;
/// `LoopExecutorFactory.isInstalled` tells at run time).
///
/// - Main executor: `LoopMainExecutor.shared` — `@MainActor` code runs in `Loop.main`, which
///   also serves `DispatchQueue.main`.
/// - Default executor: the platform's (Dispatch's global concurrent pool), unchanged.
///   Non-isolated async code and task groups expect a pool that can run several jobs at
///   once and can block a worker without stalling the program; one loop thread offers
///   neither. Code that wants a loop says so with `withTaskExecutorPreference(loop.executor)`
///   or an actor pinned to a loop.
public struct LoopExecutorFactory {
  /// True when the running program's main actor runs on `LoopMainExecutor`, i.e. the
  /// compiler honoured `typealias DefaultExecutorFactory = LoopExecutorFactory`.
  public static var isInstalled: Bool { MainActor.executor is LoopMainExecutor }

  /// Traps with a message saying what to change when the factory is not installed. Call it
  /// first thing in `main` so a build without the flag fails loudly instead of running
  /// `@MainActor` code on Dispatch's main queue.
  public static func requireInstalled() {
    precondition(
      isInstalled,
      "RunLoopKitExecutors: `typealias DefaultExecutorFactory = LoopExecutorFactory` was "
        + "ignored, so the main actor runs on \(type(of: MainActor.executor)), not Loop.main. "
        + "Swift 6.3 only honours the typealias when the executable is built with "
        + "-Xfrontend -disable-availability-checking (in Package.swift: swiftSettings: "
        + "[.unsafeFlags([\"-Xfrontend\", \"-disable-availability-checking\"])]).")
  }
}

@_spi(ExperimentalCustomExecutors) extension LoopExecutorFactory: ExecutorFactory {
  public static var mainExecutor: any MainExecutor { LoopMainExecutor.shared }
  public static var defaultExecutor: any TaskExecutor { PlatformExecutorFactory.defaultExecutor }
}
