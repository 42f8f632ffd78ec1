#define _GNU_SOURCE
#include "CRunLoopShims.h"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int crl_errno(void) { return errno; }
void crl_set_errno(int value) { errno = value; }

int crl_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int crl_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
  struct epoll_event event;
  memset(&event, 0, sizeof event);
  event.events = events;
  event.data.u64 = data;
  return epoll_ctl(epfd, op, fd, &event);
}

// 0 = not probed yet, 1 = epoll_pwait2 works, -1 = kernel lacks it.
static int pwait2_state = 0;

// NULL for a negative time (no timeout), else `ts` filled from nanoseconds.
static struct timespec *timespec_from_ns(int64_t ns, struct timespec *ts) {
  if (ns < 0) return NULL;
  ts->tv_sec = ns / 1000000000;
  ts->tv_nsec = ns % 1000000000;
  return ts;
}

int crl_epoll_wait(int epfd, struct epoll_event *events, int max_events, int64_t timeout_ns) {
#ifdef SYS_epoll_pwait2
  if (__atomic_load_n(&pwait2_state, __ATOMIC_RELAXED) >= 0) {
    struct timespec ts;
    struct timespec *tsp = timespec_from_ns(timeout_ns, &ts);
    int n = (int)syscall(SYS_epoll_pwait2, epfd, events, max_events, tsp, NULL, 0);
    // Kernels before 5.11 answer ENOSYS; some seccomp filters answer EPERM for syscalls they
    // do not know. Either way, on the first call only, fall back to epoll_wait for good.
    int unsupported = n < 0 && (errno == ENOSYS || errno == EPERM);
    if (!unsupported || __atomic_load_n(&pwait2_state, __ATOMIC_RELAXED) == 1) {
      __atomic_store_n(&pwait2_state, 1, __ATOMIC_RELAXED);
      return n;
    }
    __atomic_store_n(&pwait2_state, -1, __ATOMIC_RELAXED);
  }
#endif
  int timeout_ms = -1;
  if (timeout_ns >= 0) {
    int64_t ms = (timeout_ns + 999999) / 1000000;  // round up: never wake before the deadline
    timeout_ms = ms > 0x7fffffff ? 0x7fffffff : (int)ms;
  }
  return epoll_wait(epfd, events, max_events, timeout_ms);
}

uint64_t crl_epoll_event_data(const struct epoll_event *event) { return event->data.u64; }
uint32_t crl_epoll_event_events(const struct epoll_event *event) { return event->events; }

int crl_eventfd_create(unsigned int initial) { return eventfd(initial, EFD_NONBLOCK | EFD_CLOEXEC); }

int crl_eventfd_write(int fd, uint64_t value) {
  ssize_t n = write(fd, &value, sizeof value);
  return n == (ssize_t)sizeof value ? 0 : -1;
}

int crl_eventfd_read(int fd, uint64_t *value) {
  ssize_t n = read(fd, value, sizeof *value);
  return n == (ssize_t)sizeof *value ? 0 : -1;
}

int crl_timerfd_create(void) { return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC); }

int crl_timerfd_arm_absolute(int fd, int64_t deadline_ns) {
  struct itimerspec spec;
  memset(&spec, 0, sizeof spec);
  if (deadline_ns > 0) {
    spec.it_value.tv_sec = deadline_ns / 1000000000;
    spec.it_value.tv_nsec = deadline_ns % 1000000000;
  }
  return timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, NULL);
}

int crl_timerfd_read(int fd, uint64_t *expirations) {
  ssize_t n = read(fd, expirations, sizeof *expirations);
  return n == (ssize_t)sizeof *expirations ? 0 : -1;
}

int64_t crl_monotonic_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

pid_t crl_gettid(void) { return (pid_t)syscall(SYS_gettid); }

int crl_is_main_thread(void) { return crl_gettid() == getpid(); }

static pthread_t main_thread;

__attribute__((constructor)) static void crl_record_main_thread(void) { main_thread = pthread_self(); }

pthread_t crl_main_thread(void) { return main_thread; }

__thread char crl_thread_marker_byte;

int crl_set_thread_name(const char *name) { return pthread_setname_np(pthread_self(), name); }

int crl_get_thread_name(pthread_t thread, char *buffer, size_t size) {
  return pthread_getname_np(thread, buffer, size);
}

int crl_set_thread_affinity(const int *cpus, int count) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i = 0; i < count; i++) {
    if (cpus[i] < 0 || cpus[i] >= CPU_SETSIZE) {
      errno = EINVAL;
      return -1;
    }
    CPU_SET(cpus[i], &set);
  }
  return sched_setaffinity(0, sizeof set, &set);
}

int crl_set_thread_niceness(int niceness) {
  return setpriority(PRIO_PROCESS, (id_t)crl_gettid(), niceness);
}

int crl_thread_create(pthread_t *thread, size_t stack_size, void *(*start)(void *), void *arg) {
  pthread_attr_t attr;
  int result = pthread_attr_init(&attr);
  if (result != 0) return result;
  if (stack_size > 0) result = pthread_attr_setstacksize(&attr, stack_size);
  if (result == 0) result = pthread_create(thread, &attr, start, arg);
  pthread_attr_destroy(&attr);
  return result;
}

long crl_page_size(void) { return sysconf(_SC_PAGESIZE); }

long crl_stack_minimum(void) {
  long value = sysconf(_SC_THREAD_STACK_MIN);
  return value > 0 ? value : 16384;
}

// MARK: futex

uint32_t crl_futex_load(const uint32_t *word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

void crl_futex_increment(uint32_t *word) { __atomic_fetch_add(word, 1, __ATOMIC_RELEASE); }

int crl_futex_wait(uint32_t *word, uint32_t expected, int64_t deadline_ns) {
  struct timespec ts;
  struct timespec *tsp = timespec_from_ns(deadline_ns, &ts);
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time (plain FUTEX_WAIT a relative one),
  // so a wait restarted after EINTR keeps the same deadline.
  return (int)syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, expected, tsp, NULL,
                      FUTEX_BITSET_MATCH_ANY);
}

int crl_futex_wake(uint32_t *word, int count) {
  return (int)syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

// ---------------------------------------------------------------------------------------------
// Signals (SignalSource). The process-wide handler below is the only code that runs inside a
// signal handler, so it is written in C and does only async-signal-safe things: atomic loads
// and adds on static memory, write(2) to eventfds, and a call to the handler that was there
// before. Which slot belongs to whom, and when to install or restore a disposition, is decided
// in Swift under a lock (SignalRegistry.swift).

struct crl_signal_slot {
  _Atomic int signo;  // 0 = free
  _Atomic int fd;
  _Atomic uint64_t count;
};

static struct crl_signal_slot crl_signal_slots[CRL_SIGNAL_SLOTS];
// Handlers between their first and last look at the slots; a slot is reused only at zero.
static _Atomic int crl_signal_handlers_running;
// The disposition found when the first source of a signal was added, for chaining and
// restoring.
static struct sigaction crl_signal_previous[CRL_SIGNAL_LIMIT];
static _Atomic(void *) crl_signal_chain[CRL_SIGNAL_LIMIT];
static _Atomic int crl_signal_chain_siginfo[CRL_SIGNAL_LIMIT];

static void crl_signal_handler(int signo, siginfo_t *info, void *context) {
  int saved_errno = errno;
  atomic_fetch_add(&crl_signal_handlers_running, 1);
  for (int i = 0; i < CRL_SIGNAL_SLOTS; i++) {
    struct crl_signal_slot *slot = &crl_signal_slots[i];
    if (atomic_load(&slot->signo) != signo) continue;
    atomic_fetch_add(&slot->count, 1);
    uint64_t one = 1;
    ssize_t written;
    do {
      written = write(atomic_load(&slot->fd), &one, sizeof one);
    } while (written < 0 && errno == EINTR);
  }
  void *chain = NULL;
  int chain_siginfo = 0;
  if (signo > 0 && signo < CRL_SIGNAL_LIMIT) {
    chain = atomic_load(&crl_signal_chain[signo]);
    chain_siginfo = atomic_load(&crl_signal_chain_siginfo[signo]);
  }
  atomic_fetch_sub(&crl_signal_handlers_running, 1);
  // Outside the counted part: a chained handler may never return (siglongjmp).
  if (chain != NULL) {
    if (chain_siginfo) {
      ((void (*)(int, siginfo_t *, void *))chain)(signo, info, context);
    } else {
      ((void (*)(int))chain)(signo);
    }
  }
  errno = saved_errno;
}

void crl_signal_slot_set(int slot, int signo, int fd) {
  atomic_store(&crl_signal_slots[slot].count, 0);
  atomic_store(&crl_signal_slots[slot].fd, fd);
  atomic_store(&crl_signal_slots[slot].signo, signo);
}

uint64_t crl_signal_slot_take(int slot) {
  return atomic_exchange(&crl_signal_slots[slot].count, 0);
}

uint64_t crl_signal_slot_clear(int slot) {
  atomic_store(&crl_signal_slots[slot].signo, 0);
  // A handler that saw the old number may still be writing to the fd: wait until every
  // handler that started before the store has left, so the caller may close the fd.
  while (atomic_load(&crl_signal_handlers_running) != 0) sched_yield();
  return atomic_exchange(&crl_signal_slots[slot].count, 0);
}

int crl_signal_install(int signo) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crl_signal_handler;
  action.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  struct sigaction previous;
  if (sigaction(signo, &action, &previous) != 0) return -1;
  crl_signal_previous[signo] = previous;
  void *chain = NULL;
  int siginfo = (previous.sa_flags & SA_SIGINFO) != 0;
  if (siginfo) {
    chain = (void *)previous.sa_sigaction;
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    chain = (void *)previous.sa_handler;
  }
  atomic_store(&crl_signal_chain_siginfo[signo], siginfo);
  atomic_store(&crl_signal_chain[signo], chain);
  return 0;
}

int crl_signal_restore(int signo) {
  struct sigaction current;
  if (sigaction(signo, NULL, &current) != 0) return -1;
  int ours = (current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == crl_signal_handler;
  // Someone installed a handler after ours: it is theirs now, leave it.
  if (!ours) return 1;
  if (sigaction(signo, &crl_signal_previous[signo], NULL) != 0) return -1;
  atomic_store(&crl_signal_chain[signo], NULL);
  return 0;
}

int crl_signal_disposition(int signo) {
  struct sigaction current;
  if (sigaction(signo, NULL, &current) != 0) return -1;
  if ((current.sa_flags & SA_SIGINFO) != 0) {
    return current.sa_sigaction == crl_signal_handler ? 3 : 2;
  }
  if (current.sa_handler == SIG_DFL) return 0;
  if (current.sa_handler == SIG_IGN) return 1;
  return 2;
}

int crl_signal_min_realtime(void) { return SIGRTMIN; }
int crl_signal_max_realtime(void) { return SIGRTMAX; }

// ---------------------------------------------------------------------------------------------
// Child processes (ChildProcessSource)

int crl_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

int crl_pidfd_wait(int pidfd, int options, int *code, int *status) {
  siginfo_t info;
  memset(&info, 0, sizeof info);
  if (waitid(P_PIDFD, (id_t)pidfd, &info, options) != 0) return -1;
  *code = info.si_code;
  *status = info.si_status;
  return info.si_pid;
}
