// Which instruction sets this translation unit can hold kernels for, and how code is compiled
// for one of them without a -march flag.
#pragma once

// With GCC and Clang on x86-64 the AVX2 and AVX-512 kernels are compiled under target
// attributes whatever the -march flags, and chosen at run time. Other compilers get only what
// their flags enable (the compile-time path).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define NORMKIT_TARGET_ATTRIBUTES 1
#define NORMKIT_HAVE_AVX2 1
#define NORMKIT_HAVE_AVX512 1
#define NORMKIT_HAVE_AVX512_BF16 1
#else
#define NORMKIT_TARGET_ATTRIBUTES 0
#if defined(__AVX2__) && defined(__FMA__)
#define NORMKIT_HAVE_AVX2 1
#else
#define NORMKIT_HAVE_AVX2 0
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#define NORMKIT_HAVE_AVX512 1
#else
#define NORMKIT_HAVE_AVX512 0
#endif
#if NORMKIT_HAVE_AVX512 && defined(__AVX512BF16__)
#define NORMKIT_HAVE_AVX512_BF16 1
#else
#define NORMKIT_HAVE_AVX512_BF16 0
#endif
#endif

// Advanced SIMD is part of every AArch64 CPU, so NEON needs no run-time check.
#if defined(__aarch64__) || defined(_M_ARM64)
#define NORMKIT_HAVE_NEON 1
#else
#define NORMKIT_HAVE_NEON 0
#endif

// NORMKIT_TARGET_PUSH("avx2,fma") ... NORMKIT_TARGET_POP(): every function defined between the
// two is compiled for that target, as Highway's HWY_BEFORE_NAMESPACE does. Functions must be
// defined inside the region (not just instantiated there) to be inlined into each other.
#if NORMKIT_TARGET_ATTRIBUTES && defined(__clang__)
#define NORMKIT_PRAGMA(x) _Pragma(#x)
#define NORMKIT_TARGET_PUSH(targets) \
  NORMKIT_PRAGMA(clang attribute push(__attribute__((target(targets))), apply_to = function))
#define NORMKIT_TARGET_POP() NORMKIT_PRAGMA(clang attribute pop)
#elif NORMKIT_TARGET_ATTRIBUTES
#define NORMKIT_PRAGMA(x) _Pragma(#x)
#define NORMKIT_TARGET_PUSH(targets) NORMKIT_PRAGMA(GCC push_options) NORMKIT_PRAGMA(GCC target(targets))
#define NORMKIT_TARGET_POP() NORMKIT_PRAGMA(GCC pop_options)
#else
#define NORMKIT_TARGET_PUSH(targets)
#define NORMKIT_TARGET_POP()
#endif

// Fully unrolls the next loop (a fixed count over a block of registers); clang honours GCC's
// spelling.
#if defined(__GNUC__) || defined(__clang__)
#define NORMKIT_UNROLL _Pragma("GCC unroll 16")
#else
#define NORMKIT_UNROLL
#endif

// Forces inlining of the small helpers that hold a row in registers: if one of them stayed a
// call, its array of vectors would have to live in memory. Also of the general path's per-row
// statistics, whose scalar tail otherwise stays a call (see layer_norm_row).
#if defined(__GNUC__) || defined(__clang__)
#define NORMKIT_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define NORMKIT_ALWAYS_INLINE inline
#endif

// Makes the value v come from a register at this point, so that later uses share it. GCC folds
// a load into every instruction that uses the value when no store comes between them, loading
// it once per use: the backward tiles loaded each vector of dy three times, and single rows so
// compiled ran 14% slower (768 floats, AVX-512). On x86 the "v" constraint needs SSE2 for the
// scalar kernels' doubles.
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__SSE2__))
#define NORMKIT_IN_REGISTER(v) __asm__("" : "+v"(v))
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
#define NORMKIT_IN_REGISTER(v) __asm__("" : "+w"(v))
#else
#define NORMKIT_IN_REGISTER(v) ((void)(v))
#endif

// A hint to bring the cache line holding p into L2 (locality 2: prefetcht1 on x86, PLDL2KEEP on
// AArch64), ahead of its use. The kernels read ahead a row, half a row or a group of short rows
// at a time, 3 KiB and more; into a 32 KiB L1 those lines evicted what the current row still
// reads there (its x, γ, β, the gradient partials), and L1's own prefetcher brings them on
// from L2. Predicted: +10% for LayerNorm forward at 4096×768 and 8192×4096, +20% backward at
// 4096×768, ±3% in cache. Measured on Zen 4 (normkit_bench, AVX-512, one thread, float, best
// of two alternated runs), L1 → L2: LayerNorm forward 4096×768 31.5 → 37.0 GiB/s, 32768×768
// 25.7 → 31.6, 8192×4096 19.9 → 24.5; backward 4096×768 18.0 → 25.8, 32768×768 20.7 → 26.5;
// RMSNorm forward 32768×768 25.9 → 38.0; 65536×64 (standalone harness) LayerNorm 20.8 → 29.1,
// RMSNorm 31.6 → 45.3; double forward up to +36%, 16-bit types 0 to +20%. Losses: RMSNorm
// forward 4096×64, whose rows come from the last-level cache, 59.8 → 54.2, and on AVX2
// LayerNorm forward 32768×768, −5 to −16% in four harness runs where AVX-512 gained 8%.
#if defined(__GNUC__) || defined(__clang__)
#define NORMKIT_PREFETCH(p) __builtin_prefetch(p, 0, 2)
#else
#define NORMKIT_PREFETCH(p) ((void)(p))
#endif

// A non-temporal prefetch of the cache line holding p (locality 0: prefetchnta on x86,
// PLDL1STRM on AArch64), for LayerNorm's forward passes over floats and doubles on a Zen 5
// (see layer_norm_ahead_hint in driver.hpp).
#if defined(__GNUC__) || defined(__clang__)
#define NORMKIT_PREFETCH_NTA(p) __builtin_prefetch(p, 0, 0)
#else
#define NORMKIT_PREFETCH_NTA(p) ((void)(p))
#endif

// A hint to bring the cache line holding p into L1 (locality 3: prefetcht0, PLDL1KEEP), for the
// short-row kernels' next group: a few KiB, which its first phase then reads all at once.
#if defined(__GNUC__) || defined(__clang__)
#define NORMKIT_PREFETCH_L1(p) __builtin_prefetch(p, 0, 3)
#else
#define NORMKIT_PREFETCH_L1(p) ((void)(p))
#endif
