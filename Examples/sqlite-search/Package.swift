// swift-tools-version:6.3
// SQLite confined to a resident thread, searched as you type from Loop.main.
// Needs SQLite's headers: `apt-get install libsqlite3-dev` on Debian and Ubuntu.
import PackageDescription

let package = Package(
  name: "sqlite-search",
  dependencies: [.package(name: "RunLoopKit", path: "../..")],
  targets: [
    .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    .executableTarget(
      name: "sqlite-search",
      dependencies: ["CSQLite", .product(name: "RunLoopKit", package: "RunLoopKit")]),
  ],
  swiftLanguageModes: [.v6]
)
