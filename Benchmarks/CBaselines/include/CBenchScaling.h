// CBenchScaling: the C floors of runloop-bench's scaling study (ScalingStudy.swift), each the
// same shape as one of its rows done the cheapest correct way in plain C, so that a loop whose
// cost follows the work that is ready (and not the number of items it holds) shows up as a
// ratio that does not move with that number.
//
// Where a floor has two threads, the caller pins itself (crb_pin_self) and passes the CPU for
// the floor's own thread (-1: any), as the Swift side pins its loop's thread.
//
// The windowed floors (busy passes, ping-pong) measure as the Swift side does: the calling
// thread waits for the worker's first counted event, lets it run 20 ms more, then reads the
// count and the clock, sleeps `window_ns`, and reads both again. *count and *elapsed_ns
// receive the difference between the two readings.
#ifndef CBENCHSCALING_H
#define CBENCHSCALING_H

#include <stdint.h>

/// What `crb_async_handles` measured.
struct crb_async_figures {
  /// Callbacks run between the first send and the first clock reading past the deadline.
  int64_t events;
  /// Sends made in that time.
  int64_t sends;
  /// Turns of the loop in that time: each takes the ready list, and runs what it took or, with
  /// nothing taken, waits (the counterpart of a pass).
  int64_t passes;
  /// That time: from just before the first send to the clock reading that ended the window.
  int64_t window_ns;
  /// Allocating every handle and linking it into the loop's list, on the loop's thread.
  int64_t setup_ns;
  /// Unlinking every handle and freeing it, on the loop's thread, in the order they were made.
  int64_t close_ns;
};

/// libuv's benchmark-million-async shape, with a ready list instead of a walk. A loop thread
/// (pinned to `loop_cpu`) allocates `handles` handles (an atomic pending flag, a ready-list link, a callback and its
/// context each) and links each into its list of handles (setup), then loops: it takes the
/// whole ready list (a lock-free multi-producer stack) in one exchange, and for each handle,
/// in the order they were pushed, clears its flag and calls its callback (a relaxed atomic
/// count); with nothing ready it sleeps in epoll_wait on an eventfd. The calling thread sends
/// to handles chosen at random (SplitMix64 from `seed`, as the Swift side draws them) as fast
/// as it can, reading the clock after each send, until `window_ns` has passed. A send sets the
/// handle's flag and pushes the handle only when the flag went 0 -> 1, then writes the eventfd
/// if the loop is asleep and nobody has written since (what `signalAndWake` asks: a wake-up,
/// sent only to a loop that sleeps). Then the loop stops, and unlinks and frees every handle
/// (close). Returns 0 or an errno.
int crb_async_handles(int handles, int64_t window_ns, uint64_t seed, int loop_cpu,
                      struct crb_async_figures *out);

/// Passes with work always ready (libuv's loop-count shape): a thread loops on epoll_wait with
/// timeout 0 over an epoll set holding one eventfd (never written), then, when its one handle's
/// pending flag is set, clears it and calls the handle's callback, which counts the pass
/// (a relaxed atomic add) and sets the flag again: the C counterpart of a manual source that
/// signals itself in its perform. Measured as the header says. Returns 0 or an errno.
int crb_busy_passes(int64_t window_ns, int64_t *count, int64_t *elapsed_ns);

/// The C iteration a zero-length run stands against: epoll_wait with timeout 0 on an epoll set
/// holding one eventfd, on the calling thread, in batches of 1 024 until `window_ns` has
/// passed. *count: the waits made; *elapsed_ns: the time they took. Returns 0 or an errno.
int crb_zero_timeout_waits(int64_t window_ns, int64_t *count, int64_t *elapsed_ns);

/// Makes `count` AF_UNIX stream socketpairs, the near ends into near[i] and the far ends into
/// far[i], and writes one 4-byte "PING" into every far end, so one message per pair is on its
/// way to the near end. Returns 0 or an errno (then nothing is left open).
int crb_pingpong_open(int count, int *near, int *far);

/// Closes both ends of every pair.
void crb_pingpong_close(int count, const int *near, const int *far);

/// The far side of the ping-pong, shared by the Swift loop and the C floor so that only the
/// near side differs: a thread that waits in epoll_wait (level-triggered) on every far end and
/// writes whatever it reads from one back into it.
struct crb_echo;

/// Starts the echo thread on `far`, pinned to `cpu`. Returns 0 or an errno; *out is the handle
/// to stop it with.
int crb_echo_start(const int *far, int count, int cpu, struct crb_echo **out);

/// Stops and joins the echo thread and frees its handle; the descriptors stay open.
void crb_echo_stop(struct crb_echo *echo);

/// The C floor of the ping-pong's near side: a thread (pinned to `cpu`) that waits in epoll_wait
/// (level-triggered, as a DescriptorSource is) on every near end, reads each ready one and
/// writes what it read back, counting the reads that returned data (one per round trip: a
/// pair has one message in flight). Measured as the header says; then the thread is stopped
/// and its epoll set closed, the descriptors left open with whatever they still hold.
/// Returns 0 or an errno.
int crb_pingpong_near(const int *near, int count, int cpu, int64_t window_ns,
                      int64_t *count_out, int64_t *elapsed_ns);

#endif
