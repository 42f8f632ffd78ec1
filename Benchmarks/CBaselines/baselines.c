// Helpers every baseline and the Swift harness share: the clock, sleeping and spinning for a
// given time, pinning, and the cost of creating a thread.
#define _GNU_SOURCE
#include "CBenchBaselines.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
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

int crb_pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (cpu >= 0) {
    CPU_SET(cpu, &set);
  } else {
    long count = sysconf(_SC_NPROCESSORS_CONF);
    for (long index = 0; index < count && index < CPU_SETSIZE; index++) CPU_SET(index, &set);
  }
  return sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : errno;
}

int crb_current_cpu(void) { return sched_getcpu(); }

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
