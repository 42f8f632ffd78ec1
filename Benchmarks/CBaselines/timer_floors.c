// The kernel's own lateness for a 1 ms grid: a repeating timerfd woken through epoll (the
// floor), and a futex sleep with an absolute deadline (stretched by the thread's timer slack).
#define _GNU_SOURCE
#include "CBenchTimerFloors.h"
#include "CBenchBaselines.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

int crb_set_timer_slack(int64_t ns) {
  return prctl(PR_SET_TIMERSLACK, (unsigned long)ns, 0, 0, 0) == 0 ? 0 : errno;
}

int64_t crb_timer_slack(void) { return (int64_t)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0); }

static struct timespec timespec_of(int64_t ns) {
  struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
  return ts;
}

int crb_timerfd_lateness(int64_t *samples, int count, int64_t period_ns) {
  int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (timer < 0) return errno;
  int epoll = epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) {
    int error = errno;
    close(timer);
    return error;
  }
  struct epoll_event event = {.events = EPOLLIN};
  int error = 0;
  if (epoll_ctl(epoll, EPOLL_CTL_ADD, timer, &event) != 0) error = errno;
  int64_t start = crb_now_ns() + period_ns;
  struct itimerspec spec = {.it_interval = timespec_of(period_ns), .it_value = timespec_of(start)};
  if (error == 0 && timerfd_settime(timer, TFD_TIMER_ABSTIME, &spec, NULL) != 0) error = errno;
  int64_t expiries = 0;
  for (int i = 0; i < count && error == 0;) {
    struct epoll_event ready;
    int n = epoll_wait(epoll, &ready, 1, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = errno;
      break;
    }
    uint64_t expired = 0;
    if (read(timer, &expired, sizeof expired) != sizeof expired) continue;
    int64_t now = crb_now_ns();
    expiries += (int64_t)expired;
    samples[i++] = now - (start + (expiries - 1) * period_ns);
  }
  close(epoll);
  close(timer);
  return error;
}

int crb_futex_lateness(int64_t *samples, int count, int64_t period_ns) {
  uint32_t word = 0;
  int64_t deadline = crb_now_ns() + period_ns;
  for (int i = 0; i < count; i++) {
    struct timespec ts = timespec_of(deadline);
    while (syscall(SYS_futex, &word, FUTEX_WAIT_BITSET_PRIVATE, 0, &ts, NULL,
                   FUTEX_BITSET_MATCH_ANY) != 0 &&
           errno == EINTR) {
    }
    int64_t now = crb_now_ns();
    samples[i] = now - deadline;
    // The next grid point after now: an overrun skips points, as a repeating timer does.
    do deadline += period_ns;
    while (deadline <= now);
  }
  return 0;
}
