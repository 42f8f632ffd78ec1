// swift-tools-version:6.1
import PackageDescription

let package = Package(
  name: "RunLoopKit",
  products: [
    .library(name: "RunLoopKit", targets: ["RunLoopKit"]),
    .executable(name: "runloop-demo", targets: ["runloop-demo"]),
    .executable(name: "runloop-bench", targets: ["runloop-bench"]),
  ],
  targets: [
    // The kernel interfaces Glibc does not import: epoll, eventfd, timerfd, thread helpers.
    .target(name: "CRunLoopShims", path: "CShims"),
    .target(
      name: "RunLoopKit",
      dependencies: ["CRunLoopShims"],
      path: "Sources/RunLoopKit"
    ),
    // The demo's scenarios, in a library so the tests can check what each one traces.
    .target(
      name: "RunLoopDemos",
      dependencies: ["RunLoopKit"],
      path: "Sources/RunLoopDemos"
    ),
    .executableTarget(
      name: "runloop-demo",
      dependencies: ["RunLoopDemos", "RunLoopKit"],
      path: "Sources/runloop-demo"
    ),
    // The C floors the benchmark measures against (eventfd+epoll, condvar, spinning).
    .target(name: "CBenchBaselines", path: "Benchmarks/CBaselines"),
    .executableTarget(
      name: "runloop-bench",
      dependencies: ["RunLoopKit", "CBenchBaselines", "CRunLoopShims"],
      path: "Benchmarks/runloop-bench"
    ),
    .testTarget(
      name: "RunLoopKitTests",
      dependencies: ["RunLoopKit", "RunLoopDemos", "CRunLoopShims"],
      path: "Tests/RunLoopKitTests"
    ),
  ],
  swiftLanguageModes: [.v6]
)
