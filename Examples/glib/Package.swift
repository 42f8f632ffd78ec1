// swift-tools-version:6.3
// GLib and RunLoopKit in both directions: GLib's main loop hosting Loop.main (so DispatchQueue.main
// and @MainActor run in a GLib program), and a RunLoopKit loop driving a GMainContext.
// Needs glib-2.0's headers: `apt-get install libglib2.0-dev` on Debian and Ubuntu.
import PackageDescription

let package = Package(
  name: "glib-example",
  dependencies: [.package(name: "RunLoopKit", path: "../..")],
  targets: [
    .systemLibrary(
      name: "CGLib", pkgConfig: "glib-2.0", providers: [.apt(["libglib2.0-dev"])]),
    .executableTarget(
      name: "glib-example",
      dependencies: ["CGLib", .product(name: "RunLoopKit", package: "RunLoopKit")]),
  ],
  swiftLanguageModes: [.v6]
)
