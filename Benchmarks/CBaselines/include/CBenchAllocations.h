// CBenchAllocations: counts calls to the C allocator (malloc and its kin), process-wide, while
// counting is on. runloop-bench defines these allocator entry points itself, forwarding to
// glibc's, so that every allocation of every library in the process passes here first.
// Under a sanitizer (which replaces the allocator) nothing is counted.
#ifndef CBENCHALLOCATIONS_H
#define CBENCHALLOCATIONS_H

#include <stdint.h>

/// 1 when this build counts allocations, 0 under a sanitizer.
int crb_allocations_countable(void);

/// Starts counting from zero; returns nothing.
void crb_allocations_start(void);

/// Stops counting and returns the allocations counted since `crb_allocations_start`.
int64_t crb_allocations_stop(void);

#endif
