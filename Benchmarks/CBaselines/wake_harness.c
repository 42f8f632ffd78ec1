// The poster's side of every C wake floor (see wake_harness.h).
#define _GNU_SOURCE
#include "wake_harness.h"

#include <sched.h>
#include <stdlib.h>

#include "CBenchBaselines.h"

static int64_t random_gap(unsigned *seed, int64_t min_gap, int64_t max_gap) {
  if (max_gap <= min_gap) return min_gap;
  return min_gap + (int64_t)(rand_r(seed) % (unsigned)(max_gap - min_gap));
}

// The poster yields on every check instead of spinning: with the consumer on the poster's own
// CPU, a spinning poster would keep it off that CPU until the scheduler's next tick (~4 ms),
// and the figure would measure the tick instead of the wake.
static void wait_completed(struct wake_run *run, int expected) {
  while (atomic_load_explicit(&run->completed, memory_order_acquire) < expected) sched_yield();
}

int wake_run_post_all(struct wake_run *run, void *(*consumer)(void *),
                      void (*post)(struct wake_run *, int), int64_t min_gap_ns,
                      int64_t max_gap_ns, unsigned seed) {
  pthread_t thread;
  int result = pthread_create(&thread, NULL, consumer, run);
  if (result != 0) return result;
  for (int index = 0; index < run->count; index++) {
    crb_sleep_ns(random_gap(&seed, min_gap_ns, max_gap_ns));
    atomic_store_explicit(&run->posted_at, crb_now_ns(), memory_order_release);
    post(run, index);
    wait_completed(run, index + 1);
  }
  pthread_join(thread, NULL);
  return 0;
}
