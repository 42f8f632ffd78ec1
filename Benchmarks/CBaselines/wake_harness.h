// The poster's side of every C wake floor, shared so that only the wake path differs between
// them (and mirrors WakeProbe, the Swift peers' harness). Private to CBenchBaselines.
#ifndef CBENCH_WAKE_HARNESS_H
#define CBENCH_WAKE_HARNESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct wake_run {
  int64_t *samples;
  int count;
  int consumer_cpu;
  _Atomic int64_t posted_at;
  _Atomic int sequence;   // posts so far
  _Atomic int completed;  // samples recorded so far
  void *floor;            // the floor's own state
};

// The posted work's first instruction: stamps and publishes sample `index`. Publishing lets
// the poster post again, so anything the consumer still does before it sleeps comes after.
static inline void wake_run_work(struct wake_run *run, int index, int64_t (*now)(void)) {
  int64_t woke = now();
  run->samples[index] = woke - atomic_load_explicit(&run->posted_at, memory_order_acquire);
  atomic_store_explicit(&run->completed, index + 1, memory_order_release);
}

// Starts `consumer` (which pins itself to run->consumer_cpu), then posts run->count times with
// `post`, each after a random gap, waiting for each sample by yielding. Returns 0 or an errno.
int wake_run_post_all(struct wake_run *run, void *(*consumer)(void *),
                      void (*post)(struct wake_run *, int), int64_t min_gap_ns,
                      int64_t max_gap_ns, unsigned seed);

#endif
