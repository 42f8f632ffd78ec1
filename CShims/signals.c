#define _GNU_SOURCE
#include "CRunLoopShims.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

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

// The disposition found when the first source of a signal was added: put back by restore,
// and, when it is a function, called after the count (chained). The handler reads the chain
// through one pointer, so it never pairs a function with another one's calling convention;
// install writes the buffer the pointer does not point to.
struct crl_signal_chain {
  void *function;
  int siginfo;
};
static struct sigaction crl_signal_previous[CRL_SIGNAL_LIMIT];
static struct crl_signal_chain crl_signal_chains[CRL_SIGNAL_LIMIT][2];
static _Atomic(struct crl_signal_chain *) crl_signal_chain[CRL_SIGNAL_LIMIT];

// Set on a thread while it runs a chained handler. Another library's handler that chains
// back to ours (installed before it, put back after ours left) would otherwise bounce the
// delivery between the two for ever; the second entry returns at once.
static __thread __attribute__((tls_model("initial-exec"))) int crl_signal_in_chain;

static void crl_signal_handler(int signo, siginfo_t *info, void *context) {
  if (crl_signal_in_chain) return;
  // Runs with every asynchronous signal blocked (see sa_mask), so no other handler can
  // interrupt the counted part below and leave it without the decrement (a siglongjmp out of
  // a nested one).
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
  struct crl_signal_chain chain = {NULL, 0};
  if (signo > 0 && signo < CRL_SIGNAL_LIMIT) {
    struct crl_signal_chain *published = atomic_load(&crl_signal_chain[signo]);
    if (published != NULL) chain = *published;
  }
  atomic_fetch_sub(&crl_signal_handlers_running, 1);
  // Outside the counted part: a chained handler may never return (siglongjmp).
  if (chain.function != NULL) {
    crl_signal_in_chain = 1;
    if (chain.siginfo) {
      ((void (*)(int, siginfo_t *, void *))chain.function)(signo, info, context);
    } else {
      ((void (*)(int))chain.function)(signo);
    }
    crl_signal_in_chain = 0;
  }
  errno = saved_errno;
}

// A child made by fork() while some thread was inside the handler's counted part would
// otherwise inherit a count that never goes back to zero.
static void crl_signal_catcher_forget(void);
static void crl_signal_after_fork_in_child(void) {
  atomic_store(&crl_signal_handlers_running, 0);
  // The catcher thread is not copied by fork(): the next watch starts one of the child's own.
  crl_signal_catcher_forget();
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

int crl_signal_handlers_in_flight(void) { return atomic_load(&crl_signal_handlers_running); }

static int crl_is_our_action(const struct sigaction *action) {
  return (action->sa_flags & SA_SIGINFO) != 0 && action->sa_sigaction == crl_signal_handler;
}

static pthread_once_t crl_signal_fork_once = PTHREAD_ONCE_INIT;
static void crl_signal_register_fork_handler(void) {
  pthread_atfork(NULL, NULL, crl_signal_after_fork_in_child);
}

int crl_signal_install(int signo) {
  pthread_once(&crl_signal_fork_once, crl_signal_register_fork_handler);
  struct sigaction current;
  if (sigaction(signo, NULL, &current) != 0) return -1;
  // Ours already (another library put it back after a restore left it theirs): keep the
  // disposition and chain saved the first time, never chain to ourselves.
  if (crl_is_our_action(&current)) return 0;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crl_signal_handler;
  // SIGCHLD's flags (do not report stops, do not make zombies) are the program's choice.
  action.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK |
                    (current.sa_flags & (SA_NOCLDSTOP | SA_NOCLDWAIT));
  sigfillset(&action.sa_mask);
  // Faults stay deliverable: a crash inside a chained handler must reach the crash reporter.
  sigdelset(&action.sa_mask, SIGSEGV);
  sigdelset(&action.sa_mask, SIGBUS);
  sigdelset(&action.sa_mask, SIGFPE);
  sigdelset(&action.sa_mask, SIGILL);
  sigdelset(&action.sa_mask, SIGTRAP);
  struct sigaction previous;
  if (sigaction(signo, &action, &previous) != 0) return -1;
  crl_signal_previous[signo] = previous;
  struct crl_signal_chain *published = atomic_load(&crl_signal_chain[signo]);
  struct crl_signal_chain *next =
      published == &crl_signal_chains[signo][0] ? &crl_signal_chains[signo][1]
                                                : &crl_signal_chains[signo][0];
  next->siginfo = (previous.sa_flags & SA_SIGINFO) != 0;
  if (next->siginfo) {
    next->function = (void *)previous.sa_sigaction;
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    next->function = (void *)previous.sa_handler;
  } else {
    next->function = NULL;
  }
  atomic_store(&crl_signal_chain[signo], next);
  return 0;
}

int crl_signal_restore(int signo) {
  struct sigaction current;
  if (sigaction(signo, NULL, &current) != 0) return -1;
  // Someone installed a handler after ours: it is theirs now, leave it.
  if (!crl_is_our_action(&current)) return 1;
  if (sigaction(signo, &crl_signal_previous[signo], NULL) != 0) return -1;
  return 0;
}

// The catcher: a thread of the library's own that keeps every watched signal deliverable.
// A process-directed signal goes to a thread that does not block it; if every thread blocks
// it (threads inherit their creator's mask, and Dispatch's threads block nearly all), it
// would stay pending for good, neither handled nor taking its default action. The catcher
// blocks everything except the signals that have a source, waiting in ppoll with that mask,
// and is told through an eventfd when the set changes. It ends when the last signal leaves
// the set, and the next watch starts a new one. Every call below is made under the lock of
// SignalRegistry.swift, one at a time.
static _Atomic uint64_t crl_signal_watched;
// Bumped by each change of the watched set; the catcher stores the value it has taken in
// (outside ppoll, with every signal blocked) before it waits with the new mask.
static _Atomic uint64_t crl_signal_catcher_requested;
static _Atomic uint64_t crl_signal_catcher_applied;
static int crl_signal_catcher_fd = -1;
static pthread_t crl_signal_catcher_thread;
static int crl_signal_catcher_started;
static _Atomic pid_t crl_signal_catcher_tid;
// Set to make the catcher return (the watched set is empty); read by it after each wake-up.
static _Atomic int crl_signal_catcher_exiting;

static void crl_signal_catcher_forget(void) {
  if (crl_signal_catcher_fd >= 0) close(crl_signal_catcher_fd);
  crl_signal_catcher_fd = -1;
  crl_signal_catcher_started = 0;
  atomic_store(&crl_signal_catcher_exiting, 0);
  atomic_store(&crl_signal_catcher_tid, 0);
  atomic_store(&crl_signal_catcher_applied, atomic_load(&crl_signal_catcher_requested));
}

static void *crl_signal_catcher(void *unused) {
  (void)unused;
  prctl(PR_SET_NAME, "rlk-signals", 0, 0, 0);
  atomic_store(&crl_signal_catcher_tid, (pid_t)syscall(SYS_gettid));
  for (;;) {
    if (atomic_load(&crl_signal_catcher_exiting)) return NULL;
    uint64_t requested = atomic_load(&crl_signal_catcher_requested);
    uint64_t watched = atomic_load(&crl_signal_watched);
    // Every signal is blocked here, outside ppoll: a signal taken out of the set can no
    // longer reach this thread from now on.
    atomic_store(&crl_signal_catcher_applied, requested);
    sigset_t during;
    sigfillset(&during);
    for (int signo = 1; signo < CRL_SIGNAL_LIMIT; signo++) {
      if (watched & (UINT64_C(1) << (signo - 1))) sigdelset(&during, signo);
    }
    struct pollfd wake = {.fd = crl_signal_catcher_fd, .events = POLLIN};
    if (ppoll(&wake, 1, NULL, &during) > 0) {
      uint64_t value;
      ssize_t ignored = read(crl_signal_catcher_fd, &value, sizeof value);
      (void)ignored;
    }
  }
  return NULL;
}

int crl_signal_catcher_start(void) {
  if (crl_signal_catcher_started) return 0;
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return errno;
  crl_signal_catcher_fd = fd;
  // Started with every signal blocked; the thread unblocks only the watched ones, in ppoll.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  // Joinable: the watch that empties the set joins it (crl_signal_catcher_end).
  // Small: it only ever runs the signal handler. Ignored (default size) where the platform
  // needs more.
  (void)pthread_attr_setstacksize(&attributes, 256 * 1024);
  int result = pthread_create(&crl_signal_catcher_thread, &attributes, crl_signal_catcher, NULL);
  pthread_attr_destroy(&attributes);
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  if (result != 0) {
    close(fd);
    crl_signal_catcher_fd = -1;
    return result;
  }
  crl_signal_catcher_started = 1;
  return 0;
}

pid_t crl_signal_catcher_thread_id(void) { return atomic_load(&crl_signal_catcher_tid); }

int crl_thread_kill(pid_t tid, int signo) { return (int)syscall(SYS_tgkill, getpid(), tid, signo); }

// Ends the catcher and waits until it is gone: a thread that has exited receives nothing,
// so the signal that just left the set can no longer reach it. Its eventfd goes with it.
static void crl_signal_catcher_end(void) {
  atomic_store(&crl_signal_catcher_exiting, 1);
  uint64_t one = 1;
  ssize_t ignored = write(crl_signal_catcher_fd, &one, sizeof one);
  (void)ignored;
  pthread_join(crl_signal_catcher_thread, NULL);
  atomic_store(&crl_signal_catcher_exiting, 0);
  close(crl_signal_catcher_fd);
  crl_signal_catcher_fd = -1;
  crl_signal_catcher_started = 0;
  atomic_store(&crl_signal_catcher_tid, 0);
}

void crl_signal_catcher_end_if_idle(void) {
  if (crl_signal_catcher_started && atomic_load(&crl_signal_watched) == 0) {
    crl_signal_catcher_end();
  }
}

void crl_signal_catcher_watch(int signo, int watching) {
  uint64_t bit = UINT64_C(1) << (signo - 1);
  uint64_t left;
  if (watching) {
    left = atomic_fetch_or(&crl_signal_watched, bit) | bit;
  } else {
    left = atomic_fetch_and(&crl_signal_watched, ~bit) & ~bit;
  }
  // No catcher (in a child after fork, before its first watch): the next one reads the set.
  if (!crl_signal_catcher_started) return;
  // No signal has a source any more: no thread of the library's is needed for them.
  if (left == 0) {
    crl_signal_catcher_end();
    return;
  }
  uint64_t generation = atomic_fetch_add(&crl_signal_catcher_requested, 1) + 1;
  uint64_t one = 1;
  ssize_t ignored = write(crl_signal_catcher_fd, &one, sizeof one);
  (void)ignored;
  // Waits until the catcher has taken the new set in. A signal leaving the set must be
  // blocked there before its old disposition comes back, or the catcher would take its
  // default action for a signal every other thread blocks; one joining it is then
  // deliverable when the add returns. The catcher answers within one wake-up.
  while (atomic_load(&crl_signal_catcher_applied) < generation) sched_yield();
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
