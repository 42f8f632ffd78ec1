// Helpers every baseline and the Swift harness share: the clock, sleeping and spinning for a
// given time, pinning, and the cost of creating a thread.
#define _GNU_SOURCE
#include "CBenchBaselines.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
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

static void set_all_cpus(cpu_set_t *set) {
  CPU_ZERO(set);
  long count = sysconf(_SC_NPROCESSORS_CONF);
  for (long index = 0; index < count && index < CPU_SETSIZE; index++) CPU_SET(index, set);
}

int crb_pin_self(int cpu) {
  cpu_set_t set;
  if (cpu >= 0) {
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
  } else {
    set_all_cpus(&set);
  }
  return sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : errno;
}

// A thread inherits its creator's affinity, and the threads a wake case pins outlive it (the
// resident targets, Dispatch's and the Swift runtime's pool workers, which may carry on the
// bench's own code after an await): one pinned thread would put every thread created after
// it, and the CPU-bound studies run on them, on one CPU.
int crb_unpin_every_thread(void) {
  cpu_set_t set;
  set_all_cpus(&set);
  DIR *tasks = opendir("/proc/self/task");
  if (!tasks) return errno;
  int failure = 0;
  struct dirent *entry;
  while ((entry = readdir(tasks)) != NULL) {
    if (entry->d_name[0] == '.') continue;
    pid_t tid = (pid_t)strtol(entry->d_name, NULL, 10);
    // A thread that exited since the listing is no failure.
    if (sched_setaffinity(tid, sizeof set, &set) != 0 && errno != ESRCH) failure = errno;
  }
  closedir(tasks);
  return failure;
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
