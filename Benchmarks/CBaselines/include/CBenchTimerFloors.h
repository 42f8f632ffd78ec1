// CBenchTimerFloors: what the kernel itself gives a thread that waits for a 1 ms grid, the
// floor runloop-bench measures LoopTimer's lateness against, and the timer slack behind it.
#ifndef CBENCHTIMERFLOORS_H
#define CBENCHTIMERFLOORS_H

#include <stdint.h>

/// Sets the calling thread's timer slack (prctl PR_SET_TIMERSLACK), in ns; returns 0 or errno.
/// Linux's own default is 50 000 ns; a new thread starts with its creator's current slack.
int crb_set_timer_slack(int64_t ns);

/// The calling thread's timer slack in ns (prctl PR_GET_TIMERSLACK).
int64_t crb_timer_slack(void);

/// The C floor: a timerfd repeating every `period_ns` in an epoll set, `epoll_wait(-1)` on it,
/// as a C event loop's repeating timer. samples[i] = how long after its grid point the wait
/// returned for the i-th expiry (an overrun counts from the latest grid point it covers).
/// Runs on the calling thread. Returns 0 or an errno.
int crb_timerfd_lateness(int64_t *samples, int count, int64_t period_ns);

/// The same grid slept for with FUTEX_WAIT_BITSET at absolute deadlines (how a loop whose
/// mode has no descriptor sleeps): stretched by the thread's timer slack, as a timerfd is not.
int crb_futex_lateness(int64_t *samples, int count, int64_t period_ns);

#endif
