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
