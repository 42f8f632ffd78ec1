import Glibc

// GLib and RunLoopKit in both directions. Exits with status 1 if any check failed.
print("(a) GLib's main loop hosts Loop.main")
var failures = try LoopMainInGLib().run()
print("(b) a RunLoopKit loop drives a GMainContext")
failures += try GLibInLoop().run()
for failure in failures { print("FAILED: \(failure)") }
print(
  failures.isEmpty
    ? "glib-example: all checks passed" : "glib-example: \(failures.count) checks failed")
exit(failures.isEmpty ? 0 : 1)
