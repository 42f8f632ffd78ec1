// CRunLoopShims: the Linux kernel interfaces RunLoopKit needs that Glibc does not import
// into Swift, plus a few thread helpers. Every function here is a thin pass-through: the
// Swift layer (Syscall.swift) turns -1/errno into thrown errors and retries EINTR.
#ifndef CRUNLOOPSHIMS_H
#define CRUNLOOPSHIMS_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <time.h>

/// errno of the calling thread (Swift cannot read the macro directly).
int crl_errno(void);
void crl_set_errno(int value);

/// epoll
int crl_epoll_create(void);
int crl_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data);
/// Waits with nanosecond resolution (epoll_pwait2); timeout_ns < 0 waits forever.
/// Falls back to epoll_wait with the timeout rounded up to whole milliseconds on kernels
/// without epoll_pwait2.
int crl_epoll_wait(int epfd, struct epoll_event *events, int max_events, int64_t timeout_ns);
uint64_t crl_epoll_event_data(const struct epoll_event *event);
uint32_t crl_epoll_event_events(const struct epoll_event *event);

/// eventfd (non-blocking, close-on-exec)
int crl_eventfd_create(unsigned int initial);
int crl_eventfd_write(int fd, uint64_t value);
/// Returns 0 and stores the counter, or -1 with errno (EAGAIN when it was zero).
int crl_eventfd_read(int fd, uint64_t *value);

/// timerfd on CLOCK_MONOTONIC (non-blocking, close-on-exec)
int crl_timerfd_create(void);
/// Arms at an absolute CLOCK_MONOTONIC time in nanoseconds; 0 disarms.
int crl_timerfd_arm_absolute(int fd, int64_t deadline_ns);
/// Returns 0 and stores the expiry count, or -1 with errno (EAGAIN when not expired).
int crl_timerfd_read(int fd, uint64_t *expirations);

/// CLOCK_MONOTONIC in nanoseconds.
int64_t crl_monotonic_now_ns(void);

/// futex on a process-private 32-bit word, with atomic access to the word (Swift's Atomic
/// has no stable address to hand the kernel). The word must be 4-byte aligned.
uint32_t crl_futex_load(const uint32_t *word);
/// Adds one (wrapping) with release ordering.
void crl_futex_increment(uint32_t *word);
/// FUTEX_WAIT_BITSET: sleeps while *word == expected, until woken or until the absolute
/// CLOCK_MONOTONIC `deadline_ns` (< 0: no deadline). Returns 0 when woken, or -1 with errno:
/// EAGAIN (the word had changed), ETIMEDOUT, EINTR.
int crl_futex_wait(uint32_t *word, uint32_t expected, int64_t deadline_ns);
/// FUTEX_WAKE: wakes up to `count` waiters; returns how many, or -1 with errno.
int crl_futex_wake(uint32_t *word, int count);

/// Threads
pid_t crl_gettid(void);
int crl_is_main_thread(void);
/// The main thread's pthread_t, recorded by a load-time constructor.
pthread_t crl_main_thread(void);
/// A thread-local byte (defined in shims.c); its address tells live threads apart.
extern __thread char crl_thread_marker_byte;
/// The address of this thread's marker byte: different in every live thread, and found with
/// no call at all (cheaper than pthread_self + pthread_equal for a check made on every call).
static inline const void *crl_thread_marker(void) { return &crl_thread_marker_byte; }

/// Names the calling thread (at most 15 bytes plus NUL); returns 0 or an errno value.
int crl_set_thread_name(const char *name);
/// pthread_getname_np, which needs _GNU_SOURCE. Returns 0 or an errno value.
int crl_get_thread_name(pthread_t thread, char *buffer, size_t size);
/// Pins the calling thread to the given CPUs; returns 0 or -1 with errno.
int crl_set_thread_affinity(const int *cpus, int count);
/// Sets the calling thread's nice value; returns 0 or -1 with errno.
int crl_set_thread_niceness(int niceness);
/// Creates a joinable thread with the given stack size (0 = default); returns 0 or an errno value.
int crl_thread_create(pthread_t *thread, size_t stack_size, void *(*start)(void *), void *arg);
/// The page size, for checking stack sizes.
long crl_page_size(void);
/// PTHREAD_STACK_MIN as this system reports it.
long crl_stack_minimum(void);

/// epoll event bits, as plain constants for Swift.
static const uint32_t CRL_EPOLLIN = EPOLLIN;
static const uint32_t CRL_EPOLLOUT = EPOLLOUT;
static const uint32_t CRL_EPOLLERR = EPOLLERR;
static const uint32_t CRL_EPOLLHUP = EPOLLHUP;
static const uint32_t CRL_EPOLLRDHUP = EPOLLRDHUP;
static const int CRL_EPOLL_CTL_ADD = EPOLL_CTL_ADD;
static const int CRL_EPOLL_CTL_MOD = EPOLL_CTL_MOD;
static const int CRL_EPOLL_CTL_DEL = EPOLL_CTL_DEL;

#endif
