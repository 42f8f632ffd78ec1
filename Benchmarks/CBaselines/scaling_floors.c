// The scaling study's C floors (see CBenchScaling.h): many handles with a ready list, passes
// with work always ready, a zero-timeout epoll_wait, and a socketpair ping-pong.
#define _GNU_SOURCE
#include "CBenchScaling.h"
#include "CBenchBaselines.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

// How long a windowed floor lets its worker run after the first counted event before the
// window opens (first passes fault pages in and warm caches), as the Swift side does.
#define WARM_UP_NS 20000000

// SplitMix64, the generator of the Swift side's SplitMix.
static uint64_t splitmix_next(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A number in [0, bound), as the Swift side picks one (the high half of a full-width product).
static uint64_t below(uint64_t random, uint64_t bound) {
  return (uint64_t)(((unsigned __int128)random * bound) >> 64);
}

// An epoll set holding one eventfd (EPOLLIN); returns 0 or an errno, leaving nothing open.
static int open_epoll_with_eventfd(int *epoll, int *eventfd_out) {
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return errno;
  int set = epoll_create1(EPOLL_CLOEXEC);
  if (set < 0) {
    int error = errno;
    close(fd);
    return error;
  }
  struct epoll_event event = {.events = EPOLLIN, .data.fd = fd};
  if (epoll_ctl(set, EPOLL_CTL_ADD, fd, &event) != 0) {
    int error = errno;
    close(set);
    close(fd);
    return error;
  }
  *epoll = set;
  *eventfd_out = fd;
  return 0;
}

static void write_eventfd(int fd) {
  uint64_t one = 1;
  (void)!write(fd, &one, sizeof one);
}

// The windowed measurement every sampled floor shares (and ScalingStudy mirrors): wait for
// the first counted event (ETIMEDOUT after FIRST_EVENT_TIMEOUT_NS: a floor that never starts
// must not hang the bench), warm up, then count over `window_ns`.
#define FIRST_EVENT_TIMEOUT_NS 5000000000LL

static int sample_window(_Atomic int64_t *counter, int64_t window_ns, int64_t *count,
                         int64_t *elapsed_ns) {
  int64_t give_up = crb_now_ns() + FIRST_EVENT_TIMEOUT_NS;
  while (atomic_load_explicit(counter, memory_order_acquire) == 0) {
    if (crb_now_ns() > give_up) return ETIMEDOUT;
    crb_sleep_ns(100000);
  }
  crb_sleep_ns(WARM_UP_NS);
  int64_t start = crb_now_ns();
  int64_t before = atomic_load_explicit(counter, memory_order_acquire);
  crb_sleep_ns(window_ns);
  int64_t end = crb_now_ns();
  int64_t after = atomic_load_explicit(counter, memory_order_acquire);
  *count = after - before;
  *elapsed_ns = end - start;
  return 0;
}

// MARK: many handles, a ready list

struct async_handle {
  _Atomic int pending;
  // The ready-list link: written by the sender that pushes the handle, read by the loop after
  // it took the list (the push's release and the take's acquire order the two).
  struct async_handle *ready_next;
  // The loop's list of every handle: setup links, close unlinks.
  struct async_handle *prev;
  struct async_handle *next;
  void (*callback)(struct async_handle *handle, void *context);
  void *context;
};

struct async_loop {
  _Atomic(struct async_handle *) ready;
  _Atomic int sleeping;      // the loop committed to epoll_wait
  _Atomic int wake_written;  // a sender has written the eventfd since the loop last drained it
  _Atomic int quit;
  _Atomic int running;  // setup is done and the loop runs (or setup failed: see error)
  _Atomic int64_t events;
  _Atomic int64_t passes;
  struct async_handle all;  // sentinel of the list of every handle
  struct async_handle **handles;
  int count;
  int cpu;
  int eventfd;
  int epoll;
  int error;
  int64_t setup_ns;
  int64_t close_ns;
};

static void count_event(struct async_handle *handle, void *context) {
  (void)handle;
  atomic_fetch_add_explicit(&((struct async_loop *)context)->events, 1, memory_order_relaxed);
}

static void async_send(struct async_loop *loop, struct async_handle *handle) {
  if (atomic_exchange_explicit(&handle->pending, 1, memory_order_acq_rel) == 0) {
    struct async_handle *head = atomic_load_explicit(&loop->ready, memory_order_relaxed);
    do handle->ready_next = head;
    while (!atomic_compare_exchange_weak_explicit(&loop->ready, &head, handle,
                                                  memory_order_seq_cst, memory_order_relaxed));
  }
  // seq_cst against the loop's store of `sleeping` and its last look at the list: either the
  // loop sees the push, or this sees it asleep.
  if (atomic_load_explicit(&loop->sleeping, memory_order_seq_cst) &&
      !atomic_exchange_explicit(&loop->wake_written, 1, memory_order_acq_rel)) {
    write_eventfd(loop->eventfd);
  }
}

static void *async_loop_main(void *arg) {
  struct async_loop *loop = arg;
  crb_pin_self(loop->cpu);
  loop->all.prev = loop->all.next = &loop->all;
  int64_t start = crb_now_ns();
  for (int index = 0; index < loop->count; index++) {
    struct async_handle *handle = malloc(sizeof *handle);
    if (!handle) {
      loop->error = ENOMEM;
      loop->count = index;
      break;
    }
    atomic_init(&handle->pending, 0);
    handle->ready_next = NULL;
    handle->callback = count_event;
    handle->context = loop;
    handle->prev = loop->all.prev;
    handle->next = &loop->all;
    loop->all.prev->next = handle;
    loop->all.prev = handle;
    loop->handles[index] = handle;
  }
  loop->setup_ns = crb_now_ns() - start;
  atomic_store_explicit(&loop->running, 1, memory_order_release);

  while (!loop->error && !atomic_load_explicit(&loop->quit, memory_order_relaxed)) {
    atomic_fetch_add_explicit(&loop->passes, 1, memory_order_relaxed);
    struct async_handle *taken = atomic_exchange_explicit(&loop->ready, NULL, memory_order_acquire);
    if (taken) {
      // The stack holds the newest push first: turn it round, so handles run in send order.
      struct async_handle *ordered = NULL;
      while (taken) {
        struct async_handle *next = taken->ready_next;
        taken->ready_next = ordered;
        ordered = taken;
        taken = next;
      }
      while (ordered) {
        // The link is read before the flag is cleared: a send after the clear pushes the
        // handle again and rewrites it.
        struct async_handle *next = ordered->ready_next;
        atomic_store_explicit(&ordered->pending, 0, memory_order_release);
        ordered->callback(ordered, ordered->context);
        ordered = next;
      }
      continue;
    }
    atomic_store_explicit(&loop->sleeping, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&loop->ready, memory_order_seq_cst) ||
        atomic_load_explicit(&loop->quit, memory_order_seq_cst)) {
      atomic_store_explicit(&loop->sleeping, 0, memory_order_relaxed);
      continue;
    }
    struct epoll_event event;
    int ready = epoll_wait(loop->epoll, &event, 1, -1);
    atomic_store_explicit(&loop->sleeping, 0, memory_order_relaxed);
    if (ready == 1) {
      uint64_t value;
      (void)!read(loop->eventfd, &value, sizeof value);
    }
    atomic_store_explicit(&loop->wake_written, 0, memory_order_seq_cst);
  }

  start = crb_now_ns();
  for (int index = 0; index < loop->count; index++) {
    struct async_handle *handle = loop->handles[index];
    handle->prev->next = handle->next;
    handle->next->prev = handle->prev;
    free(handle);
  }
  loop->close_ns = crb_now_ns() - start;
  return NULL;
}

int crb_async_handles(int handles, int64_t window_ns, uint64_t seed, int loop_cpu,
                      struct crb_async_figures *out) {
  if (handles < 1) return EINVAL;
  struct async_loop *loop = calloc(1, sizeof *loop);
  if (!loop) return ENOMEM;
  loop->count = handles;
  loop->cpu = loop_cpu;
  // The table the sender picks from is made before setup, as the Swift side reserves its array.
  loop->handles = malloc(sizeof(struct async_handle *) * (size_t)handles);
  int error = loop->handles ? open_epoll_with_eventfd(&loop->epoll, &loop->eventfd) : ENOMEM;
  if (error != 0) {
    free(loop->handles);
    free(loop);
    return error;
  }
  pthread_t thread;
  error = pthread_create(&thread, NULL, async_loop_main, loop);
  if (error != 0) {
    close(loop->epoll);
    close(loop->eventfd);
    free(loop->handles);
    free(loop);
    return error;
  }
  while (!atomic_load_explicit(&loop->running, memory_order_acquire)) crb_sleep_ns(100000);

  int64_t events = 0;
  int64_t sends = 0;
  int64_t passes = 0;
  int64_t start = crb_now_ns();
  int64_t now = start;
  if (!loop->error) {
    uint64_t state = seed;
    int64_t before = atomic_load_explicit(&loop->events, memory_order_acquire);
    int64_t passes_before = atomic_load_explicit(&loop->passes, memory_order_relaxed);
    int64_t deadline = start + window_ns;
    do {
      async_send(loop, loop->handles[below(splitmix_next(&state), (uint64_t)handles)]);
      sends++;
      now = crb_now_ns();
    } while (now < deadline);
    events = atomic_load_explicit(&loop->events, memory_order_acquire) - before;
    passes = atomic_load_explicit(&loop->passes, memory_order_relaxed) - passes_before;
  }

  atomic_store_explicit(&loop->quit, 1, memory_order_seq_cst);
  write_eventfd(loop->eventfd);
  pthread_join(thread, NULL);
  error = loop->error;
  *out = (struct crb_async_figures){.events = events,
                                    .sends = sends,
                                    .passes = passes,
                                    .window_ns = now - start,
                                    .setup_ns = loop->setup_ns,
                                    .close_ns = loop->close_ns};
  close(loop->epoll);
  close(loop->eventfd);
  free(loop->handles);
  free(loop);
  return error;
}

// MARK: passes with work always ready

struct busy_handle {
  _Atomic int pending;
  void (*callback)(struct busy_handle *handle);
  _Atomic int64_t passes;
  _Atomic int quit;
  int epoll;
};

// The callback a pass calls: counts, and makes its handle pending again.
static void count_and_resignal(struct busy_handle *handle) {
  atomic_fetch_add_explicit(&handle->passes, 1, memory_order_relaxed);
  atomic_store_explicit(&handle->pending, 1, memory_order_release);
}

static void *busy_main(void *arg) {
  struct busy_handle *handle = arg;
  struct epoll_event events[64];
  while (!atomic_load_explicit(&handle->quit, memory_order_relaxed)) {
    (void)epoll_wait(handle->epoll, events, 64, 0);
    if (atomic_exchange_explicit(&handle->pending, 0, memory_order_acq_rel)) {
      handle->callback(handle);
    }
  }
  return NULL;
}

int crb_busy_passes(int64_t window_ns, int64_t *count, int64_t *elapsed_ns) {
  struct busy_handle handle = {.callback = count_and_resignal};
  atomic_init(&handle.pending, 1);
  int eventfd_fd;
  int error = open_epoll_with_eventfd(&handle.epoll, &eventfd_fd);
  if (error != 0) return error;
  pthread_t thread;
  error = pthread_create(&thread, NULL, busy_main, &handle);
  if (error == 0) {
    error = sample_window(&handle.passes, window_ns, count, elapsed_ns);
    atomic_store_explicit(&handle.quit, 1, memory_order_relaxed);
    pthread_join(thread, NULL);
  }
  close(handle.epoll);
  close(eventfd_fd);
  return error;
}

// MARK: a zero-timeout wait

int crb_zero_timeout_waits(int64_t window_ns, int64_t *count, int64_t *elapsed_ns) {
  int epoll;
  int eventfd_fd;
  int error = open_epoll_with_eventfd(&epoll, &eventfd_fd);
  if (error != 0) return error;
  struct epoll_event events[64];
  // Untimed: the first waits fault the stack and the set's pages in.
  for (int index = 0; index < 1024; index++) (void)epoll_wait(epoll, events, 64, 0);
  int64_t waits = 0;
  int64_t start = crb_now_ns();
  int64_t now;
  do {
    for (int index = 0; index < 1024; index++) (void)epoll_wait(epoll, events, 64, 0);
    waits += 1024;
    now = crb_now_ns();
  } while (now - start < window_ns);
  *count = waits;
  *elapsed_ns = now - start;
  close(epoll);
  close(eventfd_fd);
  return 0;
}

// MARK: ping-pong over socketpairs

int crb_pingpong_open(int count, int *near, int *far) {
  for (int index = 0; index < count; index++) {
    int pair[2];
    int error = 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      error = errno;
    } else if (write(pair[1], "PING", 4) != 4) {
      error = errno ? errno : EIO;
      close(pair[0]);
      close(pair[1]);
    }
    if (error != 0) {
      crb_pingpong_close(index, near, far);
      return error;
    }
    near[index] = pair[0];
    far[index] = pair[1];
  }
  return 0;
}

void crb_pingpong_close(int count, const int *near, const int *far) {
  for (int index = 0; index < count; index++) {
    close(near[index]);
    close(far[index]);
  }
}

// An epoll loop that echoes what it reads on any of its descriptors, counting the reads that
// returned data, until its quit eventfd is written. Both the far side and the C near side.
struct echo_loop {
  pthread_t thread;
  int cpu;
  int epoll;
  int quit;  // an eventfd in the set; its number is its epoll data
  _Atomic int64_t echoed;
};

static void *echo_main(void *arg) {
  struct echo_loop *loop = arg;
  crb_pin_self(loop->cpu);
  struct epoll_event events[128];
  for (;;) {
    int ready = epoll_wait(loop->epoll, events, 128, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return NULL;
    }
    for (int index = 0; index < ready; index++) {
      int fd = events[index].data.fd;
      if (fd == loop->quit) return NULL;
      char buffer[64];
      ssize_t got = read(fd, buffer, sizeof buffer);
      if (got > 0) {
        (void)!write(fd, buffer, (size_t)got);
        atomic_fetch_add_explicit(&loop->echoed, 1, memory_order_relaxed);
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        // The peer is gone: stop watching the descriptor, as a source told of a hang-up would.
        epoll_ctl(loop->epoll, EPOLL_CTL_DEL, fd, NULL);
      }
    }
  }
}

static int echo_loop_start(const int *fds, int count, int cpu, struct echo_loop **out) {
  struct echo_loop *loop = calloc(1, sizeof *loop);
  if (!loop) return ENOMEM;
  loop->cpu = cpu;
  loop->epoll = loop->quit = -1;
  int error = open_epoll_with_eventfd(&loop->epoll, &loop->quit);
  for (int index = 0; index < count && error == 0; index++) {
    struct epoll_event event = {.events = EPOLLIN, .data.fd = fds[index]};
    if (epoll_ctl(loop->epoll, EPOLL_CTL_ADD, fds[index], &event) != 0) error = errno;
  }
  if (error == 0) error = pthread_create(&loop->thread, NULL, echo_main, loop);
  if (error != 0) {
    if (loop->epoll >= 0) {
      close(loop->epoll);
      close(loop->quit);
    }
    free(loop);
    return error;
  }
  *out = loop;
  return 0;
}

static void echo_loop_stop(struct echo_loop *loop) {
  write_eventfd(loop->quit);
  pthread_join(loop->thread, NULL);
  close(loop->epoll);
  close(loop->quit);
  free(loop);
}

struct crb_echo {
  struct echo_loop *loop;
};

int crb_echo_start(const int *far, int count, int cpu, struct crb_echo **out) {
  struct crb_echo *echo = malloc(sizeof *echo);
  if (!echo) return ENOMEM;
  int error = echo_loop_start(far, count, cpu, &echo->loop);
  if (error != 0) {
    free(echo);
    return error;
  }
  *out = echo;
  return 0;
}

void crb_echo_stop(struct crb_echo *echo) {
  echo_loop_stop(echo->loop);
  free(echo);
}

int crb_pingpong_near(const int *near, int count, int cpu, int64_t window_ns,
                      int64_t *count_out, int64_t *elapsed_ns) {
  struct echo_loop *loop;
  int error = echo_loop_start(near, count, cpu, &loop);
  if (error != 0) return error;
  error = sample_window(&loop->echoed, window_ns, count_out, elapsed_ns);
  echo_loop_stop(loop);
  return error;
}
