#define _GNU_SOURCE
#include "CRunLoopShims.h"

#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
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
  // A look (no timeout) needs no precision: the plain call, as cheap as a syscall gets.
  if (timeout_ns == 0) return epoll_wait(epfd, events, max_events, 0);
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

int crl_epoll_timeouts_are_precise(void) {
#ifdef SYS_epoll_pwait2
  if (__atomic_load_n(&pwait2_state, __ATOMIC_RELAXED) == 0) {
    // Probed on a descriptor that cannot exist: a kernel that has the call answers EBADF.
    struct timespec zero = {0, 0};
    int n = (int)syscall(SYS_epoll_pwait2, -1, NULL, 1, &zero, NULL, 0);
    int unsupported = n < 0 && (errno == ENOSYS || errno == EPERM);
    int expected = 0;
    __atomic_compare_exchange_n(&pwait2_state, &expected, unsupported ? -1 : 1, 0,
                                __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  }
  return __atomic_load_n(&pwait2_state, __ATOMIC_RELAXED) == 1;
#else
  return 0;
#endif
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

int crl_set_timer_slack(unsigned long nanoseconds) {
  return prctl(PR_SET_TIMERSLACK, nanoseconds, 0, 0, 0);
}

long crl_get_timer_slack(void) { return (long)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0); }
