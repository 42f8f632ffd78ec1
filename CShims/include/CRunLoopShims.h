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
#include <sys/wait.h>
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
/// 1 when crl_epoll_wait waits with nanosecond timeouts (epoll_pwait2), 0 when it falls back
/// to epoll_wait's whole milliseconds. Probes the kernel once if no wait has yet.
int crl_epoll_timeouts_are_precise(void);
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

/// The calling thread's timer slack (prctl PR_SET_TIMERSLACK / PR_GET_TIMERSLACK): how late
/// Linux may fire the hrtimer behind its timed sleeps (futex, epoll_pwait2, nanosleep), to
/// group wake-ups. Set returns 0 or -1 with errno; get returns the slack in ns or -1.
int crl_set_timer_slack(unsigned long nanoseconds);
long crl_get_timer_slack(void);

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

/// Signals (SignalSource): a process-wide handler that counts each delivery in every slot
/// watching the signal and writes 1 to the slot's eventfd; async-signal-safe throughout.
/// Slots are handed out by the Swift side under its own lock.
#define CRL_SIGNAL_SLOTS 256
/// One more than the highest signal number (NSIG on Linux).
#define CRL_SIGNAL_LIMIT 65
/// Points slot `slot` at `fd` for `signo`, its count at zero.
void crl_signal_slot_set(int slot, int signo, int fd);
/// The deliveries counted in the slot since the last take, reset to zero.
uint64_t crl_signal_slot_take(int slot);
/// Frees the slot, waits until no handler can still write to its fd, and returns the
/// deliveries it counted and nobody took.
uint64_t crl_signal_slot_clear(int slot);
/// Handlers inside their counted part right now (tests use it to know deliveries are done).
int crl_signal_handlers_in_flight(void);
/// Installs the handler for `signo`, remembering the disposition it replaces: a function
/// handler found there keeps being called after the count. Keeps SIGCHLD's SA_NOCLDSTOP and
/// SA_NOCLDWAIT. Returns 0, or -1 with errno.
int crl_signal_install(int signo);
/// Puts back the disposition `crl_signal_install` found. Returns 0, 1 when the handler there
/// is no longer ours (someone installed another since: it is left alone), or -1 with errno.
int crl_signal_restore(int signo);
/// Starts the library's catcher thread if it is not running ("rlk-signals"): it keeps the
/// watched signals deliverable when every other thread blocks them. Returns 0 or an errno.
int crl_signal_catcher_start(void);
/// Ends the catcher (and joins it) if no signal is watched: for a first watch that failed
/// after starting it.
void crl_signal_catcher_end_if_idle(void);
/// The catcher's thread ID while it runs, 0 otherwise.
pid_t crl_signal_catcher_thread_id(void);
/// tgkill(2): sends `signo` to one thread of this process; 0 or -1 with errno.
int crl_thread_kill(pid_t tid, int signo);
/// Adds `signo` to (or removes it from) the signals the catcher leaves unblocked; returns
/// once the catcher has taken the change in. Removing the last one ends the catcher (it is
/// gone when this returns); the next `crl_signal_catcher_start` starts a new one.
void crl_signal_catcher_watch(int signo, int watching);
/// The current disposition: 0 default, 1 ignored, 2 another handler, 3 RunLoopKit's; -1 errno.
int crl_signal_disposition(int signo);
/// SIGRTMIN and SIGRTMAX as this C library reports them (glibc keeps the first two
/// real-time signals for itself).
int crl_signal_min_realtime(void);
int crl_signal_max_realtime(void);

/// Child processes (ChildProcessSource)
/// pidfd_open(2): a descriptor that becomes readable when the process exits; -1 with errno.
int crl_pidfd_open(pid_t pid);
/// waitid(P_PIDFD, pidfd, …, options): returns the child's pid and stores si_code and
/// si_status, 0 when WNOHANG found nothing to report, or -1 with errno.
int crl_pidfd_wait(int pidfd, int options, int *code, int *status);
/// posix_spawn (or posix_spawnp when search_path) of path with argv and envp (NULL: this
/// process's environment), in directory
/// when not NULL: stdio[i] (when not -1) becomes the child's descriptor i; every other
/// descriptor is closed in the child; no signal is blocked and every disposition is the
/// default. Returns 0 or an errno value (an exec failure's included).
int crl_spawn(pid_t *pid, const char *path, int search_path, char *const argv[],
              char *const envp[], const char *directory, const int stdio[3]);
/// pipe2(fds, O_CLOEXEC); -1 with errno.
int crl_pipe_cloexec(int fds[2]);
/// Adds O_NONBLOCK to fd's status flags; -1 with errno.
int crl_set_nonblocking(int fd);
/// open("/dev/null", O_RDWR | O_CLOEXEC); -1 with errno.
int crl_open_null(void);
static const int CRL_WEXITED = WEXITED;
static const int CRL_WNOHANG = WNOHANG;
static const int CRL_WNOWAIT = WNOWAIT;
static const int CRL_CLD_EXITED = 1;  // si_code values (CLD_EXITED, CLD_KILLED, CLD_DUMPED)
static const int CRL_CLD_KILLED = 2;
static const int CRL_CLD_DUMPED = 3;

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
