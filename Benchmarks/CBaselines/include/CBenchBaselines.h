// CBenchBaselines: the floors runloop-bench compares RunLoopKit against, written in plain C so
// no Swift overhead hides in them.
//
// Each function runs a consumer thread, then posts `count` wake-ups to it from the calling
// thread, one at a time: before each post it waits a random gap in [min_gap_ns, max_gap_ns]
// after the consumer finished the previous one, so the consumer is really asleep (or, for the
// spinning floor, really spinning) when the post arrives. samples[i] is the one-way latency in
// nanoseconds: from just before the post to the consumer's first instruction after waking.
// Returns 0, or an errno value if a thread or descriptor could not be created.
#ifndef CBENCHBASELINES_H
#define CBENCHBASELINES_H

#include <stdint.h>

/// A sleeping thread woken through an eventfd it waits on with epoll_wait: the floor for any
/// thread that sleeps in the kernel.
int crb_eventfd_epoll_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                              unsigned seed);

/// A sleeping thread woken through a pthread condition variable.
int crb_condvar_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                        unsigned seed);

/// A thread spinning on an atomic: the floor for any thread at all, at the price of a core.
int crb_spin_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                     unsigned seed);

/// Sleeps about `ns` nanoseconds with the calling thread's timer slack lowered to 1 ns.
void crb_sleep_ns(int64_t ns);

/// Spins until CLOCK_MONOTONIC has advanced by `ns` nanoseconds.
void crb_spin_ns(int64_t ns);

/// CLOCK_MONOTONIC in nanoseconds.
int64_t crb_now_ns(void);

/// Creates a thread, measures the time from just before pthread_create to the thread's first
/// instruction, and joins it; repeats `count` times. samples[i] = create-to-entry latency;
/// *total_ns = time for all create+join cycles.
int crb_thread_create_latency(int64_t *samples, int count, int64_t *total_ns);

#endif
