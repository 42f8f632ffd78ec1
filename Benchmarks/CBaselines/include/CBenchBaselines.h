// CBenchBaselines: the floors runloop-bench compares RunLoopKit against, written in plain C so
// no Swift overhead hides in them.
//
// Wake floors: each runs a consumer thread pinned to `consumer_cpu` (-1: any CPU), then posts
// `count` wake-ups to it from the calling thread, one at a time, exactly as the Swift harness
// (WakeProbe) posts to the Swift peers: wait a random gap in [min_gap_ns, max_gap_ns] so the
// consumer is really asleep, stamp the time, post, then wait for the consumer to record the
// sample by yielding the CPU (sched_yield on every check) so a consumer woken onto the
// poster's CPU runs at once. samples[i] is the one-way latency in nanoseconds: from just
// before the post to the first instruction of the posted work on the consumer thread.
// The caller pins itself (crb_pin_self) before calling. Each returns 0, or an errno value if
// a thread or descriptor could not be created.
#ifndef CBENCHBASELINES_H
#define CBENCHBASELINES_H

#include <stdint.h>

/// Pins the calling thread to `cpu`, or lets it run anywhere with -1. Returns 0 or an errno.
int crb_pin_self(int cpu);

/// Lets every thread of the process run on any CPU again. Returns 0 or the last errno.
int crb_unpin_every_thread(void);

/// The CPU the calling thread runs on now.
int crb_current_cpu(void);

/// The raw floor for a thread that sleeps in the kernel: a consumer blocked in epoll_wait on
/// an eventfd, running the work as soon as epoll_wait returns and draining the eventfd only
/// afterwards, before it next waits (as RunLoopKit's loop does). No queue, no lock.
int crb_eventfd_epoll_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                              unsigned seed, int consumer_cpu);

/// A sleeping thread woken through a pthread condition variable (a futex underneath).
int crb_condvar_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                        unsigned seed, int consumer_cpu);

/// A sleeping thread woken through a bare futex: the kernel's shortest sleep-and-wake path.
int crb_futex_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                      unsigned seed, int consumer_cpu);

/// A thread spinning on an atomic: it never sleeps, so this is not a wake; it is the floor for
/// any hand-off at all, at the price of a core.
int crb_spin_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                     unsigned seed, int consumer_cpu);

/// The C posting floor (see posting_floor.c) measured as a wake: each post is one heap-allocated
/// task pushed onto a mutex-guarded queue, the sleeping consumer woken through an eventfd.
int crb_posting_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                        unsigned seed, int consumer_cpu);

/// The C posting floor's throughput: `posters` threads post `tasks` tasks in all, as fast as
/// they can, to one consumer. *seconds = time from the first post until the consumer has run
/// the last task; *wakeups = eventfd writes made. Returns 0 or an errno.
int crb_posting_throughput(int posters, int64_t tasks, double *seconds, int64_t *wakeups);

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
