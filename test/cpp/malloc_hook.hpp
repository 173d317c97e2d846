// A heap-call counter for the allocation tests' C++ consumers (executor_alloc,
// osc_alloc): replaces malloc & co. in the executable that includes it (glibc
// lets the main program interpose them) and forwards to glibc's own
// implementation. Set g_counting to count; g_allocs / g_frees hold the counts.
// Include it in exactly one translation unit of an executable.
#pragma once

#include <malloc.h>

#include <cstddef>
#include <cstdio>
#include <vector>

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

static bool g_counting = false;
static long g_allocs = 0, g_frees = 0;

extern "C" {
void* malloc(size_t n) {
  if (g_counting) ++g_allocs;
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  if (g_counting) ++g_allocs;
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  if (g_counting) ++g_allocs;
  return __libc_realloc(p, n);
}
void* memalign(size_t al, size_t n) {
  if (g_counting) ++g_allocs;
  return __libc_memalign(al, n);
}
void* aligned_alloc(size_t al, size_t n) {
  if (g_counting) ++g_allocs;
  return __libc_memalign(al, n);
}
int posix_memalign(void** out, size_t al, size_t n) {
  if (g_counting) ++g_allocs;
  *out = __libc_memalign(al, n);
  return *out ? 0 : 12;
}
void free(void* p) {
  if (g_counting && p) ++g_frees;
  __libc_free(p);
}
}

// The control every consumer runs first: an allocation made while counting must be counted,
// or the zero counts that follow prove nothing. Prints "control_allocs=N" (the tests require
// N >= 1) and resets the counts; false if the probe reads back wrong (using the value keeps
// the compiler from dropping the allocation).
static bool count_control_allocation() {
  g_counting = true;
  {
    std::vector<double> probe(100, 1.0);
    if (probe[99] != 1.0) return false;
  }
  g_counting = false;
  std::printf("control_allocs=%ld\n", g_allocs);
  g_allocs = g_frees = 0;
  return true;
}
