#include "CBenchTimers.h"

#include "CBenchBaselines.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

// A node of the heap, embedded in the timer it orders: adding or removing a timer never
// allocates, and the tree is made of pointers between timers, as libuv's is.
struct heap_node {
  struct heap_node *left;
  struct heap_node *right;
  struct heap_node *parent;
};

// A timer laid out as libuv's uv_timer_t is on 64-bit Linux (152 bytes): the handle's fields
// first, then the callback, the heap node and the key. The node and key then straddle two
// cache lines as libuv's do, so a sift here touches the memory uv_timer_start/stop touch.
struct bench_timer {
  void *data;
  void *loop;
  int type;
  void (*close_cb)(void *);
  void *handle_queue[2];
  void *reserved[4];
  void *next_closing;
  unsigned flags;
  void (*callback)(struct bench_timer *);
  struct heap_node node;
  uint64_t due; // nanoseconds
  uint64_t repeat;
  uint64_t sequence; // creation order, to break ties between equal due dates
};

struct timer_heap {
  struct heap_node *root;
  unsigned count;
};

static struct bench_timer *timer_of(struct heap_node *node) {
  return (struct bench_timer *)((char *)node - offsetof(struct bench_timer, node));
}

static int precedes(struct heap_node *a, struct heap_node *b) {
  struct bench_timer *x = timer_of(a);
  struct bench_timer *y = timer_of(b);
  return x->due < y->due || (x->due == y->due && x->sequence < y->sequence);
}

// The link that holds (or is to hold) node number `n` of the tree, numbered 1 at the root in
// level order, and the node above it in *parent. The bits of n below its leading one, most
// significant first, spell the path: 0 goes left, 1 goes right. A pointer tree has no index to
// jump to, so this walk is how insert finds the free leaf and remove finds the last node.
static struct heap_node **link_to(struct timer_heap *heap, unsigned n,
                                  struct heap_node **parent) {
  struct heap_node **link = &heap->root;
  *parent = NULL;
  for (int bit = 30 - __builtin_clz(n); bit >= 0; bit--) {
    *parent = *link;
    link = ((n >> bit) & 1) ? &(*link)->right : &(*link)->left;
  }
  return link;
}

// Lifts `child` one level: it and its parent trade places in the tree. Only links change; the
// keys stay in their timers, which is what makes the nodes intrusive.
static void lift(struct timer_heap *heap, struct heap_node *child) {
  struct heap_node *parent = child->parent;
  struct heap_node *above = parent->parent;
  struct heap_node *left = child->left;
  struct heap_node *right = child->right;

  if (above == NULL) {
    heap->root = child;
  } else if (above->left == parent) {
    above->left = child;
  } else {
    above->right = child;
  }
  child->parent = above;

  if (parent->left == child) {
    child->left = parent;
    child->right = parent->right;
    if (child->right != NULL) child->right->parent = child;
  } else {
    child->right = parent;
    child->left = parent->left;
    if (child->left != NULL) child->left->parent = child;
  }
  parent->parent = child;

  parent->left = left;
  if (left != NULL) left->parent = parent;
  parent->right = right;
  if (right != NULL) right->parent = parent;
}

static void sift_up(struct timer_heap *heap, struct heap_node *node) {
  while (node->parent != NULL && precedes(node, node->parent)) lift(heap, node);
}

static void sift_down(struct timer_heap *heap, struct heap_node *node) {
  for (;;) {
    struct heap_node *first = node;
    if (node->left != NULL && precedes(node->left, first)) first = node->left;
    if (node->right != NULL && precedes(node->right, first)) first = node->right;
    if (first == node) return;
    lift(heap, first);
  }
}

static void heap_insert(struct timer_heap *heap, struct bench_timer *timer) {
  struct heap_node *node = &timer->node;
  struct heap_node *parent;
  struct heap_node **link = link_to(heap, heap->count + 1, &parent);
  node->left = NULL;
  node->right = NULL;
  node->parent = parent;
  *link = node;
  heap->count += 1;
  sift_up(heap, node);
}

// Takes the last node off the tree and puts it where `timer` was, then sifts it whichever way
// its key says: the O(log n) removal of uv_timer_stop.
static void heap_remove(struct timer_heap *heap, struct bench_timer *timer) {
  struct heap_node *node = &timer->node;
  struct heap_node *parent;
  struct heap_node **link = link_to(heap, heap->count, &parent);
  struct heap_node *last = *link;
  *link = NULL; // before reading node's children below: last may be one of them
  heap->count -= 1;
  if (last == node) return;

  last->left = node->left;
  last->right = node->right;
  last->parent = node->parent;
  if (last->left != NULL) last->left->parent = last;
  if (last->right != NULL) last->right->parent = last;
  if (node->parent == NULL) {
    heap->root = last;
  } else if (node->parent->left == node) {
    node->parent->left = last;
  } else {
    node->parent->right = last;
  }

  if (last->parent != NULL && precedes(last, last->parent)) {
    sift_up(heap, last);
  } else {
    sift_down(heap, last);
  }
}

// SplitMix64: the same small seeded generator the Swift study uses, so neither side's random
// numbers cost more than the other's.
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static void no_op(struct bench_timer *timer) { (void)timer; }

// One timer of its own allocation, due at `due` (ns), numbered `sequence`; NULL when out of
// memory.
static struct bench_timer *make_timer(uint64_t due, int sequence) {
  struct bench_timer *timer = malloc(sizeof(*timer));
  if (timer == NULL) return NULL;
  timer->due = due;
  timer->sequence = (uint64_t)sequence;
  timer->callback = no_op;
  timer->data = NULL;
  timer->loop = NULL;
  timer->flags = 0;
  timer->repeat = 0;
  return timer;
}

int crb_timer_heap_cost(int count, uint64_t seed, int64_t *add_ns, int64_t *cancel_ns) {
  struct bench_timer **timers = malloc(sizeof(*timers) * (size_t)(count > 0 ? count : 1));
  if (timers == NULL) return ENOMEM;
  // One allocation per timer, as each LoopTimer is its own object: the heap's pointers then
  // lead to scattered memory on both sides.
  uint64_t state = seed;
  uint64_t base = (uint64_t)crb_now_ns() + 3600000000000ULL;
  int created = 0;
  for (; created < count; created++) {
    struct bench_timer *timer = make_timer(base + next_random(&state) % 1000000000ULL, created);
    if (timer == NULL) break;
    timers[created] = timer;
  }
  int result = created < count ? ENOMEM : 0;

  struct timer_heap heap = {NULL, 0};
  if (result == 0) {
    int64_t start = crb_now_ns();
    for (int i = 0; i < count; i++) heap_insert(&heap, timers[i]);
    *add_ns = crb_now_ns() - start;
    if (heap.count != (unsigned)count) result = EINVAL;

    for (int i = count - 1; i > 0; i--) {
      int j = (int)(next_random(&state) % (uint64_t)(i + 1));
      struct bench_timer *swap = timers[i];
      timers[i] = timers[j];
      timers[j] = swap;
    }
    start = crb_now_ns();
    for (int i = 0; i < count; i++) heap_remove(&heap, timers[i]);
    *cancel_ns = crb_now_ns() - start;
    if (heap.count != 0 || heap.root != NULL) result = EINVAL;
  }

  for (int i = 0; i < created; i++) free(timers[i]);
  free(timers);
  return result;
}

int crb_timer_heap_arm_cost(int count, uint64_t seed, int64_t *arm_ns) {
  struct bench_timer **timers = malloc(sizeof(*timers) * (size_t)(count > 0 ? count : 1));
  if (timers == NULL) return ENOMEM;
  uint64_t state = seed;
  uint64_t base = (uint64_t)crb_now_ns() + 3600000000000ULL;
  struct timer_heap heap = {NULL, 0};
  int created = 0;
  // Each timer is allocated, filled in and inserted in the timed loop: what arming a new
  // timer costs a program whose timers are objects of their own (a CFRunLoopTimer, a
  // LoopTimer made by IsolatedLoop.addTimer).
  int64_t start = crb_now_ns();
  for (; created < count; created++) {
    struct bench_timer *timer = make_timer(base + next_random(&state) % 1000000000ULL, created);
    if (timer == NULL) break;
    heap_insert(&heap, timer);
    timers[created] = timer;
  }
  *arm_ns = crb_now_ns() - start;
  int result = created < count ? ENOMEM : 0;
  if (result == 0 && heap.count != (unsigned)count) result = EINVAL;
  for (int i = 0; i < created; i++) free(timers[i]);
  free(timers);
  return result;
}
