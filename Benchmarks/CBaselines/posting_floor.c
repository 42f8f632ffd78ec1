// The C posting floor: the cheapest correct multi-producer hand-off of work to a thread that
// sleeps when idle. A poster allocates a task, appends it to a mutex-guarded list and writes
// the consumer's eventfd only when the consumer sleeps and nobody has written since; the
// consumer takes the whole list in one swap and runs it with the mutex released. This is what
// RunLoopKit's Loop.perform does, minus everything a run loop adds (modes, observers, timers),
// so it is the reference for Loop.perform's posting cost.
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "CBenchBaselines.h"
#include "wake_harness.h"

struct task {
  struct task *next;
  void (*run)(void *context);
  void *context;
};

struct posting_queue {
  pthread_mutex_t mutex;
  struct task *head;
  struct task *tail;
  int sleeping;      // the consumer committed to epoll_wait (under mutex)
  int wake_written;  // a poster has written the eventfd since (under mutex)
  int64_t wakeups;   // eventfd writes (under mutex)
  int quit;          // consumer exits after the batch that sets it (consumer thread only)
  int eventfd;
  int epoll;
  int consumer_cpu;
};

static int queue_open(struct posting_queue *q, int consumer_cpu) {
  *q = (struct posting_queue){.consumer_cpu = consumer_cpu};
  pthread_mutex_init(&q->mutex, NULL);
  q->eventfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  q->epoll = epoll_create1(EPOLL_CLOEXEC);
  if (q->eventfd < 0 || q->epoll < 0) return errno;
  struct epoll_event event = {.events = EPOLLIN};
  return epoll_ctl(q->epoll, EPOLL_CTL_ADD, q->eventfd, &event) == 0 ? 0 : errno;
}

static void queue_close(struct posting_queue *q) {
  close(q->eventfd);
  close(q->epoll);
  pthread_mutex_destroy(&q->mutex);
}

// The write happens after unlocking: the consumer takes the mutex first thing when it wakes
// and would otherwise block on it at once.
static void queue_post(struct posting_queue *q, void (*run)(void *), void *context) {
  struct task *task = malloc(sizeof *task);
  task->next = NULL;
  task->run = run;
  task->context = context;
  pthread_mutex_lock(&q->mutex);
  if (q->tail) {
    q->tail->next = task;
  } else {
    q->head = task;
  }
  q->tail = task;
  int wake = q->sleeping && !q->wake_written;
  if (wake) {
    q->wake_written = 1;
    q->wakeups++;
  }
  pthread_mutex_unlock(&q->mutex);
  if (wake) {
    uint64_t one = 1;
    (void)!write(q->eventfd, &one, sizeof one);
  }
}

// One locked section per batch: clear `sleeping`, take the list, and, when it is empty and the
// eventfd is already drained, commit to sleeping. The eventfd is drained before that last look
// (never after it), so a post that lands in between is seen or wakes the next epoll_wait.
static void *queue_consume(void *arg) {
  struct posting_queue *q = arg;
  crb_pin_self(q->consumer_cpu);
  int readable = 0;
  while (!q->quit) {
    pthread_mutex_lock(&q->mutex);
    q->sleeping = 0;
    struct task *batch = q->head;
    q->head = q->tail = NULL;
    if (!batch && !readable) {
      q->sleeping = 1;
      q->wake_written = 0;
    }
    pthread_mutex_unlock(&q->mutex);
    if (batch) {
      while (batch) {
        struct task *next = batch->next;
        batch->run(batch->context);
        free(batch);
        batch = next;
      }
    } else if (readable) {
      uint64_t value;
      (void)!read(q->eventfd, &value, sizeof value);
      readable = 0;
    } else {
      struct epoll_event event;
      while (epoll_wait(q->epoll, &event, 1, -1) < 1) {
      }
      readable = 1;
    }
  }
  return NULL;
}

static void stop_consumer(void *context) { ((struct posting_queue *)context)->quit = 1; }

// MARK: as a wake

struct posting_wake {
  struct posting_queue queue;
  struct wake_run *run;
  _Atomic int next_index;
};

static void posting_work(void *context) {
  struct posting_wake *floor = context;
  // The first instruction of the posted work stamps; the index is the consumer's own count.
  int64_t woke = crb_now_ns();
  struct wake_run *run = floor->run;
  int index = atomic_load_explicit(&floor->next_index, memory_order_relaxed);
  run->samples[index] = woke - atomic_load_explicit(&run->posted_at, memory_order_acquire);
  atomic_store_explicit(&floor->next_index, index + 1, memory_order_relaxed);
  // The consumer runs this task, so it may set its own quit flag: the last sample ends it.
  if (index + 1 == run->count) floor->queue.quit = 1;
  atomic_store_explicit(&run->completed, index + 1, memory_order_release);
}

static void posting_post(struct wake_run *run, int index) {
  (void)index;
  struct posting_wake *floor = run->floor;
  queue_post(&floor->queue, posting_work, floor);
}

static void *posting_consumer(void *arg) {
  struct wake_run *run = arg;
  return queue_consume(&((struct posting_wake *)run->floor)->queue);
}

int crb_posting_latency(int64_t *samples, int count, int64_t min_gap_ns, int64_t max_gap_ns,
                        unsigned seed, int consumer_cpu) {
  struct posting_wake floor = {.next_index = 0};
  struct wake_run run = {
      .samples = samples, .count = count, .consumer_cpu = consumer_cpu, .floor = &floor};
  floor.run = &run;
  int result = queue_open(&floor.queue, consumer_cpu);
  if (result != 0) return result;
  result =
      wake_run_post_all(&run, posting_consumer, posting_post, min_gap_ns, max_gap_ns, seed);
  queue_close(&floor.queue);
  return result;
}

// MARK: throughput

struct throughput_run {
  struct posting_queue queue;
  _Atomic int64_t ran;
  int64_t share;
};

static void count_task(void *context) {
  struct throughput_run *run = context;
  atomic_fetch_add_explicit(&run->ran, 1, memory_order_relaxed);
}

struct poster_args {
  struct throughput_run *run;
  int64_t count;
};

static void *poster(void *arg) {
  struct poster_args *args = arg;
  for (int64_t index = 0; index < args->count; index++) {
    queue_post(&args->run->queue, count_task, args->run);
  }
  return NULL;
}

int crb_posting_throughput(int posters, int64_t tasks, double *seconds, int64_t *wakeups) {
  struct throughput_run run = {.ran = 0};
  int result = queue_open(&run.queue, -1);
  if (result != 0) return result;
  pthread_t consumer;
  result = pthread_create(&consumer, NULL, queue_consume, &run.queue);
  if (result != 0) return result;
  pthread_t threads[64];
  struct poster_args args[64];
  if (posters > 64) posters = 64;
  int64_t share = tasks / posters;
  int64_t start = crb_now_ns();
  for (int index = 0; index < posters; index++) {
    args[index] = (struct poster_args){
        .run = &run, .count = index == posters - 1 ? tasks - share * (posters - 1) : share};
    result = pthread_create(&threads[index], NULL, poster, &args[index]);
    if (result != 0) return result;
  }
  for (int index = 0; index < posters; index++) pthread_join(threads[index], NULL);
  while (atomic_load_explicit(&run.ran, memory_order_acquire) < tasks) sched_yield();
  *seconds = (double)(crb_now_ns() - start) / 1e9;
  pthread_mutex_lock(&run.queue.mutex);
  *wakeups = run.queue.wakeups;
  pthread_mutex_unlock(&run.queue.mutex);
  queue_post(&run.queue, stop_consumer, &run.queue);
  pthread_join(consumer, NULL);
  queue_close(&run.queue);
  return 0;
}
