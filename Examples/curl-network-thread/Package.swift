// swift-tools-version:6.3
// A network thread the Linux way: libcurl's multi_socket interface driven by a resident thread's
// loop (a DescriptorSource per socket, one re-armed LoopTimer), checked against a local HTTP
// server, and side by side with the same program on a bare epoll loop in C.
// Needs libcurl's headers: `apt-get install libcurl4-openssl-dev` on Debian and Ubuntu.
import PackageDescription

let package = Package(
  name: "curl-network-thread",
  dependencies: [.package(name: "RunLoopKit", path: "../..")],
  targets: [
    // curl's setopt and getinfo calls are variadic, which Swift cannot call: typed wrappers,
    // and the bare-epoll C version of the example, for the CPU comparison.
    .target(name: "CCurl", linkerSettings: [.linkedLibrary("curl")]),
    // The local HTTP server the example starts and stops (its own process, so its CPU is not
    // the client's).
    .executableTarget(name: "http-fixture", linkerSettings: [.linkedLibrary("pthread")]),
    .executableTarget(
      name: "curl-network-thread",
      dependencies: ["CCurl", .product(name: "RunLoopKit", package: "RunLoopKit")]),
  ],
  swiftLanguageModes: [.v6]
)
