import Glibc

/// Starts `arguments[0]` with `posix_spawn` and returns its process ID; nothing reaps it but
/// the caller. The child starts with no signal blocked and every action at its default: a
/// blocked mask and ignored signals survive `exec`, and the spawning thread may be one of
/// Dispatch's (which block nearly every signal) or run under `nohup` (SIGHUP ignored).
func spawnWithDefaultSignals(_ arguments: [String]) throws -> pid_t {
  var pid: pid_t = 0
  var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
  defer { for pointer in argv { free(pointer) } }
  var attributes = posix_spawnattr_t()
  posix_spawnattr_init(&attributes)
  defer { posix_spawnattr_destroy(&attributes) }
  var none = sigset_t()
  sigemptyset(&none)
  posix_spawnattr_setsigmask(&attributes, &none)
  var all = sigset_t()
  sigfillset(&all)
  sigdelset(&all, SIGKILL)
  sigdelset(&all, SIGSTOP)
  posix_spawnattr_setsigdefault(&attributes, &all)
  posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
  let result = posix_spawn(&pid, arguments[0], nil, &attributes, &argv, environ)
  guard result == 0 else {
    throw DemoError("posix_spawn \(arguments[0]) failed: \(String(cString: strerror(result)))")
  }
  return pid
}
