// swift-tools-version:6.3
import PackageDescription

let package = Package(
  name: "RunLoopKit",
  products: [
    .library(name: "RunLoopKit", targets: ["RunLoopKit"]),
    // Opt-in: Task.sleep on loop timers and Loop.main as the program's main executor. Uses
    // experimental _Concurrency interfaces (SPI), so it is kept out of the main product.
    .library(name: "RunLoopKitExecutors", targets: ["RunLoopKitExecutors"]),
    .executable(name: "runloop-demo", targets: ["runloop-demo"]),
    .executable(name: "runloop-bench", targets: ["runloop-bench"]),
    .executable(name: "loop-main-example", targets: ["loop-main-example"]),
  ],
  targets: [
    // The kernel interfaces Glibc does not import: epoll, eventfd, timerfd, thread helpers
    // (shims.c), the signal handler and its catcher thread (signals.c), pidfds (process.c).
    .target(name: "CRunLoopShims", path: "CShims"),
    .target(
      name: "RunLoopKit",
      dependencies: ["CRunLoopShims"],
      path: "Sources/RunLoopKit"
    ),
    .target(
      name: "RunLoopKitExecutors",
      dependencies: ["RunLoopKit"],
      path: "Sources/RunLoopKitExecutors"
    ),
    // Probes the tests and the benchmark share: a counter of jobs on Swift's global executor.
    .target(
      name: "RunLoopKitProbes",
      dependencies: ["CRunLoopShims"],
      path: "Sources/RunLoopKitProbes"
    ),
    // The demo's scenarios, in a library so the tests can check what each one traces.
    .target(
      name: "RunLoopDemos",
      dependencies: ["RunLoopKit", "RunLoopKitExecutors", "CRunLoopShims"],
      path: "Sources/RunLoopDemos"
    ),
    .executableTarget(
      name: "runloop-demo",
      dependencies: ["RunLoopDemos", "RunLoopKit"],
      path: "Sources/runloop-demo"
    ),
    // A program whose main executor is Loop.main. The flag makes Swift 6.3 honour its
    // `typealias DefaultExecutorFactory` (see SwiftConcurrency.md in the DocC catalogue); only this example needs it.
    .executableTarget(
      name: "loop-main-example",
      dependencies: ["RunLoopKitExecutors", "RunLoopKit"],
      path: "Examples/loop-main",
      swiftSettings: [.unsafeFlags(["-Xfrontend", "-disable-availability-checking"])]
    ),
    // The C floors the benchmark measures against (eventfd+epoll, condvar, spinning).
    .target(name: "CBenchBaselines", path: "Benchmarks/CBaselines"),
    .executableTarget(
      name: "runloop-bench",
      dependencies: [
        "RunLoopKit", "RunLoopKitExecutors", "RunLoopKitProbes", "CBenchBaselines", "CRunLoopShims",
      ],
      path: "Benchmarks/runloop-bench"
    ),
    .testTarget(
      name: "RunLoopKitTests",
      dependencies: [
        "RunLoopKit", "RunLoopKitExecutors", "RunLoopDemos", "RunLoopKitProbes", "CRunLoopShims",
      ],
      path: "Tests/RunLoopKitTests"
    ),
    // The opt-in product's XCTest cases, which drive LoopMainExecutor on the real main thread
    // (XCTest runs them there). Its Swift Testing suites live in RunLoopKitTests/Executors,
    // inside the one serialized suite. On Linux every test target links into one test binary.
    .testTarget(
      name: "RunLoopKitExecutorsTests",
      dependencies: ["RunLoopKitExecutors", "RunLoopKit", "CRunLoopShims"],
      path: "Tests/RunLoopKitExecutorsTests"
    ),
  ],
  swiftLanguageModes: [.v6]
)
