// Allocation counting for runloop-bench (see CBenchAllocations.h). The executable's own
// definitions of malloc, calloc, realloc and the aligned allocators take precedence over
// glibc's for every shared library (the dynamic linker looks in the executable first); each
// forwards to glibc's internal entry point. `free` is left to glibc: these are its blocks.
#define _GNU_SOURCE
#include "CBenchAllocations.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define CRB_NO_COUNTING 1
#endif
#endif

#ifndef CRB_NO_COUNTING

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static atomic_int counting;
static atomic_llong counted;

static inline void count_one(void) {
  if (atomic_load_explicit(&counting, memory_order_relaxed))
    atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed);
}

void *malloc(size_t size) {
  count_one();
  return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
  count_one();
  return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
  count_one();
  return __libc_realloc(pointer, size);
}

void *memalign(size_t alignment, size_t size) {
  count_one();
  return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
  count_one();
  return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
  if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
  count_one();
  void *pointer = __libc_memalign(alignment, size);
  if (pointer == NULL) return ENOMEM;
  *result = pointer;
  return 0;
}

int crb_allocations_countable(void) { return 1; }

void crb_allocations_start(void) {
  atomic_store(&counted, 0);
  atomic_store(&counting, 1);
}

int64_t crb_allocations_stop(void) {
  atomic_store(&counting, 0);
  return atomic_load(&counted);
}

#else

int crb_allocations_countable(void) { return 0; }
void crb_allocations_start(void) {}
int64_t crb_allocations_stop(void) { return 0; }

#endif
