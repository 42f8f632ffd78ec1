// The wake floors: the least a sleeping (or spinning) thread can take to start work posted to
// it, by three kernel paths. Each mirrors what a correct event loop must do, no more.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "CBenchBaselines.h"
#include "wake_harness.h"

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int posted(struct wake_run *run) {
  return atomic_load_explicit(&run->sequence, memory_order_acquire);
}

// MARK: eventfd + epoll

struct eventfd_floor {
  int eventfd;
  int epoll;
};

// Runs the work as soon as epoll_wait returns and drains the eventfd afterwards, before the
// next wait, as RunLoopKit's loop does: the read is off the path from wake to work. The drain
// comes before the last look for work, so a post that lands in between is never missed.
static void *eventfd_consumer(void *arg) {
  struct wake_run *run = arg;
  struct eventfd_floor *floor = run->floor;
  crb_pin_self(run->consumer_cpu);
  int done = 0;
  int readable = 0;
  while (done < run->count) {
    if (posted(run) > done) {
      wake_run_work(run, done, crb_now_ns);
      done++;
    } else if (readable) {
      uint64_t value;
      (void)!read(floor->eventfd, &value, sizeof value);
      readable = 0;
    } else {
      struct epoll_event event;
      while (epoll_wait(floor->epoll, &event, 1, -1) < 1) {
      }
      readable = 1;
    }
  }
  return NULL;
}

static void eventfd_post(struct wake_run *run, int index) {
  struct eventfd_floor *floor = run->floor;
  atomic_store_explicit(&run->sequence, index + 1, memory_order_release);
  uint64_t one = 1;
  (void)!write(floor->eventfd, &one, sizeof one);
}

int crb_eventfd_epoll_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                              unsigned seed, int consumer_cpu) {
  struct eventfd_floor floor;
  struct wake_run run = {
      .samples = samples, .count = count, .consumer_cpu = consumer_cpu, .floor = &floor};
  floor.eventfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  floor.epoll = epoll_create1(EPOLL_CLOEXEC);
  if (floor.eventfd < 0 || floor.epoll < 0) return errno;
  struct epoll_event event = {.events = EPOLLIN};
  epoll_ctl(floor.epoll, EPOLL_CTL_ADD, floor.eventfd, &event);
  int result =
      wake_run_post_all(&run, eventfd_consumer, eventfd_post, min_gap_ns, max_gap_ns, seed);
  close(floor.eventfd);
  close(floor.epoll);
  return result;
}

// MARK: condition variable

struct condvar_floor {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
};

// Takes the work under the mutex and runs it after unlocking, as a real consumer would.
static void *condvar_consumer(void *arg) {
  struct wake_run *run = arg;
  struct condvar_floor *floor = run->floor;
  crb_pin_self(run->consumer_cpu);
  for (int done = 0; done < run->count; done++) {
    pthread_mutex_lock(&floor->mutex);
    while (posted(run) <= done) pthread_cond_wait(&floor->cond, &floor->mutex);
    pthread_mutex_unlock(&floor->mutex);
    wake_run_work(run, done, crb_now_ns);
  }
  return NULL;
}

// Signals after unlocking, so the woken consumer does not find the mutex still held.
static void condvar_post(struct wake_run *run, int index) {
  struct condvar_floor *floor = run->floor;
  pthread_mutex_lock(&floor->mutex);
  atomic_store_explicit(&run->sequence, index + 1, memory_order_release);
  pthread_mutex_unlock(&floor->mutex);
  pthread_cond_signal(&floor->cond);
}

int crb_condvar_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                        unsigned seed, int consumer_cpu) {
  struct condvar_floor floor;
  struct wake_run run = {
      .samples = samples, .count = count, .consumer_cpu = consumer_cpu, .floor = &floor};
  pthread_mutex_init(&floor.mutex, NULL);
  pthread_cond_init(&floor.cond, NULL);
  int result =
      wake_run_post_all(&run, condvar_consumer, condvar_post, min_gap_ns, max_gap_ns, seed);
  pthread_cond_destroy(&floor.cond);
  pthread_mutex_destroy(&floor.mutex);
  return result;
}

// MARK: futex

// A bare futex: the consumer sleeps on the post counter itself and the poster wakes it only
// when it has announced that it sleeps. This is the kernel path Dispatch's semaphores and the
// condvar take underneath, with nothing around it.
struct futex_floor {
  _Atomic uint32_t word;     // posts so far, the value slept on
  _Atomic uint32_t waiting;  // the consumer is (about to be) in FUTEX_WAIT
};

static void *futex_consumer(void *arg) {
  struct wake_run *run = arg;
  struct futex_floor *floor = run->floor;
  crb_pin_self(run->consumer_cpu);
  for (int done = 0; done < run->count; done++) {
    while (atomic_load_explicit(&floor->word, memory_order_acquire) <= (uint32_t)done) {
      atomic_store(&floor->waiting, 1);
      // Sleeps only if the word still says nothing new was posted (checked by the kernel).
      syscall(SYS_futex, &floor->word, FUTEX_WAIT_PRIVATE, (uint32_t)done, NULL, NULL, 0);
      atomic_store(&floor->waiting, 0);
    }
    wake_run_work(run, done, crb_now_ns);
  }
  return NULL;
}

static void futex_post(struct wake_run *run, int index) {
  struct futex_floor *floor = run->floor;
  atomic_store(&floor->word, (uint32_t)index + 1);
  if (atomic_load(&floor->waiting)) {
    syscall(SYS_futex, &floor->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  }
}

int crb_futex_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                      unsigned seed, int consumer_cpu) {
  struct futex_floor floor = {.word = 0, .waiting = 0};
  struct wake_run run = {
      .samples = samples, .count = count, .consumer_cpu = consumer_cpu, .floor = &floor};
  return wake_run_post_all(&run, futex_consumer, futex_post, min_gap_ns, max_gap_ns, seed);
}

// MARK: spinning

static void *spin_consumer(void *arg) {
  struct wake_run *run = arg;
  crb_pin_self(run->consumer_cpu);
  for (int done = 0; done < run->count; done++) {
    while (posted(run) <= done) cpu_relax();
    wake_run_work(run, done, crb_now_ns);
  }
  return NULL;
}

static void spin_post(struct wake_run *run, int index) {
  atomic_store_explicit(&run->sequence, index + 1, memory_order_release);
}

int crb_spin_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                     unsigned seed, int consumer_cpu) {
  struct wake_run run = {.samples = samples, .count = count, .consumer_cpu = consumer_cpu};
  return wake_run_post_all(&run, spin_consumer, spin_post, min_gap_ns, max_gap_ns, seed);
}
