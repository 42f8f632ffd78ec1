// CBenchTimers: the C floor runloop-bench compares LoopTimer's add and cancel against.
//
// A libuv-style timer heap: every timer embeds its heap node (no allocation per add), the
// nodes form a pointer-linked binary min-heap keyed by (due time, sequence), and insert and
// remove are O(log n), as uv_timer_start and uv_timer_stop are.
#ifndef CBENCHTIMERS_H
#define CBENCHTIMERS_H

#include <stdint.h>

/// Creates `count` timers with due dates spread at random (from `seed`) over one second,
/// then times adding all of them to one heap, then shuffles them and times removing all of
/// them in that random order. Creating (allocating) the timers is not counted, as in the
/// Swift study. *add_ns and *cancel_ns receive the two totals (CLOCK_MONOTONIC). Returns 0,
/// ENOMEM if the timers could not be allocated, or EINVAL if the heap came out inconsistent
/// (a bug in the baseline, never expected).
int crb_timer_heap_cost(int count, uint64_t seed, int64_t *add_ns, int64_t *cancel_ns);

/// Times arming `count` new timers: allocating each, filling it in and inserting it into one
/// heap, due dates spread at random (from `seed`) over one second. *arm_ns receives the total
/// (CLOCK_MONOTONIC). The counterpart of `IsolatedLoop.addTimer`, which makes the timer it
/// adds. Returns 0, ENOMEM, or EINVAL for a heap that came out inconsistent.
int crb_timer_heap_arm_cost(int count, uint64_t seed, int64_t *arm_ns);

#endif
