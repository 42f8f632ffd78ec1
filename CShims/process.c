#define _GNU_SOURCE
#include "CRunLoopShims.h"

#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

// Child processes (ChildProcessSource): pidfd_open(2) and waitid(P_PIDFD), which Glibc does
// not import into Swift.

int crl_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

int crl_pidfd_wait(int pidfd, int options, int *code, int *status) {
  siginfo_t info;
  memset(&info, 0, sizeof info);
  if (waitid(P_PIDFD, (id_t)pidfd, &info, options) != 0) return -1;
  *code = info.si_code;
  *status = info.si_status;
  return info.si_pid;
}

// SpawnedProcess: posix_spawn with the file actions and attributes a child of a loop needs.
#include <signal.h>
#include <spawn.h>

int crl_spawn(pid_t *pid, const char *path, int search_path, char *const argv[],
              char *const envp[], const char *directory, const int stdio[3]) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  int result = posix_spawn_file_actions_init(&actions);
  if (result != 0) return result;
  result = posix_spawnattr_init(&attributes);
  if (result != 0) {
    posix_spawn_file_actions_destroy(&actions);
    return result;
  }
  // The three streams go through descriptors above every one given, so that giving the
  // child's stdout as fd 2 and its stderr as fd 1 (or any such crossing) cannot clobber one
  // with the other before it is placed.
  int above = 3;
  for (int i = 0; i < 3; i++) {
    if (stdio[i] >= above) above = stdio[i] + 1;
  }
  for (int i = 0; i < 3 && result == 0; i++) {
    if (stdio[i] >= 0) result = posix_spawn_file_actions_adddup2(&actions, stdio[i], above + i);
  }
  for (int i = 0; i < 3 && result == 0; i++) {
    if (stdio[i] >= 0) result = posix_spawn_file_actions_adddup2(&actions, above + i, i);
  }
  // Nothing of the parent's but the three streams: not the loop's epoll sets and eventfds,
  // nor a descriptor some other code opened without O_CLOEXEC.
  if (result == 0) result = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (result == 0 && directory != NULL) {
    result = posix_spawn_file_actions_addchdir_np(&actions, directory);
  }
  // No signal blocked and every disposition at its default: a blocked mask and ignored
  // signals survive exec, and the spawning thread may be a loop's or Dispatch's (which block
  // nearly every signal) or run under nohup (SIGHUP ignored).
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigdelset(&all, SIGSTOP);
  if (result == 0) result = posix_spawnattr_setsigmask(&attributes, &none);
  if (result == 0) result = posix_spawnattr_setsigdefault(&attributes, &all);
  if (result == 0) {
    result = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  // glibc's posix_spawn waits for the exec (CLONE_VFORK) and returns its errno when it fails.
  extern char **environ;
  char *const *environment = envp != NULL ? envp : environ;
  if (result == 0) {
    result = search_path ? posix_spawnp(pid, path, &actions, &attributes, argv, environment)
                         : posix_spawn(pid, path, &actions, &attributes, argv, environment);
  }
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  return result;
}

#include <fcntl.h>

int crl_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int crl_set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return -1;
  return fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

int crl_open_null(void) { return open("/dev/null", O_RDWR | O_CLOEXEC); }
