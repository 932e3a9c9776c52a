// The arguments of the row kernels: where the rows start, how far apart they are, which row
// range to process, and the per-row and per-feature outputs. Row kernels see nothing else, so
// strided rows and parallel row ranges need no change to them.
#pragma once

#include <cstddef>

#include "../types.hpp"

namespace normkit::detail {

/// How a pass prefetches the rows it reads ahead: into L2 (NORMKIT_PREFETCH), or with the
/// non-temporal hint (NORMKIT_PREFETCH_NTA, see layer_norm_ahead_hint).
enum class AheadHint { into_l2, non_temporal };

template <class T>
struct ForwardRows {
  using A = accum_t<T>;
  const T* x;
  std::size_t x_stride;  // elements from one row to the next
  T* y;                  // may equal x (in place)
  std::size_t y_stride;
  std::size_t features;
  const A* gamma;  // nullptr: no scale
  const A* beta;   // nullptr: no shift
  A* mean;         // nullptr: not saved (and always for RMSNorm)
  A* rstd;         // nullptr: not saved
  double eps;
  bool stream;      // y bypasses the cache (see should_stream)
  bool in_cache;    // x and y leave at least half the last-level cache free (see fits_cache)
  bool x_in_cache;  // x alone fits the last-level cache (see input_fits_cache)
  AheadHint ahead_hint;  // of LayerNorm's passes (see layer_norm_ahead_hint); RMSNorm's go into L2
  std::size_t cached_group_bytes;  // input per group of rows where in_cache (see detail::cached_group_bytes())
};

template <class T>
struct BackwardRows {
  using A = accum_t<T>;
  const T* dy;
  std::size_t dy_stride;
  const T* x;
  std::size_t x_stride;
  T* dx;  // nullptr: not wanted; may equal dy or x
  std::size_t dx_stride;
  std::size_t features;
  const A* gamma;    // nullptr: no scale
  const A* mean;     // nullptr for RMSNorm
  const A* rstd;
  double eps;        // read by the driver only, for rows whose rstd overflowed (see overflowed_rows.hpp)
  A* grad_gamma;     // nullptr: not wanted; otherwise dy·x̂ of every row is added in
  A* grad_beta;      // nullptr: not wanted; otherwise dy of every row is added in
  bool stream;       // dx bypasses the cache (see should_stream)
  bool in_cache;     // x, dy and dx leave at least half the last-level cache free (see fits_cache)
  bool wide_reads_ahead;  // vectors of more than 32 bytes read ahead too (see wide_backward_reads_ahead)
};

}  // namespace normkit::detail
