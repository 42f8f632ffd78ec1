#define _GNU_SOURCE
#include "CBenchBaselines.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

int64_t crb_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void crb_sleep_ns(int64_t ns) {
  // The default 50 us timer slack would stretch every short gap; 1 ns keeps gaps as asked.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void crb_spin_ns(int64_t ns) {
  int64_t end = crb_now_ns() + ns;
  while (crb_now_ns() < end) {
  }
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t random_gap(unsigned *seed, int64_t min_gap, int64_t max_gap) {
  if (max_gap <= min_gap) return min_gap;
  return min_gap + (int64_t)(rand_r(seed) % (unsigned)(max_gap - min_gap));
}

// State shared by the poster (calling thread) and the consumer thread of one run.
struct shared {
  int64_t *samples;
  int count;
  _Atomic int64_t posted_at;
  _Atomic int sequence;  // posts so far
  _Atomic int completed; // samples recorded so far
  _Atomic int quit;
  int eventfd;
  int epoll;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
};

// Publishing a sample lets the poster post the next one, so anything the consumer must do
// before it can be woken again (draining the eventfd) has to happen between the time stamp
// and the publication.
static void record_at(struct shared *s, int index, int64_t woke) {
  s->samples[index] = woke - atomic_load_explicit(&s->posted_at, memory_order_acquire);
  atomic_store_explicit(&s->completed, index + 1, memory_order_release);
}

static void record(struct shared *s, int index) { record_at(s, index, crb_now_ns()); }

// The poster waits for the consumer exactly as the Swift harness (WakeProbe) does: spinning,
// with a sched_yield every 1024 turns so a consumer woken onto the poster's core is not
// starved on a 2-core machine. Same harness for every peer, so only the wake path differs.
static void wait_completed(struct shared *s, int expected) {
  unsigned spins = 0;
  while (atomic_load_explicit(&s->completed, memory_order_acquire) < expected) {
    if (++spins % 1024 == 0) sched_yield();
  }
}

// The poster's side, the same for every floor: start the consumer, then for each sample wait a
// random gap, stamp the time, post with `post`, and wait until the consumer has recorded it.
static int run_poster(struct shared *s, void *(*consumer)(void *),
                      void (*post)(struct shared *, int), int64_t min_gap_ns, int64_t max_gap_ns,
                      unsigned seed) {
  pthread_t thread;
  int result = pthread_create(&thread, NULL, consumer, s);
  if (result != 0) return result;
  for (int index = 0; index < s->count; index++) {
    crb_sleep_ns(random_gap(&seed, min_gap_ns, max_gap_ns));
    atomic_store_explicit(&s->posted_at, crb_now_ns(), memory_order_release);
    post(s, index);
    wait_completed(s, index + 1);
  }
  pthread_join(thread, NULL);
  return 0;
}

// MARK: eventfd + epoll

static void *eventfd_consumer(void *arg) {
  struct shared *s = arg;
  struct epoll_event event;
  for (int index = 0; index < s->count; index++) {
    while (epoll_wait(s->epoll, &event, 1, -1) < 1) {
    }
    int64_t woke = crb_now_ns();
    uint64_t value;
    (void)!read(s->eventfd, &value, sizeof value);
    record_at(s, index, woke);
  }
  return NULL;
}

static void eventfd_post(struct shared *s, int index) {
  (void)index;
  uint64_t one = 1;
  (void)!write(s->eventfd, &one, sizeof one);
}

int crb_eventfd_epoll_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                              unsigned seed) {
  struct shared s = {.samples = samples, .count = count};
  s.eventfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  s.epoll = epoll_create1(EPOLL_CLOEXEC);
  if (s.eventfd < 0 || s.epoll < 0) return errno;
  struct epoll_event event = {.events = EPOLLIN};
  epoll_ctl(s.epoll, EPOLL_CTL_ADD, s.eventfd, &event);
  int result = run_poster(&s, eventfd_consumer, eventfd_post, min_gap_ns, max_gap_ns, seed);
  close(s.eventfd);
  close(s.epoll);
  return result;
}

// MARK: condition variable

static void *condvar_consumer(void *arg) {
  struct shared *s = arg;
  for (int index = 0; index < s->count; index++) {
    pthread_mutex_lock(&s->mutex);
    while (atomic_load(&s->sequence) <= index) pthread_cond_wait(&s->cond, &s->mutex);
    record(s, index);
    pthread_mutex_unlock(&s->mutex);
  }
  return NULL;
}

static void condvar_post(struct shared *s, int index) {
  pthread_mutex_lock(&s->mutex);
  atomic_store(&s->sequence, index + 1);
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->mutex);
}

int crb_condvar_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                        unsigned seed) {
  struct shared s = {.samples = samples, .count = count};
  pthread_mutex_init(&s.mutex, NULL);
  pthread_cond_init(&s.cond, NULL);
  int result = run_poster(&s, condvar_consumer, condvar_post, min_gap_ns, max_gap_ns, seed);
  pthread_cond_destroy(&s.cond);
  pthread_mutex_destroy(&s.mutex);
  return result;
}

// MARK: spinning

static void *spin_consumer(void *arg) {
  struct shared *s = arg;
  for (int index = 0; index < s->count; index++) {
    while (atomic_load_explicit(&s->sequence, memory_order_acquire) <= index) cpu_relax();
    record(s, index);
  }
  return NULL;
}

static void spin_post(struct shared *s, int index) {
  atomic_store_explicit(&s->sequence, index + 1, memory_order_release);
}

int crb_spin_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                     unsigned seed) {
  struct shared s = {.samples = samples, .count = count};
  return run_poster(&s, spin_consumer, spin_post, min_gap_ns, max_gap_ns, seed);
}

// MARK: thread creation

struct entry {
  int64_t started;
  int64_t entered;
};

static void *note_entry(void *arg) {
  struct entry *e = arg;
  e->entered = crb_now_ns();
  return NULL;
}

int crb_thread_create_latency(int64_t *samples, int count, int64_t *total_ns) {
  int64_t begin = crb_now_ns();
  for (int index = 0; index < count; index++) {
    struct entry e;
    pthread_t thread;
    e.started = crb_now_ns();
    int result = pthread_create(&thread, NULL, note_entry, &e);
    if (result != 0) return result;
    pthread_join(thread, NULL);
    samples[index] = e.entered - e.started;
  }
  *total_ns = crb_now_ns() - begin;
  return 0;
}
