// Row kernels of LayerNorm and RMSNorm, written once over the vector operations Simd<A> of one
// instruction set (see arch/scalar.hpp for the list).
//
// detail/dispatch.hpp includes this file once per instruction set, with NORMKIT_KERNEL_NS
// naming that set's namespace and inside its target region, so that every kernel is compiled
// for the set and inlines its vector operations. Hence no include guard, and no #include:
// a standard header first seen inside a target region would be compiled for that target.
//
// Accuracy plan (DESIGN §2), shared by every kernel here:
// - Rows are read in chunks of kChunkVectors vectors. Within a chunk each lane accumulates in
//   A; chunks are combined in double. A lane thus adds at most 64 terms in A, however long the
//   row (65537 in the tests).
// - LayerNorm statistics are Welford-style per lane: each block of kBlock vectors (or, where 8
//   to 15 vectors remain, one of kHalfBlock) is reduced exactly by two passes over registers,
//   then merged into the running lane moments with Chan's formula (block weights from a table,
//   no division in the loop). The values are shifted by the row's first element first, so rows
//   like 2000 + N(0,1) are accumulated as N(0,1)-sized numbers and the mean is recovered as a
//   hi/lo pair.

#ifndef NORMKIT_KERNEL_NS
#error "detail/kernels-inl.hpp is included by detail/dispatch.hpp only"
#endif

namespace normkit::detail::NORMKIT_KERNEL_NS {

// kBlock = 16 vectors per lane update. A block costs 16 shifts (a sub, or an FMA when the row
// is rescaled), 16 adds (sum), 16 subs and 16 FMAs (squared deviations) and 6 ops to merge:
// 4.4 ops per vector, against 4.75 with blocks of 8 and 5.5 with blocks of 4. The serial part
// (the running mean's sub + FMA, 3 + 4 cycles of latency on Zen 4 and Skylake) stays far below
// the ~35 cycles the block's 70 ops need on two pipes. On a Xeon whose 512-bit adds and FMAs
// issue at 2.6 G/s, one port's worth, these ops bound a long row's statistics pass: blocks of
// 8 → 16, predicted +3% at 1024×4096 floats, measured in normkit_bench (one thread, AVX-512,
// floats, five alternated runs, best and median): 1024×4096 +3% and +4%, 256×16384 +5% and
// +8%, 4096×768 −2% and +6%, against a copy at 25 GiB/s. On AVX2, where a block spills some of
// its 16 registers, ±1%. Where 8 to 15 vectors remain after the blocks, 8 of them go as one
// block (kHalfBlock): left to the tail, two passes of one chain each, they had cost 4096×500
// floats 6%.
inline constexpr std::size_t kBlock = 16;
inline constexpr std::size_t kHalfBlock = kBlock / 2;
inline constexpr std::size_t kChunkVectors = 64;
static_assert(kChunkVectors % kBlock == 0, "a chunk holds whole blocks");

/// Chan's weights for merging block b + 1 (Block values per lane) into the b blocks before it:
/// the mean moves by delta / (b + 1), and M2 gains delta² · Block · b / (b + 1).
template <class A, std::size_t Block>
struct BlockWeights {
  static constexpr std::size_t blocks = kChunkVectors / Block;  // per chunk
  A mean[blocks];
  A m2[blocks];
  constexpr BlockWeights() : mean(), m2() {
    for (std::size_t b = 0; b < blocks; ++b) {
      mean[b] = A(1) / static_cast<A>(b + 1);
      m2[b] = static_cast<A>(Block * b) / static_cast<A>(b + 1);
    }
  }
};

/// Moments of `lanes` runs of equal length `per_lane`, one per lane of (mean, m2): Chan's
/// formula for equal counts, M2 = ΣM2ᵢ + per_lane·Σ(meanᵢ − mean)², vectorized.
template <class A>
Moments merge_lanes(typename Simd<A>::vec mean, typename Simd<A>::vec m2, std::size_t per_lane) {
  using S = Simd<A>;
  const A lanes_mean = S::sum(mean) / static_cast<A>(S::lanes);
  const typename S::vec dev = S::sub(mean, S::set(lanes_mean));
  const double n = static_cast<double>(per_lane);
  return {n * static_cast<double>(S::lanes), static_cast<double>(lanes_mean),
          static_cast<double>(S::sum(m2)) + n * static_cast<double>(S::sum(S::mul(dev, dev)))};
}

/// d = x·scale − shift. Rows that need no rescaling (all but overflowing or underflowing ones)
/// take a plain subtraction: on Zen 4 a 512-bit FMA occupies both FMA pipes, which the
/// rest of each kernel keeps busy, while the adder pipes have room.
template <bool Scaled, class A>
struct Shift {
  using S = Simd<A>;
  using V = typename S::vec;
  V scale, neg_shift;
  Shift(A scale_value, A shift) : scale(S::set(scale_value)), neg_shift(S::set(-shift)) {}
  NORMKIT_ALWAYS_INLINE V operator()(V x) const {
    if constexpr (Scaled) return S::mul_add(x, scale, neg_shift);
    else return S::add(x, neg_shift);
  }
};

/// Moments of d = x·scale − shift over n (> 0, < kHalfBlock·lanes) values: two passes from memory.
template <class T, class A, class Shifter>
Moments tail_moments(const T* x, std::size_t n, const Shifter& shift) {
  using S = Simd<A>;
  using V = typename S::vec;
  constexpr std::size_t W = S::lanes;
  V acc = S::zero();
  std::size_t j = 0;
  for (; j + W <= n; j += W) acc = S::add(acc, shift(S::load(x + j)));
  if (j < n) acc = S::add(acc, S::keep_n(shift(S::load_n(x + j, n - j)), n - j));
  const A mean = S::sum(acc) / static_cast<A>(n);
  const V vmean = S::set(mean);
  V m2 = S::zero();
  for (j = 0; j + W <= n; j += W) {
    const V e = S::sub(shift(S::load(x + j)), vmean);
    m2 = S::mul_add(e, e, m2);
  }
  if (j < n) {
    const V e = S::keep_n(S::sub(shift(S::load_n(x + j, n - j)), vmean), n - j);
    m2 = S::mul_add(e, e, m2);
  }
  return {static_cast<double>(n), static_cast<double>(mean), static_cast<double>(S::sum(m2))};
}

/// Prefetches the line at p, a point in the row that a pass reads ahead (see write_row).
/// Where a vector of A takes more than 32 bytes of T (AVX-512 with floats or doubles), a
/// second prefetch 16 bytes on, mostly into the same line, gives each line as many prefetches
/// as AVX2's vectors do: on Zen 4, rows from memory had run faster on AVX2 than on AVX-512
/// (normkit_bench, floats: LayerNorm backward 8192×4096 29.0 against 22.0 GiB/s, RMSNorm
/// forward 39.2 against 27.5). With it, AVX-512 in a standalone harness: LayerNorm backward
/// 1024×4096 21.8 → 25.0, 256×16384 20.9 → 23.1, 8192×4096 18.6 → 19.6, RMSNorm forward
/// 8192×4096 24.9 → 26.3. It costs streamed rows of 768 floats: LayerNorm forward 32768×768
/// lost 8–10% in normkit_bench and in the harness (RMSNorm 5%), and without the repeat in
/// write_row still 6%, with the gain at 8192×4096 gone. The same repeat on AVX2 measured −4 to
/// +4%, and 16-bit types on AVX-512 (32 bytes a vector) were not tried with it. AVX-512 still
/// trails AVX2 on some rows from memory (RMSNorm forward 8192×4096: 33.0 against 38.7).
///
/// Hint picks the prefetch: into L2, or non-temporal (see layer_norm_ahead_hint in driver.hpp).
/// A template parameter, so that no loop tests it once a vector; layer_norm_row and
/// layer_norm_apply pick it once a row.
template <class A, AheadHint Hint, class T>
NORMKIT_ALWAYS_INLINE void read_ahead(const T* p) {
  constexpr std::size_t W = Simd<A>::lanes;
  if constexpr (Hint == AheadHint::non_temporal) {
    NORMKIT_PREFETCH_NTA(p);
    if constexpr (W * sizeof(T) > 32) NORMKIT_PREFETCH_NTA(p + W / 4);
  } else {
    NORMKIT_PREFETCH(p);
    if constexpr (W * sizeof(T) > 32) NORMKIT_PREFETCH(p + W / 4);
  }
}

/// Moments of d = x·scale − shift over `blocks` (≤ BlockWeights::blocks) blocks of Block
/// vectors from x: each block reduced exactly by two passes over registers, then merged into
/// the lanes' running moments with Chan's formula. Reads ahead into `ahead`, unless nullptr,
/// with Hint (see write_row).
template <std::size_t Block, AheadHint Hint, class T, class A, class Shifter>
NORMKIT_ALWAYS_INLINE Moments block_moments(const T* x, std::size_t blocks, const Shifter& shift, const T* ahead) {
  using S = Simd<A>;
  using V = typename S::vec;
  constexpr std::size_t W = S::lanes;
  static constexpr BlockWeights<A, Block> weights{};
  const V inv_block = S::set(A(1) / A(Block));
  V mean = S::zero(), m2 = S::zero();
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t j = b * Block * W;
    V d[Block];
    NORMKIT_UNROLL
    for (std::size_t k = 0; k < Block; ++k) d[k] = shift(S::load(x + j + k * W));
    if (ahead != nullptr) {
      NORMKIT_UNROLL
      for (std::size_t k = 0; k < Block; k += 2) read_ahead<A, Hint>(ahead + (j + k * W) / 2);
    }
    V even = d[0], odd = d[1];  // two chains halve the sum's latency
    NORMKIT_UNROLL
    for (std::size_t k = 2; k < Block; k += 2) {
      even = S::add(even, d[k]);
      odd = S::add(odd, d[k + 1]);
    }
    const V block_mean = S::mul(S::add(even, odd), inv_block);
    V e = S::sub(d[0], block_mean), f = S::sub(d[1], block_mean);
    even = S::mul(e, e);
    odd = S::mul(f, f);
    NORMKIT_UNROLL
    for (std::size_t k = 2; k < Block; k += 2) {
      e = S::sub(d[k], block_mean);
      f = S::sub(d[k + 1], block_mean);
      even = S::mul_add(e, e, even);
      odd = S::mul_add(f, f, odd);
    }
    const V delta = S::sub(block_mean, mean);
    mean = S::mul_add(delta, S::set(weights.mean[b]), mean);
    m2 = S::add(m2, S::mul_add(S::mul(delta, delta), S::set(weights.m2[b]), S::add(even, odd)));
  }
  return merge_lanes<A>(mean, m2, blocks * Block);
}

/// Moments of d = x·scale − shift over a row of n values: chunks of blocks of kBlock vectors,
/// then at most one of kHalfBlock, then the tail. Reads ahead into `ahead`, unless nullptr, with Hint.
template <class T, class A, AheadHint Hint = AheadHint::into_l2, class Shifter>
Moments shifted_moments(const T* x, std::size_t n, const Shifter& shift, const T* ahead = nullptr) {
  constexpr std::size_t W = Simd<A>::lanes, step = kBlock * W, chunk_blocks = BlockWeights<A, kBlock>::blocks;
  Moments total;
  std::size_t j = 0;
  // The point of the next row that column j reads ahead into: its first half (see write_row).
  const auto ahead_of = [ahead](std::size_t column) { return ahead != nullptr ? ahead + column / 2 : nullptr; };
  while (n - j >= step) {
    const std::size_t blocks = (n - j) / step < chunk_blocks ? (n - j) / step : chunk_blocks;
    total = merge(total, block_moments<kBlock, Hint, T, A>(x + j, blocks, shift, ahead_of(j)));
    j += blocks * step;
  }
  if (n - j >= kHalfBlock * W) {
    total = merge(total, block_moments<kHalfBlock, Hint, T, A>(x + j, 1, shift, ahead_of(j)));
    j += kHalfBlock * W;
  }
  if (j < n) total = merge(total, tail_moments<T, A>(x + j, n - j, shift));
  return total;
}

/// Writes nothing: the writer of a row_sums pass that only reads.
struct NoWriter {
  template <bool Full>
  NORMKIT_ALWAYS_INLINE void column(std::size_t, std::size_t) const {}
};

/// Sums of N per-element terms over a row of n values. `terms.add(j, acc)` adds the terms of
/// the full vector at j into acc[0..N); `terms.add_n(j, count, acc)` those of the first count
/// lanes. Accumulated in A within chunks and in double across them. kSets independent sets of
/// accumulators: an add or FMA has 4 cycles of latency and two issue per cycle, so 8 chains
/// keep both ports busy; with 3 terms, 2 sets (6 chains) fit AVX2's 16 registers. The first
/// halves of the rows at `ahead` and `ahead_too` are read ahead where they are not nullptr
/// (see write_row). `writer.column<Full>(j, count)` is called for every vector read, whole
/// (Full) or the row's last `count` values: it writes the previous row's output at the same
/// columns (RowWriter, see forward_fused; TileWriter, see backward_fused), or nothing
/// (NoWriter).
template <class A, std::size_t N, class Terms, class T = float, class Writer = NoWriter>
void row_sums(std::size_t n, const Terms& terms_ref, double (&total)[N], const T* ahead = nullptr,
              const T* ahead_too = nullptr, const Writer& writer_ref = {}) {
  using S = Simd<A>;
  using V = typename S::vec;
  constexpr std::size_t W = S::lanes, chunk = kChunkVectors * W, kSets = N == 1 ? 8 : 2;
  // Local copies, as in write_row: the writer's stores could otherwise alias the caller's
  // objects, and each vector would load the terms' constants again.
  const Terms terms = terms_ref;
  const Writer writer = writer_ref;
  for (std::size_t i = 0; i < N; ++i) total[i] = 0;
  for (std::size_t j = 0; j < n;) {
    const std::size_t end = n - j > chunk ? j + chunk : n;
    V acc[kSets][N];
    NORMKIT_UNROLL
    for (std::size_t s = 0; s < kSets; ++s) {
      NORMKIT_UNROLL
      for (std::size_t i = 0; i < N; ++i) acc[s][i] = S::zero();
    }
    for (; j + kSets * W <= end; j += kSets * W) {
      NORMKIT_UNROLL
      for (std::size_t s = 0; s < kSets; ++s) {
        terms.add(j + s * W, acc[s]);
        writer.template column<true>(j + s * W, W);
      }
      if (ahead != nullptr) {
        NORMKIT_UNROLL
        for (std::size_t s = 0; s < kSets; s += 2) read_ahead<A, AheadHint::into_l2>(ahead + (j + s * W) / 2);
      }
      if (ahead_too != nullptr) {
        NORMKIT_UNROLL
        for (std::size_t s = 0; s < kSets; s += 2) read_ahead<A, AheadHint::into_l2>(ahead_too + (j + s * W) / 2);
      }
    }
    for (; j + W <= end; j += W) {
      terms.add(j, acc[0]);
      writer.template column<true>(j, W);
    }
    if (j < end) {
      terms.add_n(j, end - j, acc[0]);
      writer.template column<false>(j, end - j);
      j = end;
    }
    NORMKIT_UNROLL
    for (std::size_t i = 0; i < N; ++i) {
      V sum = acc[0][i];
      NORMKIT_UNROLL
      for (std::size_t s = 1; s < kSets; ++s) sum = S::add(sum, acc[s][i]);
      total[i] += static_cast<double>(S::sum(sum));
    }
  }
}

/// A full vector (Full) or the first `count` lanes at p.
template <bool Full, class T>
auto load(const T* p, std::size_t count) {
  using S = Simd<accum_t<T>>;
  if constexpr (Full) return S::load(p);
  else return S::load_n(p, count);
}

/// Stores a full vector (Full) or its first `count` lanes at p, rounded to T.
template <bool Full, class T, class V>
NORMKIT_ALWAYS_INLINE void put(T* p, V v, std::size_t count) {
  using S = Simd<accum_t<T>>;
  if constexpr (Full) S::store(p, v);
  else S::store_n(p, v, count);
}

/// A full vector at p, rounded to T; with Stream bypassing the cache (p aligned for it).
template <bool Stream, class T, class V>
NORMKIT_ALWAYS_INLINE void put_full(T* p, V v) {
  using S = Simd<accum_t<T>>;
  if constexpr (Stream) S::stream(p, v);
  else S::store(p, v);
}

/// Elements before p reaches an address aligned for a whole vector of T.
template <class A, class T>
std::size_t unaligned_head(const T* p) {
  constexpr std::size_t W = Simd<A>::lanes;
  return (W - (reinterpret_cast<std::uintptr_t>(p) / sizeof(T)) % W) % W;
}

/// Whether every row of y, `stride` elements apart, starts aligned for a whole vector.
template <class A, class T>
bool every_row_aligned(const T* y, std::size_t stride) {
  constexpr std::size_t bytes = Simd<A>::lanes * sizeof(T);
  return reinterpret_cast<std::uintptr_t>(y) % bytes == 0 && stride * sizeof(T) % bytes == 0;
}

/// Reading ahead. A row takes two passes, statistics then output, and on their own the first
/// only reads and the second mostly writes, so memory idles in turn. Each pass therefore
/// prefetches half of the row that comes next (`ahead`: the statistics pass its first half,
/// the output pass its second, spread over its blocks of columns where it writes in blocks),
/// a prefetch or two for every vector or two processed (see read_ahead), which keeps reads in
/// flight throughout. Measured on 8192×4096 floats (AVX-512, one thread): LayerNorm forward
/// 17.7 → 20–22 GB/s, against 30 GB/s for a copy. Where x and y leave half the last-level cache
/// free (ForwardRows::in_cache), the forward passes read nothing ahead: there the hardware
/// prefetcher keeps up, and the prefetches only took issue slots. Without them (Zen 5, one
/// thread, floats, medians of 15 paired trials), time: AVX-512 LayerNorm 1024×768 0.92, 256×768
/// 0.94, 4096×384 0.91, 2048×1024 0.90, 512×2048 0.90, 64×4096 0.85, RMSNorm 0.84–0.88 on the
/// same shapes; AVX2 LayerNorm 0.91–0.97, RMSNorm 0.77–0.82. Training forward likewise. Rows of
/// 64 KiB and more of an x that fits the last-level cache read nothing ahead either (see
/// kCachedLongRowBytes).
///
/// Writes y[0, n) from out.value<Full>(j, count), one vector at a time. With Stream the full
/// vectors bypass the cache (non-temporal stores, from the first aligned address on): for an
/// output that does not fit the last-level cache beside its input (see stream_min_bytes), a
/// normal store would first read each line it is about to overwrite, a third stream of memory
/// traffic next to reading x and writing y. Reads ahead into `ahead`, unless nullptr, with Hint.
template <bool Stream, class A, AheadHint Hint = AheadHint::into_l2, class T, class Out>
void write_row(T* y, std::size_t n, const Out& out_ref, const T* ahead = nullptr) {
  using S = Simd<A>;
  // A local copy: stores to y could alias the caller's object, forcing a reload of every
  // broadcast constant after every store; a local's address never escapes.
  const Out out = out_ref;
  constexpr std::size_t W = S::lanes;
  std::size_t j = 0;
  if constexpr (Stream) {
    const std::size_t head = unaligned_head<A>(y) < n ? unaligned_head<A>(y) : n;
    if (head > 0) S::store_n(y, out.template value<false>(0, head), head);
    for (j = head; j + W <= n; j += W) {
      if (ahead != nullptr) read_ahead<A, Hint>(ahead + j / 2);
      S::stream(y + j, out.template value<true>(j, W));
    }
  } else if (ahead != nullptr) {
    for (; j + W <= n; j += W) {
      read_ahead<A, Hint>(ahead + j / 2);
      S::store(y + j, out.template value<true>(j, W));
    }
  } else {
    for (; j + W <= n; j += W) S::store(y + j, out.template value<true>(j, W));
  }
  if (j < n) S::store_n(y + j, out.template value<false>(j, n - j), n - j);
}

/// A row's output, written column by column while row_sums reads the next row (see
/// forward_fused): out.value<Full>(j, count) into y, whose whole vectors must be aligned for
/// the non-temporal stores of Stream.
template <bool Stream, class A, class T, class Out>
struct RowWriter {
  T* y;
  Out out;
  template <bool Full>
  NORMKIT_ALWAYS_INLINE void column(std::size_t j, std::size_t count) const {
    if constexpr (Full) put_full<Stream>(y + j, out.template value<true>(j, count));
    else Simd<A>::store_n(y + j, out.template value<false>(j, count), count);
  }
};

/// Columns [from, from + count) of a row: what one output pass over it writes.
struct Columns {
  std::size_t from, count;
};

/// The largest |x| of a row, or NaN if any value is NaN or ±Inf: for the rows whose statistics
/// overflow or underflow, and for rows of zeros (in LayerNorm, any constant row), whose
/// variance or mean square 0 brings them here too: a batch's padding rows, where they are
/// longer than the registers hold (see declined_row). Vectorized for those: in scalar code it
/// took ~500 ns for a 768-float row (Zen 4, AVX-512), three times the rest of the row's
/// normalization.
template <class T>
double peak_magnitude(const T* x, std::size_t n) {
  using A = accum_t<T>;
  using S = Simd<A>;
  using V = typename S::vec;
  // x·0 is NaN exactly where x is NaN or ±Inf, and a NaN stays in `poison` once there.
  V peak = S::zero(), poison = S::zero();
  const auto take = [&](V v) {
    peak = S::max(peak, S::abs(v));
    poison = S::mul_add(v, S::zero(), poison);
  };
  std::size_t j = 0;
  for (; j + S::lanes <= n; j += S::lanes) take(S::load(x + j));
  if (j < n) take(S::load_n(x + j, n - j));
  if (S::sum(poison) != 0) return std::numeric_limits<double>::quiet_NaN();
  A each[S::lanes];
  S::store(each, peak);
  double largest = 0;
  for (const A v : each) largest = static_cast<double>(v) > largest ? static_cast<double>(v) : largest;
  return largest;
}

/// Whether every x[0, n) equals v exactly: false if any is NaN or ±Inf (|x − v| is NaN).
template <class T>
bool all_equal(const T* x, std::size_t n, accum_t<T> v) {
  using S = Simd<accum_t<T>>;
  const typename S::vec to = S::set(v);
  typename S::vec apart = S::zero();
  std::size_t j = 0;
  for (; j + S::lanes <= n; j += S::lanes) apart = S::add(apart, S::abs(S::sub(S::load(x + j), to)));
  if (j < n) apart = S::add(apart, S::abs(S::keep_n(S::sub(S::load_n(x + j, n - j), to), n - j)));
  return S::sum(apart) == 0;
}

// ---------------------------------------------------------------------------------------
// LayerNorm forward

/// How a LayerNorm row is normalized: y = ((x·scale − hi) − lo)·r·γ + β, where hi + lo is the
/// mean of x·scale (hi the nearest A, lo the remainder) and r = 1/sqrt(var(x·scale) + eps·scale²).
/// scale is 1 except for rows whose variance would overflow or underflow A.
template <class A>
struct LayerNormRow {
  A scale, hi, lo, r;
  double mean, rstd;  // of the unscaled row, as saved for backward
};

/// Σ(x·scale − hi) over the row: the remainder of the mean after hi.
template <class T, class A, class Shifter>
struct CenteredTerms {
  const T* x;
  Shifter shift;
  void add(std::size_t j, typename Simd<A>::vec* acc) const {
    using S = Simd<A>;
    acc[0] = S::add(acc[0], shift(S::load(x + j)));
  }
  void add_n(std::size_t j, std::size_t count, typename Simd<A>::vec* acc) const {
    using S = Simd<A>;
    acc[0] = S::add(acc[0], S::keep_n(shift(S::load_n(x + j, count)), count));
  }
};

/// The statistics of a LayerNorm row (see LayerNormRow): its moments, rescaled where the
/// variance would leave A's comfortable range, the mean as a hi/lo pair, and rstd. Reads ahead
/// into `ahead` with `hint` (see write_row).
///
/// Always inlined (GCC, Clang) into the forward driver, with LayerNormForward::statistics;
/// the vector passes (shifted_moments) stay calls. Timed on Zen 4 with rows in L1, a LayerNorm
/// row of 384, 768 or 1536 floats took 1.67 ns per vector of 16 plus ~65 ns (~240 cycles) per
/// row, and this function alone, called in a loop, 254 cycles at 768 floats, of which ~130
/// are its blocks of vectors. GCC 12 had kept it a call. Inlined, in a standalone harness
/// (AVX-512, one thread, float, best of six alternated runs): 4096×768 35.1 → 36.5 GiB/s,
/// 4096×384 27.4 → 29.5, 768×4096 23.8 → 24.8, 64×768 (in L2) 39.7 → 41.6; rows from DRAM
/// ±5%. Not measured: AVX2, NEON, Clang, doubles, 16-bit types beyond bfloat16 4096×768
/// (16.6 → 17.2). What the chain after the vectors still costs, measured by taking it out
/// (the moments computed, fixed statistics applied; Zen 4, medians of 11 paired trials): 0.93 of
/// the time at 1024×768, 0.95 at 4096×768 (both orders of the builds, see forward_fused) and
/// 0.96 at 32768×768. A shorter chain has little to win there. What the vector work could win,
/// measured by replacing the Welford blocks with passes that give no usable variance (Zen 5,
/// AVX-512, floats, page-aligned arrays, medians of 15 paired trials), time: a plain sum (two
/// operations a vector, where the blocks take 4.4): 4096×768 0.82, 1024×4096 0.94, 32768×768
/// 0.79, 8192×4096 0.77; sums of d and d² about x₀ (three operations a vector; the
/// E[d²] − E[d]² that DESIGN §2 rules out): 0.91, 0.95, 0.89 and 0.96 at the same shapes.
template <class T, class A = accum_t<T>>
NORMKIT_ALWAYS_INLINE LayerNormRow<A> layer_norm_row(const T* x, std::size_t n, double eps, const T* ahead = nullptr,
                                                     AheadHint hint = AheadHint::into_l2) {
  A scale = 1;
  A shift = static_cast<A>(x[0]);
  Moments m = hint == AheadHint::non_temporal
                  ? shifted_moments<T, A, AheadHint::non_temporal>(x, n, Shift<false, A>(scale, shift), ahead)
                  : shifted_moments<T, A>(x, n, Shift<false, A>(scale, shift), ahead);
  double var = m.m2 / m.count;
  // Variance overflowed A (or the row holds NaN/Inf), or is small enough to lose bits: rescale
  // finite, nonzero rows by a power of two and measure again. A NaN/Inf row keeps its NaN.
  if (!comfortable_variance<A>(var)) {
    const double peak = peak_magnitude(x, n);
    if (peak > 0 && peak <= std::numeric_limits<double>::max()) {
      scale = static_cast<A>(row_scale<A>(peak));
      shift = static_cast<A>(x[0]) * scale;
      m = shifted_moments<T, A>(x, n, Shift<true, A>(scale, shift));
      var = m.m2 / m.count;
    }
  }
  // shift + m.mean exactly, as a double pair, then as an A pair: for double rows the second
  // word is what keeps 1e4 + N(0,1) exact to the last digits.
  const TwoSum center = two_sum(static_cast<double>(shift), m.mean);
  const A hi = static_cast<A>(center.sum);
  A lo = static_cast<A>((center.sum - static_cast<double>(hi)) + center.error);
  // The first element was far from the mean (|mean − x₀| > 8σ), so the lanes accumulated
  // numbers of size |mean − x₀| and m.mean carries A's rounding at that size. Measure the
  // remainder after hi directly: x·scale − hi is now of the size of σ.
  if (m.mean * m.mean > 64 * var) {
    double sum[1];
    if (scale == 1) row_sums<A, 1>(n, CenteredTerms<T, A, Shift<false, A>>{x, Shift<false, A>(scale, hi)}, sum);
    else row_sums<A, 1>(n, CenteredTerms<T, A, Shift<true, A>>{x, Shift<true, A>(scale, hi)}, sum);
    lo = static_cast<A>(sum[0] / static_cast<double>(n));
  }
  const double s = static_cast<double>(scale);
  const Rstd r = scaled_rstd(var, eps, s);
  const double mean = static_cast<double>(hi) + static_cast<double>(lo);
  return {scale, hi, lo, static_cast<A>(applied_rstd<A>(r.applied)), mean / s, r.saved};
}

/// y = (x·scale − hi)·r − lo·r, then ·γ + β, one vector at a time (see write_row). x·scale − hi
/// is exact or of the size of σ, and lo·r is small beside it, so the FMA rounds once where
/// ((x·scale − hi) − lo)·r rounds twice, and it saves an operation per vector.
template <bool Gamma, bool Beta, class T, class A, class Shifter>
struct LayerNormOutput {
  using S = Simd<A>;
  using V = typename S::vec;
  const T* x;
  const A* gamma;
  const A* beta;
  Shifter shift;
  V r, neg_lo_r;

  template <bool Full>
  V value(std::size_t j, std::size_t count) const {
    V v = S::mul_add(shift(load<Full>(x + j, count)), r, neg_lo_r);
    if constexpr (Gamma && Beta) v = S::mul_add(v, load<Full>(gamma + j, count), load<Full>(beta + j, count));
    else if constexpr (Gamma) v = S::mul(v, load<Full>(gamma + j, count));
    return v;
  }
};

template <bool Stream, bool Gamma, bool Beta, class T, class A>
void layer_norm_apply(const ForwardRows<T>& a, const T* x, T* y, const LayerNormRow<A>& row, Columns c, const T* ahead) {
  using S = Simd<A>;
  const A* gamma = Gamma ? a.gamma + c.from : nullptr;
  const A* beta = Beta ? a.beta + c.from : nullptr;
  if (row.scale == 1) {
    const LayerNormOutput<Gamma, Beta, T, A, Shift<false, A>> out{x + c.from, gamma, beta, Shift<false, A>(row.scale, row.hi), S::set(row.r), S::set(-row.lo * row.r)};
    if (a.ahead_hint == AheadHint::non_temporal) write_row<Stream, A, AheadHint::non_temporal>(y + c.from, c.count, out, ahead);
    else write_row<Stream, A>(y + c.from, c.count, out, ahead);
  } else {
    write_row<Stream, A>(y + c.from, c.count, LayerNormOutput<Gamma, Beta, T, A, Shift<true, A>>{x + c.from, gamma, beta, Shift<true, A>(row.scale, row.hi), S::set(row.r), S::set(-row.lo * row.r)});
  }
}

// ---------------------------------------------------------------------------------------
// Short rows (DESIGN §2's allowed shortcut). A row of up to kRegisterVectors vectors is an
// exact two-pass over registers, and rows go by groups of kGroupRows, phase by phase: every
// row's sums, then the statistics of all rows together, then every output.
//
// Row by row, a 64-float LayerNorm row took 19 ns in L1 (AVX-512, ~60 cycles) for ~110
// instructions: its statistics are one serial chain of ~170 cycles (adds, two horizontal sums,
// divisions, a square root), and the reorder window holds only about three rows of it. Phase
// by phase, each phase holds a group's short independent chains and overlaps them; reloading
// the row from L1 in each phase costs a load and two subtractions per vector (one since),
// and the row takes 15.9 ns. The statistics then went from three horizontal sums, a division
// and a square root per row to vectors of them for `lanes` rows at a time (Simd::sums,
// row_totals): 4096×64 floats, AVX-512, +24% LayerNorm and +51% RMSNorm (which had stayed row
// by row until then).

// 16 registers: 256 floats on AVX-512, 128 on AVX2, 64 on NEON. With 8, rows just past them took
// the general path (a Welford block, a two-pass tail, Chan merges and scalar statistics per
// row) at 2–3 times the cost per row, below oneDNN: LayerNorm 4096×136 floats on AVX-512 went
// from 18.8 to 48.8 GiB/s (oneDNN 32.7), 4096×192 from 24.8 to 53.0, 4096×256 from 34.4 to
// 54.7; on AVX2 4096×96 from 15.2 to 41.6. AVX2 has 16 registers only, so its longest rows
// spill some of d[] to the stack; each phase reloads the row from L1 anyway, and those rows
// gained as much. The price is compile time: twice the short-row instantiations.
inline constexpr std::size_t kRegisterVectors = 16;

/// A row of n values, in Vectors registers d[k] (the last one holding `last` of them, lanes
/// past it zero). Vectors is a template parameter so that every loop over the registers
/// unrolls into straight-line code: with it at run time, each register cost a branch or two
/// per pass, and they, not the arithmetic, set the pace of a 64-float row.
template <std::size_t Vectors, class T, class A>
struct RegisterRow {
  using S = Simd<A>;
  using V = typename S::vec;
  static constexpr std::size_t W = S::lanes;
  V d[Vectors];
  std::size_t last;

  RegisterRow() = default;
  NORMKIT_ALWAYS_INLINE RegisterRow(const T* x, std::size_t n) : last(n - (Vectors - 1) * W) {
    NORMKIT_UNROLL
    for (std::size_t k = 0; k + 1 < Vectors; ++k) d[k] = S::load(x + k * W);
    d[Vectors - 1] = last == W ? S::load(x + (Vectors - 1) * W) : S::load_n(x + (Vectors - 1) * W, last);
  }

  /// d[k] − v, lanes past the row kept zero.
  NORMKIT_ALWAYS_INLINE void subtract(V v) {
    NORMKIT_UNROLL
    for (std::size_t k = 0; k + 1 < Vectors; ++k) d[k] = S::sub(d[k], v);
    d[Vectors - 1] = last == W ? S::sub(d[Vectors - 1], v) : S::keep_n(S::sub(d[Vectors - 1], v), last);
  }

  /// f(k, full, count) for each register k: full is std::true_type for a whole vector, else
  /// std::false_type with `count` lanes.
  template <class F>
  NORMKIT_ALWAYS_INLINE void for_each(F&& f) const {
    NORMKIT_UNROLL
    for (std::size_t k = 0; k + 1 < Vectors; ++k) f(k, std::true_type{}, W);
    if (last == W) f(Vectors - 1, std::true_type{}, W);
    else f(Vectors - 1, std::false_type{}, last);
  }

  /// Writes y[0, n) = out.value(d[k], j, count) (see CenteredOutput); with Stream, the full
  /// vectors bypass the cache, and y must be aligned for a whole vector.
  template <bool Stream, class Out>
  NORMKIT_ALWAYS_INLINE void store(T* y, const Out& out) const {
    NORMKIT_UNROLL
    for (std::size_t k = 0; k + 1 < Vectors; ++k) put_full<Stream>(y + k * W, out.template value<true>(d[k], k * W, W));
    constexpr std::size_t j = (Vectors - 1) * W;
    if (last == W) put_full<Stream>(y + j, out.template value<true>(d[Vectors - 1], j, W));
    else S::store_n(y + j, out.template value<false>(d[Vectors - 1], j, last), last);
  }
};

/// f(std::integral_constant<size_t, V>) for the V registers a row of n values (0 < n ≤
/// kRegisterVectors·lanes) takes.
template <class A, class F>
NORMKIT_ALWAYS_INLINE void with_register_count(std::size_t n, F&& f) {
  switch ((n + Simd<A>::lanes - 1) / Simd<A>::lanes) {
    case 1: f(std::integral_constant<std::size_t, 1>{}); break;
    case 2: f(std::integral_constant<std::size_t, 2>{}); break;
    case 3: f(std::integral_constant<std::size_t, 3>{}); break;
    case 4: f(std::integral_constant<std::size_t, 4>{}); break;
    case 5: f(std::integral_constant<std::size_t, 5>{}); break;
    case 6: f(std::integral_constant<std::size_t, 6>{}); break;
    case 7: f(std::integral_constant<std::size_t, 7>{}); break;
    case 8: f(std::integral_constant<std::size_t, 8>{}); break;
    case 9: f(std::integral_constant<std::size_t, 9>{}); break;
    case 10: f(std::integral_constant<std::size_t, 10>{}); break;
    case 11: f(std::integral_constant<std::size_t, 11>{}); break;
    case 12: f(std::integral_constant<std::size_t, 12>{}); break;
    case 13: f(std::integral_constant<std::size_t, 13>{}); break;
    case 14: f(std::integral_constant<std::size_t, 14>{}); break;
    case 15: f(std::integral_constant<std::size_t, 15>{}); break;
    default: f(std::integral_constant<std::size_t, 16>{}); break;
  }
}

/// γ and β (those wanted) for the outputs of a group of short rows, each row in Vectors
/// registers. Each row's output loaded them again, 8 of a 64-float LayerNorm row's 18 vector
/// loads on AVX-512: for all the compiler knew, the stores to y could change them (the API
/// rejects a y that overlaps them, which is what makes holding them safe). Here they are
/// loaded once per group and held in registers, on ISAs with 32 of them, where they leave four
/// beside the row. Predicted +15–20% at 64 floats, were the loads what limits such a row;
/// measured (one thread, AVX-512, floats, 4096 rows, standalone harness, best of six
/// alternated rounds): LayerNorm 64 floats 34.9 → 36.5 GiB/s, 96 40.4 → 42.5, 128 43.1 → 46.5,
/// 144 44.1 → 46.9; RMSNorm 64 55.9 → 56.0, 96 61.1 → 63.8, 128 61.5 → 64.7, 192 and 224 ±0.
/// So the loads were not the limit. Not held on AVX2: its 16 registers would spill. NEON,
/// doubles and 16-bit types follow the same register count unmeasured.
template <std::size_t Vectors, bool Gamma, bool Beta, class A>
struct ShortRowAffine {
  using S = Simd<A>;
  using V = typename S::vec;
  static constexpr bool kHeld = S::registers >= 32 && (1 + Gamma + Beta) * Vectors + 4 <= S::registers;
  const A* gamma;
  const A* beta;
  RegisterRow<Vectors, A, A> held_gamma, held_beta;

  NORMKIT_ALWAYS_INLINE ShortRowAffine(const A* gamma_in, const A* beta_in, std::size_t n)
      : gamma(gamma_in), beta(beta_in) {
    if constexpr (kHeld && Gamma) held_gamma = RegisterRow<Vectors, A, A>(gamma, n);
    if constexpr (kHeld && Beta) held_beta = RegisterRow<Vectors, A, A>(beta, n);
  }
  /// γ or β at column j, the start of one of the row's registers.
  template <bool Full>
  NORMKIT_ALWAYS_INLINE V gamma_at(std::size_t j, std::size_t count) const {
    if constexpr (kHeld) return held_gamma.d[j / S::lanes];
    else return load<Full>(gamma + j, count);
  }
  template <bool Full>
  NORMKIT_ALWAYS_INLINE V beta_at(std::size_t j, std::size_t count) const {
    if constexpr (kHeld) return held_beta.d[j / S::lanes];
    else return load<Full>(beta + j, count);
  }
};

/// e·r − lo·r, then ·γ + β, from a centered register e (see LayerNormOutput).
template <std::size_t Vectors, bool Gamma, bool Beta, class A>
struct CenteredOutput {
  using S = Simd<A>;
  using V = typename S::vec;
  const ShortRowAffine<Vectors, Gamma, Beta, A>& affine;
  V r, neg_lo_r;
  template <bool Full>
  NORMKIT_ALWAYS_INLINE V value(V e, std::size_t j, std::size_t count) const {
    V v = S::mul_add(e, r, neg_lo_r);
    if constexpr (Gamma && Beta) {
      v = S::mul_add(v, affine.template gamma_at<Full>(j, count), affine.template beta_at<Full>(j, count));
    } else if constexpr (Gamma) {
      v = S::mul(v, affine.template gamma_at<Full>(j, count));
    }
    return v;
  }
};

template <class T>
bool fits_registers(std::size_t features) {
  return features <= kRegisterVectors * Simd<accum_t<T>>::lanes;
}

/// Rows per group: of the short-row phases, and at most of the general path below. LayerNorm's
/// shortest rows went by groups of 32 on Zen 4 (+8% at 64 floats there); on a Xeon (see
/// layer_norm_short_rows) the group's partial sums no longer fitted the registers beside the
/// row and spilled, and 32 rows lost to 16: LayerNorm 4096×64 floats 28.8 against 38.1 GiB/s
/// (AVX-512, one thread, standalone harness, best of four alternated rounds). On a Zen 5, 32
/// rows won only where the rows sit in L2 (floats, AVX-512, medians of 15 paired trials, 32
/// rows against 16, time: LayerNorm forward 256×64 0.90, 4096×64 1.05, 4096×128 1.07; RMSNorm
/// forward at the same shapes 0.96, 0.99, 1.09), so groups stay at 16.
inline constexpr std::size_t kGroupRows = 16;

/// The rows of a group that an unrolled phase runs together (see each_row).
inline constexpr std::size_t kChunkRows = 4;

/// Where a row takes at most a quarter of the registers, each phase's loop over the group's
/// rows is unrolled, so that the rows' partial sums stay in registers until Simd::sums reads
/// them: with a loop they went through the stack. Measured (one thread, floats, standalone
/// harness, best of three or four alternated rounds, a Xeon): AVX-512 LayerNorm 4096×64 27.7 →
/// 34.6 GiB/s, 4096×128 21.7 → 25.4, RMSNorm 4096×128 23.7 → 26.8; but AVX2, with 16
/// registers, lost with its 64-float rows unrolled (eight of them: 31.1 → 28.1), whose
/// partials spilled anyway. Longer rows gain too (LayerNorm 4096×256 on AVX-512: 21.5 → 24.0,
/// unrolled), but at a price in compile time: with LayerNorm's unrolled for every register
/// count, the tests' kernels took 823 s and 10.9 GB to compile, against 590 s and 9.3 GB this
/// way, and 531 s and 6.9 GB unrolled nowhere (GCC 12, -O2 -g).
///
/// Rows past count are skipped (skip(k) gives them sums that row_totals can read), by chunks of
/// kChunkRows where unrolled. Every phase had run over all Rows rows, past count repeating the
/// last one, so a group of one row cost what a group of 16 did: LayerNorm 1×64 floats took
/// 123 ns, as long as one 768-float row. Predicted for AVX-512: 1×64 116 → ~65 ns, 8×64 17.4 →
/// ~13 ns a row, full groups ±3%. Measured (Zen 5, floats, one thread, medians of 21 paired
/// trials), time: AVX-512 LayerNorm forward 1×64 0.75, 4×64 0.75, 8×64 0.84, 1×128 0.64, 1×256
/// 0.52, 4×256 0.66; RMSNorm 0.60–0.93; LayerNorm backward 1×64 0.71, 8×64 0.85, 1×256 0.50; AVX2
/// LayerNorm forward 1×64 0.69, 1×128 0.47, backward 0.43–0.87. Full groups, 31 trials (16×64
/// and 4096 rows of 64 to 256 floats): 0.94–1.04, but RMSNorm 16×64 1.08 (AVX-512) and 1.05
/// (AVX2). A full group now takes a branch per chunk. Each row's arithmetic is unchanged, so a
/// row's results still do not depend on the batch it came in (README).
template <std::size_t Vectors, std::size_t Rows, class A, class F, class Skip>
NORMKIT_ALWAYS_INLINE void each_row(std::size_t count, F&& f, Skip&& skip) {
  if constexpr (4 * Vectors <= Simd<A>::registers) {
    static_assert(Rows % kChunkRows == 0, "whole chunks");
    NORMKIT_UNROLL
    for (std::size_t chunk = 0; chunk < Rows; chunk += kChunkRows) {
      if (chunk < count) {
        NORMKIT_UNROLL
        for (std::size_t k = chunk; k < chunk + kChunkRows; ++k) f(k);
      } else {
        NORMKIT_UNROLL
        for (std::size_t k = chunk; k < chunk + kChunkRows; ++k) skip(k);
      }
    }
  } else {
    for (std::size_t k = 0; k < count; ++k) f(k);
    for (std::size_t k = count; k < Rows; ++k) skip(k);
  }
}

/// Where the group's rows start: rows past count repeat the last one, so that an unrolled
/// phase (see each_row) runs over whole chunks and never reads past the tensor.
template <std::size_t Rows, class T>
NORMKIT_ALWAYS_INLINE void group_rows_at(const ForwardRows<T>& a, std::size_t first, std::size_t count, const T* (&at)[Rows]) {
  for (std::size_t k = 0; k < Rows; ++k) at[k] = a.x + (first + (k < count ? k : count - 1)) * a.x_stride;
}

/// sums[k] = the horizontal sum of part[k] for every row k < Rows, a vector of rows at a time
/// (Simd::sums).
template <std::size_t Rows, class A>
NORMKIT_ALWAYS_INLINE void row_totals(const typename Simd<A>::vec (&part)[Rows], A (&sums)[Rows]) {
  using S = Simd<A>;
  NORMKIT_UNROLL
  for (std::size_t k = 0; k < Rows; k += S::lanes) S::store(sums + k, S::sums(part + k));
}

/// to[k] = from[k] rounded to A, for the k < Rows of a group's statistics.
template <std::size_t Rows, class A>
NORMKIT_ALWAYS_INLINE void narrow(const double (&from)[Rows], A (&to)[Rows]) {
  for (std::size_t k = 0; k < Rows; ++k) to[k] = static_cast<A>(from[k]);
}

/// 1/sqrt(var + eps) in each lane: scaled_rstd at scale 1, a vector of rows at a time.
NORMKIT_ALWAYS_INLINE Simd<double>::vec rstd_lanes(Simd<double>::vec var, double eps) {
  using D = Simd<double>;
  return D::div(D::set(1), D::sqrt(D::add(var, D::set(eps))));
}

/// Prefetches every line of x's row i into L1, if i < end. The short-row kernels read a group
/// ahead this way while they write, as the general path does (see write_row): from DRAM, the
/// hardware prefetcher alone left the reads idle during the output phase. Measured (one
/// thread, AVX-512, float, normal stores, Zen 5): LayerNorm forward 16384×256 28 → 36 GiB/s,
/// 32768×192 27 → 32; no change in cache (4096×64, 4096×256). Into L2 (see NORMKIT_PREFETCH),
/// RMSNorm 4096×64 had lost 9% on Zen 4, and on a Xeon (standalone harness, best of four
/// alternated rounds), into L2 → into L1: LayerNorm 65536×64 19.4 → 22.8 GiB/s, 4096×64 39.6 →
/// 42.2, RMSNorm 4096×64 45.3 → 51.5, 65536×64 20.3 → 23.4. A second group further ahead lost
/// (LayerNorm 65536×64 22.9 → 17.8).
///
/// A row of Vectors registers that span at most four lines (64 floats on AVX-512 and AVX2)
/// takes one prefetch per line its registers span, unrolled: every one lies within the row, as
/// a vector's bytes divide a line. Its loop's compare and branch per line had been a quarter
/// of such a row's output instructions. Predicted +10% at 64 floats; measured (Zen 5, AVX-512,
/// floats, one thread, medians of 40 paired trials against the loop, several runs), time:
/// LayerNorm forward 512×64 0.81–0.83, 4096×64 0.87–0.88, 65536×64 0.92–0.94; RMSNorm 0.78–0.81,
/// 0.90–0.95, 0.95–0.99. Longer rows keep the loop: unrolled, rows of 192 and 256 floats from
/// memory took up to 15% longer (32768×192, 16384×256).
template <std::size_t Vectors, class T>
NORMKIT_ALWAYS_INLINE void prefetch_row(const ForwardRows<T>& a, std::size_t i, std::size_t end) {
  if (i >= end) return;
  const char* row = reinterpret_cast<const char*>(a.x + i * a.x_stride);
  constexpr std::size_t bytes = Vectors * Simd<accum_t<T>>::lanes * sizeof(T);
  if constexpr (bytes <= 4 * kLineBytes) {
    NORMKIT_UNROLL
    for (std::size_t at = 0; at < bytes; at += kLineBytes) NORMKIT_PREFETCH_L1(row + at);
  } else {
    for (std::size_t at = 0; at < a.features * sizeof(T); at += kLineBytes) NORMKIT_PREFETCH_L1(row + at);
  }
}

/// LayerNorm of the short rows [first, first + count), count ≤ Rows, each in Vectors
/// registers: per row m = mean(x − x₀) over at least its first half (see below), c = x₀ + m
/// rounded to A, e = x − c, then the corrected two-pass lo = mean(e), var = mean(e²) − lo²,
/// and y = (e·r − lo·r)·γ + β. Sets declined[k], writing nothing for that row, where the
/// general path must take it: variance out of A's comfortable range, NaN/Inf, or a constant
/// row (see declined_row). The output phase prefetches the next group's rows below `end`, and
/// with a.stream writes whole vectors with non-temporal stores (forward() checks the alignment).
///
/// Each phase ends with vectors of row sums (row_totals), turned into statistics a vector of rows
/// at a time: the centers in A, lo, var and rstd in double, rounded to A for the outputs before the
/// output phase, which then only broadcasts them. Row by row, at 64 floats the horizontal sums had
/// taken ~18% of the time and the scalar double arithmetic ~20% (perf annotate, Zen 4). On a Xeon
/// that runs 2.6 G 512-bit FMAs per second against 7.0 G 256-bit ones (one port's worth), the
/// kernel then ran at 27 GiB/s (4096×64 floats) where a minimal kernel of
/// the same phases ran at 42–45; so every phase now runs over the whole group, a count known at
/// compile time (see each_row), and the centers and the rounded statistics are computed once per
/// group, a vector of rows at a time, not per row. Predicted +30% at 64 floats; measured (one
/// thread, AVX-512, floats, standalone harness, best of four alternated rounds) 4096×64 27.8 → 39.6
/// GiB/s against a copy at 63, 16384×64 19.0 → 24.2, 4096×128 22.5 → 27.1, 4096×256 21.9 → 22.6,
/// 65536×64 (from memory) 18.7 → 19.4. What bounds these rows now is not known, but it is not
/// their arithmetic: taking out the output's subtraction, its γ/β FMA or the statistics'
/// division and square root each moved 4096×64 by 3% or less, and the minimal kernel of these
/// phases ran within 5% of this one. Nor is it mainly the cache: rows in L2 (256×64) took 8.0 ns
/// each against 9.3 at 4096×64, in the last-level cache (normkit_bench, Zen 5, AVX-512). Issuing
/// the next group's statistics before this group's outputs, so that the serial chain ending them
/// (horizontal sums, a square root, a division) would overlap the outputs, was predicted +30% at
/// 4096×64 and lost; measured (Zen 5, AVX-512, floats, one thread, medians of 15 paired trials),
/// time: 1.12 at 4096×64, 1.13 at 256×64, 4096×128 and 65536×64, 1.14 at 4096×256, training forward
/// 1.10–1.18, where the same split code run group by group instead (a control) took 0.98–1.03.
template <std::size_t Vectors, std::size_t Rows, bool Gamma, bool Beta, class T, class A>
void layer_norm_short_rows(const ForwardRows<T>& rows, std::size_t first, std::size_t count, bool* declined, std::size_t end) {
  // From `rows` itself GCC reloaded every field after each row's stores; from a local copy it
  // keeps them in registers (4096×64 floats, AVX-512: LayerNorm +8%, RMSNorm +21%).
  const ForwardRows<T> a = rows;
  using S = Simd<A>;
  using D = Simd<double>;
  using V = typename S::vec;
  static_assert(Rows % S::lanes == 0 && Rows % D::lanes == 0, "row_totals and the statistics fill whole vectors");
  const std::size_t n = a.features;
  const T* row_at[Rows];
  group_rows_at(a, first, count, row_at);
  alignas(64) A shift[Rows], sum_d[Rows], center[Rows], sum_e[Rows], sum_ee[Rows], r[Rows], neg_lo_r[Rows], mean[Rows];
  alignas(64) double var[Rows], wide[3][Rows];
  V part[Rows], part_sq[Rows];
  // The center comes from the row's first kHalf registers only: s = `sampled` of its n values,
  // s ≥ n/2 (all of them in a one-register row). Any center serves, as lo measures what it
  // misses, but var = mean(e²) − lo² cancels more as |lo| grows, and the mean of any s of the
  // values is within σ·sqrt((n − s)/s) ≤ σ of the row's (Cauchy–Schwarz), however the row is
  // ordered. Against the whole row (one thread, AVX-512, floats, Zen 4): +7% at 4096×64,
  // +12% at 4096×128 and 4096×256; a quarter of the row gained more but lets |lo| reach σ·√3,
  // and rows whose first quarter sat 1e4 above the rest came out with 4.4 times the error in
  // rstd. Shifted by x₀ first, so that a constant row's center is x₀ exactly.
  constexpr std::size_t kHalf = (Vectors + 1) / 2;
  const std::size_t sampled = kHalf == Vectors ? n : kHalf * S::lanes;
  each_row<Vectors, Rows, A>(count, [&](std::size_t k) {
    shift[k] = static_cast<A>(row_at[k][0]);
    RegisterRow<kHalf, T, A> row(row_at[k], sampled);
    row.subtract(S::set(shift[k]));
    part[k] = row.d[0];
    NORMKIT_UNROLL
    for (std::size_t v = 1; v < kHalf; ++v) part[k] = S::add(part[k], row.d[v]);
  }, [&](std::size_t k) {
    shift[k] = 0;
    part[k] = S::zero();
  });
  row_totals(part, sum_d);
  const V inv_sampled = S::set(static_cast<A>(1 / static_cast<double>(sampled)));
  NORMKIT_UNROLL
  for (std::size_t k = 0; k < Rows; k += S::lanes) {
    S::store(center + k, S::mul_add(S::load(sum_d + k), inv_sampled, S::load(shift + k)));
  }
  // x − c, lanes past the row zero. Like the general path's x − hi: c is an A near the mean,
  // so x − c is exact or of the size of σ.
  const auto centered = [&](const T* x, std::size_t k) {
    RegisterRow<Vectors, T, A> row(x, n);
    row.subtract(S::set(center[k]));
    return row;
  };
  each_row<Vectors, Rows, A>(count, [&](std::size_t k) {
    const RegisterRow<Vectors, T, A> row = centered(row_at[k], k);
    part[k] = row.d[0];
    part_sq[k] = S::mul(row.d[0], row.d[0]);
    NORMKIT_UNROLL
    for (std::size_t v = 1; v < Vectors; ++v) {
      part[k] = S::add(part[k], row.d[v]);
      part_sq[k] = S::mul_add(row.d[v], row.d[v], part_sq[k]);
    }
  }, [&](std::size_t k) {
    part[k] = S::zero();
    part_sq[k] = S::zero();
  });
  row_totals(part, sum_e);
  row_totals(part_sq, sum_ee);
  const typename D::vec inv_n = D::set(1 / static_cast<double>(n));
  NORMKIT_UNROLL
  for (std::size_t k = 0; k < Rows; k += D::lanes) {
    const typename D::vec lo = D::mul(D::load(sum_e + k), inv_n);
    const typename D::vec v = D::sub(D::mul(D::load(sum_ee + k), inv_n), D::mul(lo, lo));
    const typename D::vec rstd = rstd_lanes(v, a.eps);
    D::store(var + k, v);
    D::store(wide[0] + k, rstd);
    D::store(wide[1] + k, D::mul(D::sub(D::zero(), lo), rstd));
    D::store(wide[2] + k, D::add(D::load(center + k), lo));
  }
  narrow(wide[0], r);
  narrow(wide[1], neg_lo_r);
  narrow(wide[2], mean);
  for (std::size_t k = 0; k < count; ++k) declined[k] = !comfortable_variance<A>(var[k]);
  // The rows again, into y. The lambda takes its own copy of the arguments, `args`, for y, γ,
  // β, mean and rstd: read through the capture of `a`, they were reloaded after every row's
  // stores again (4096×64: −9%). Each row's x is found from `args` too, not from row_at[k]:
  // that cost AVX2 10% at 4096×64 floats (standalone harness, best of eight alternated rounds,
  // 23.6 → 21.2 GiB/s), with AVX-512 +2% and RMSNorm ±1%.
  const auto outputs = [&](auto stream, const ForwardRows<T> args) {
    const ShortRowAffine<Vectors, Gamma, Beta, A> affine(args.gamma, args.beta, n);
    for (std::size_t k = 0; k < count; ++k) {
      prefetch_row<Vectors>(args, first + Rows + k, end);
      if (declined[k]) continue;
      if (args.mean != nullptr) args.mean[first + k] = mean[k];
      if (args.rstd != nullptr) args.rstd[first + k] = r[k];
      centered(args.x + (first + k) * args.x_stride, k)
          .template store<stream()>(args.y + (first + k) * args.y_stride,
                                    CenteredOutput<Vectors, Gamma, Beta, A>{affine, S::set(r[k]), S::set(neg_lo_r[k])});
    }
  };
  if (a.stream) outputs(std::true_type{}, a);
  else outputs(std::false_type{}, a);
}

/// Longer rows are normalized in groups of up to kGroupRows rows and kGroupBytes of input
/// (ForwardRows::cached_group_bytes where the pass fits the cache with room to spare):
/// first the statistics of every row, then every output, and each pass reads ahead into the
/// row a group further on. A row's statistics end in a serial chain (horizontal sums, a
/// division, a square root); issued back to back, the chains of several rows overlap in the
/// core's reorder window instead of each waiting behind the previous row's outputs.
///
/// But a group, the group it reads ahead and the output lines it writes all share L1. At
/// 16 KiB a group of five 768-float rows made that ~45 KiB of a 48 KiB L1, and from the
/// last-level cache the rows came slower than one at a time: a sweep of the group size (one
/// thread, AVX-512) gave at 2 KiB, against 16 KiB, LayerNorm 4096×768 154 against 193 ns/row,
/// RMSNorm 110 against 165, 4096×1024 209 against 280 and 16384×256 71 against 91; 1 and 4 KiB
/// were no better. So a group is two rows of 256 floats, and a row of more than 256 floats (512
/// in a 16-bit type) goes alone, except the long LayerNorm rows below (kPairMinRowBytes) and
/// the rows of a pass that fits the cache with room to spare (see cached_group_bytes in
/// driver.hpp).
inline constexpr std::size_t kGroupBytes = 2048;

/// Long LayerNorm rows with γ and β, of kPairMinRowBytes in A (4096 floats, 2048 doubles) and
/// more, go by pairs, and their outputs by blocks of kColumnBytes of columns, each block of
/// both rows in turn. One at a time, such a row's output pass read x, γ and β, together more
/// than L1 (96 KiB at 8192 floats, 48 KiB at 4096), and γ and β came back from L2 for every
/// row: in a standalone harness, 256×16384 floats ran at 23.9 GiB/s, and 34.5 without γ and β
/// (one thread, AVX-512). In blocks, a pair reads each block of γ and β once, from L1.
/// Predicted: half of that gap back at 4096 floats and more. Measured in normkit_bench, best of four
/// alternated runs, against a copy at 53–62: 256×16384 24.7 → 28.9, 512×8192 24.6 → 28.5,
/// 64×65536 22.9 → 24.3, AVX2 256×16384 24.3 → 29.1; float16 +7 to +12%, bfloat16 ±1%, double
/// from −14% (256×16384, where the copy also lost 7%) to +18% (128×16384). Blocks of 4 KiB
/// gained less, whole rows lost, and groups of four rows were no better than pairs. RMSNorm,
/// which reads γ only, gained nothing (512×8192 32.4 → 31.1, 64×65536 30.7 → 27.2), so rows
/// without β go one at a time.
///
/// Pairs started at 8192 floats while they lost at 4096 from the last-level cache (5% at
/// 1024×4096 on a Zen 5 with 48 KiB of L1; 23 → 15 GiB/s at 8192×4096, streamed, on Zen 4).
/// Once prefetches went to L2 and outputs were streamed wherever the arrays fill the cache,
/// pairs gained at 4096 floats on Zen 4 (32 KiB L1), in the same harness: 1024×4096 30.0 →
/// 32.0, 768×4096 21.4 → 26.1, 8192×4096 18.6 → 21.1, 64×4096 (in L2) 33.9 → 35.6. On a Zen 5
/// since (floats, AVX-512, one thread, a standalone harness with page-aligned arrays, medians of
/// 15 paired trials), single rows against pairs, time: 64×4096 1.16, 1024×4096 1.00, 2048×4096
/// 1.19, 8192×4096 1.04. Longer rows from the last-level cache and memory leaned the other way
/// in the harness, but not steadily (256×16384 0.72 to 0.99 over five runs, 512×8192 0.75 to
/// 1.06 over three), and not in normkit_bench: three alternated runs of each build, as a
/// fraction of the copy's GiB/s in the same run, gave pairs 0.59–0.84 at 256×16384 against
/// 0.53–0.61 for single rows, 0.57–0.86 against 0.54–0.59 at 512×8192 and 0.54–0.76 against
/// 0.46–0.60 at 128×32768. Pairs stay.
///
/// The blocks end where the pair's first row of y starts a whole vector: the first block takes
/// the unaligned head as well. Blocks from column 0 on had, for a y off a vector boundary (a
/// std::vector's 16-byte-aligned data), begun and ended mid-line, and where the row is streamed
/// each such line took ordinary masked stores between the non-temporal stores of its
/// neighbours, 16 of them in a 4096-float row. Predicted: such a y back to near an aligned
/// one's speed. Measured (Zen 4, AVX-512, floats, one thread, standalone harness, x and y 16
/// bytes past a line, medians of 11 paired trials in both orders of the builds), time: 1024×4096
/// 0.75, 256×16384 0.69, 8192×4096 0.60, to 32–34 GB/s where an aligned y runs at 35–37; aligned,
/// 0.99. Blocks of 4 and 8 KiB from column 0 had won half to most of this for unaligned rows
/// and nothing for aligned ones.
inline constexpr std::size_t kPairMinRowBytes = 16 * 1024;
inline constexpr std::size_t kColumnBytes = 2048;

/// Rows of at least this many bytes of T (x is what is read ahead) read nothing ahead where x
/// alone fits the last-level cache (ForwardRows::x_in_cache): from the cache the hardware
/// prefetcher keeps up with runs that long, and the reads ahead only took issue slots, as for
/// passes that fit the cache (see write_row). Without the reads ahead (Zen 5, AVX-512, floats,
/// one thread, medians of 15 paired trials, three runs where a range is given), time: LayerNorm
/// forward 256×16384 0.88–0.94, 384×16384 0.85, 128×32768 0.75–0.80, 256×32768 0.78, 64×65536
/// 0.83, 128×65536 0.74, training 256×16384 0.86; RMSNorm 0.86–0.96 on the same shapes; AVX2
/// LayerNorm 256×16384 0.97, 128×32768 0.85. Rows of 32 KiB gained little or lost, so the line
/// is drawn at 64 KiB (LayerNorm 512×8192 0.91–0.98, 768×8192 1.28, 1024×8192 1.34), and with x
/// from memory the reads ahead still paid (x of 64 MiB: LayerNorm 1024×16384 1.02–1.05 without
/// them). Doubles, same bytes: LayerNorm 256×8192 0.96, 128×16384 0.90, RMSNorm 0.91 and 0.98
/// (1024×2048, below the line, 0.99). 16-bit types, 32768 and 65536 values a row (medians of
/// 11–41 paired trials, noisier): LayerNorm bfloat16 0.90–0.97, float16 0.91–0.98; RMSNorm
/// bfloat16 0.90–1.07; RMSNorm float16 no clear change, 0.91–1.14 (1.00–1.14 at 512×32768, an
/// x of 32 MiB, the edge of the rule), where its control below the line, 512×16384, gave
/// 0.99–1.18.
inline constexpr std::size_t kCachedLongRowBytes = 64 * 1024;

/// Where the pass over a row reads ahead: `offset` into row `next`, or nowhere past `end`,
/// where the pass fits the cache (ForwardRows::in_cache) or for long rows of a cached x (see
/// kCachedLongRowBytes).
template <class T>
const T* next_row(const ForwardRows<T>& a, std::size_t next, std::size_t end, std::size_t offset) {
  const bool cached_long_rows = a.x_in_cache && a.features * sizeof(T) >= kCachedLongRowBytes;
  return next < end && !a.in_cache && !cached_long_rows ? a.x + next * a.x_stride + offset : nullptr;
}

/// Whether rows go by pairs and blocks of columns (see kPairMinRowBytes).
template <class T>
bool in_pairs(const ForwardRows<T>& a) {
  return a.beta != nullptr && a.features * sizeof(accum_t<T>) >= kPairMinRowBytes;
}

/// Rows of `features` values of T per group, where a group takes at most `bytes` of input.
template <class T>
std::size_t group_rows(std::size_t features, std::size_t bytes) {
  const std::size_t fit = bytes / (features * sizeof(T));
  return fit < 1 ? 1 : (fit > kGroupRows ? kGroupRows : fit);
}

/// LayerNorm for the forward driver below.
template <class T>
struct LayerNormForward {
  using A = accum_t<T>;
  using Row = LayerNormRow<A>;
  static constexpr bool kFused = false;  // measured slower fused (see forward_fused)

  NORMKIT_ALWAYS_INLINE static Row statistics(const ForwardRows<T>& a, const T* x, const T* ahead) {
    return layer_norm_row(x, a.features, a.eps, ahead, a.ahead_hint);
  }
  static void save(const ForwardRows<T>& a, std::size_t i, const Row& row) {
    if (a.mean != nullptr) a.mean[i] = static_cast<A>(row.mean);
    if (a.rstd != nullptr) a.rstd[i] = static_cast<A>(row.rstd);
  }
  template <bool Stream>
  static void output(const ForwardRows<T>& a, const T* x, T* y, const Row& row, Columns c, const T* ahead) {
    if (a.gamma != nullptr && a.beta != nullptr) layer_norm_apply<Stream, true, true>(a, x, y, row, c, ahead);
    else if (a.gamma != nullptr) layer_norm_apply<Stream, true, false>(a, x, y, row, c, ahead);
    else layer_norm_apply<Stream, false, false>(a, x, y, row, c, ahead);
  }
  /// Normalizes row i and returns true if it is constant, with the statistics the general path
  /// finds: mean x₀, variance 0 (see declined_row). Otherwise writes nothing.
  static bool constant_row(const ForwardRows<T>& a, std::size_t i) {
    const T* x = a.x + i * a.x_stride;
    const A x0 = static_cast<A>(x[0]);
    if (!all_equal(x, a.features, x0)) return false;
    const A hi = x0 + A(0);  // +0 for a row of −0, as the general path's x₀ + mean(x − x₀)
    const Rstd r = scaled_rstd(0, a.eps, 1);
    const Row row{1, hi, 0, static_cast<A>(applied_rstd<A>(r.applied)), static_cast<double>(hi), r.saved};
    save(a, i, row);
    output<false>(a, x, a.y + i * a.y_stride, row, Columns{0, a.features}, nullptr);
    return true;
  }
  template <std::size_t Vectors>
  static void short_rows(const ForwardRows<T>& a, std::size_t first, std::size_t count, bool* declined, std::size_t end) {
    if (a.gamma != nullptr && a.beta != nullptr) {
      layer_norm_short_rows<Vectors, kGroupRows, true, true, T, A>(a, first, count, declined, end);
    } else if (a.gamma != nullptr) {
      layer_norm_short_rows<Vectors, kGroupRows, true, false, T, A>(a, first, count, declined, end);
    } else {
      layer_norm_short_rows<Vectors, kGroupRows, false, false, T, A>(a, first, count, declined, end);
    }
  }
};

// ---------------------------------------------------------------------------------------
// RMSNorm forward

/// x·scale, or x itself for the rows that need no rescaling.
template <bool Scaled, class A>
struct Scale {
  using S = Simd<A>;
  using V = typename S::vec;
  V scale;
  explicit Scale(A value) : scale(S::set(value)) {}
  NORMKIT_ALWAYS_INLINE V operator()(V x) const {
    if constexpr (Scaled) return S::mul(x, scale);
    else return x;
  }
};

template <class T, class A, class Scaler>
struct SquareTerms {
  const T* x;
  Scaler scale;
  void add(std::size_t j, typename Simd<A>::vec* acc) const {
    using S = Simd<A>;
    const typename S::vec v = scale(S::load(x + j));
    acc[0] = S::mul_add(v, v, acc[0]);
  }
  void add_n(std::size_t j, std::size_t count, typename Simd<A>::vec* acc) const {
    using S = Simd<A>;
    const typename S::vec v = scale(S::load_n(x + j, count));
    acc[0] = S::mul_add(v, v, acc[0]);
  }
};

/// How an RMSNorm row is normalized: y = (x·scale)·r·γ with r = 1/sqrt(mean((x·scale)²) + eps·scale²).
template <class A>
struct RmsNormRow {
  A scale, r;
  double rstd;
};

/// The statistics of an RMSNorm row (see RmsNormRow), rescaled where the mean square would
/// leave A's comfortable range. Reads ahead into `ahead` (see write_row), and writes with
/// `writer` during its first pass over the row (see forward_fused). Always inlined, with
/// RmsNormForward::statistics, for the reason given at layer_norm_row: 4096×384 floats 44.7 →
/// 47.5 GiB/s, 4096×768 49.3 → 50.2.
template <class T, class A = accum_t<T>, class Writer = NoWriter>
NORMKIT_ALWAYS_INLINE RmsNormRow<A> rms_norm_row(const T* x, std::size_t n, double eps, const T* ahead = nullptr,
                                                 const Writer& writer = {}) {
  A scale = 1;
  double sum[1];
  row_sums<A, 1>(n, SquareTerms<T, A, Scale<false, A>>{x, Scale<false, A>(scale)}, sum, ahead,
                 static_cast<const T*>(nullptr), writer);
  double ms = sum[0] / static_cast<double>(n);
  if (!comfortable_variance<A>(ms)) {
    const double peak = peak_magnitude(x, n);
    if (peak > 0 && peak <= std::numeric_limits<double>::max()) {
      scale = static_cast<A>(row_scale<A>(peak));
      row_sums<A, 1>(n, SquareTerms<T, A, Scale<true, A>>{x, Scale<true, A>(scale)}, sum);
      ms = sum[0] / static_cast<double>(n);
    } else if (!(peak <= std::numeric_limits<double>::max())) {
      // A NaN or ±Inf in the row. With Inf the mean square is Inf and finite values would come
      // out as 0, the limit; a NaN row says plainly that its input was not finite, as
      // LayerNorm's does.
      ms = std::numeric_limits<double>::quiet_NaN();
    }
  }
  const double s = static_cast<double>(scale);
  const Rstd r = scaled_rstd(ms, eps, s);
  return {scale, static_cast<A>(applied_rstd<A>(r.applied)), r.saved};
}

/// y = (x·scale)·r·γ, one vector at a time (see write_row).
template <bool Gamma, class T, class A, class Scaler>
struct RmsNormOutput {
  using S = Simd<A>;
  using V = typename S::vec;
  const T* x;
  const A* gamma;
  Scaler scale;
  V r;

  template <bool Full>
  V value(std::size_t j, std::size_t count) const {
    V v = S::mul(scale(load<Full>(x + j, count)), r);
    if constexpr (Gamma) v = S::mul(v, load<Full>(gamma + j, count));
    return v;
  }
};

template <bool Stream, bool Gamma, class T, class A>
void rms_norm_apply(const ForwardRows<T>& a, const T* x, T* y, const RmsNormRow<A>& row, Columns c, const T* ahead) {
  using S = Simd<A>;
  const A* gamma = Gamma ? a.gamma + c.from : nullptr;
  if (row.scale == 1) {
    write_row<Stream, A>(y + c.from, c.count, RmsNormOutput<Gamma, T, A, Scale<false, A>>{x + c.from, gamma, Scale<false, A>(row.scale), S::set(row.r)}, ahead);
  } else {
    write_row<Stream, A>(y + c.from, c.count, RmsNormOutput<Gamma, T, A, Scale<true, A>>{x + c.from, gamma, Scale<true, A>(row.scale), S::set(row.r)});
  }
}

/// x·r·γ from a register x.
template <std::size_t Vectors, bool Gamma, class A>
struct ScaledOutput {
  using S = Simd<A>;
  using V = typename S::vec;
  const ShortRowAffine<Vectors, Gamma, false, A>& affine;
  V r;
  template <bool Full>
  NORMKIT_ALWAYS_INLINE V value(V v, std::size_t j, std::size_t count) const {
    v = S::mul(v, r);
    if constexpr (Gamma) v = S::mul(v, affine.template gamma_at<Full>(j, count));
    return v;
  }
};

/// RMSNorm of the short rows [first, first + count), count ≤ Rows, each in Vectors
/// registers: every row's sum of squares, then r = 1/sqrt(mean(x²) + eps) in double a vector
/// of rows at a time, then every output, from x again. Sets declined[k], writing nothing for
/// that row, when the mean square is out of A's comfortable range (or NaN/Inf): the general
/// path rescales. Reads ahead and streams as layer_norm_short_rows, and runs its phases over
/// the whole group as it does; measured as there, this alone moved RMSNorm little: 4096×64
/// 45.4 → 45.3 GiB/s, 4096×128 26.1 → 27.1, 65536×64 22.3 → 20.3.
template <std::size_t Vectors, std::size_t Rows, bool Gamma, class T, class A>
void rms_norm_short_rows(const ForwardRows<T>& rows, std::size_t first, std::size_t count, bool* declined, std::size_t end) {
  // A local copy, as in layer_norm_short_rows.
  const ForwardRows<T> a = rows;
  using S = Simd<A>;
  using D = Simd<double>;
  using V = typename S::vec;
  static_assert(Rows % S::lanes == 0 && Rows % D::lanes == 0, "row_totals and the statistics fill whole vectors");
  const T* row_at[Rows];
  group_rows_at(a, first, count, row_at);
  alignas(64) A sum_xx[Rows], r[Rows];
  alignas(64) double ms[Rows], rstd[Rows];
  V part[Rows];
  each_row<Vectors, Rows, A>(count, [&](std::size_t k) {
    const RegisterRow<Vectors, T, A> row(row_at[k], a.features);
    V even = S::mul(row.d[0], row.d[0]), odd = S::zero();
    NORMKIT_UNROLL
    for (std::size_t v = 1; v < Vectors; ++v) {
      if (v % 2 == 0) even = S::mul_add(row.d[v], row.d[v], even);
      else odd = S::mul_add(row.d[v], row.d[v], odd);
    }
    part[k] = S::add(even, odd);
  }, [&](std::size_t k) { part[k] = S::zero(); });
  row_totals(part, sum_xx);
  NORMKIT_UNROLL
  for (std::size_t k = 0; k < Rows; k += D::lanes) {
    const typename D::vec mean_square = D::div(D::load(sum_xx + k), D::set(static_cast<double>(a.features)));
    D::store(ms + k, mean_square);
    D::store(rstd + k, rstd_lanes(mean_square, a.eps));
  }
  narrow(rstd, r);
  for (std::size_t k = 0; k < count; ++k) declined[k] = !comfortable_variance<A>(ms[k]);
  // `args` as in layer_norm_short_rows.
  const auto outputs = [&](auto stream, const ForwardRows<T> args) {
    const ShortRowAffine<Vectors, Gamma, false, A> affine(args.gamma, nullptr, args.features);
    for (std::size_t k = 0; k < count; ++k) {
      prefetch_row<Vectors>(args, first + Rows + k, end);
      if (declined[k]) continue;
      if (args.rstd != nullptr) args.rstd[first + k] = r[k];
      const RegisterRow<Vectors, T, A> row(args.x + (first + k) * args.x_stride, args.features);
      row.template store<stream()>(args.y + (first + k) * args.y_stride, ScaledOutput<Vectors, Gamma, A>{affine, S::set(r[k])});
    }
  };
  if (a.stream) outputs(std::true_type{}, a);
  else outputs(std::false_type{}, a);
}

/// RMSNorm for the forward driver below.
template <class T>
struct RmsNormForward {
  using A = accum_t<T>;
  using Row = RmsNormRow<A>;
  static constexpr bool kFused = true;  // see forward_fused

  template <class Writer = NoWriter>
  NORMKIT_ALWAYS_INLINE static Row statistics(const ForwardRows<T>& a, const T* x, const T* ahead, const Writer& writer = {}) {
    return rms_norm_row(x, a.features, a.eps, ahead, writer);
  }
  static void save(const ForwardRows<T>& a, std::size_t i, const Row& row) {
    if (a.rstd != nullptr) a.rstd[i] = static_cast<A>(row.rstd);
  }
  template <bool Stream>
  static void output(const ForwardRows<T>& a, const T* x, T* y, const Row& row, Columns c, const T* ahead) {
    if (a.gamma != nullptr) rms_norm_apply<Stream, true>(a, x, y, row, c, ahead);
    else rms_norm_apply<Stream, false>(a, x, y, row, c, ahead);
  }
  /// Calls f(writer) with the RowWriter of `row`'s output, x into y (see forward_fused), and
  /// returns true; or returns false for a rescaled row, which the caller writes on its own.
  template <bool Stream, class F>
  NORMKIT_ALWAYS_INLINE static bool writing(const ForwardRows<T>& a, const T* x, T* y, const Row& row, F&& f) {
    if (row.scale != 1) return false;
    const auto with = [&](auto gamma) {
      using Out = RmsNormOutput<gamma(), T, A, Scale<false, A>>;
      f(RowWriter<Stream, A, T, Out>{y, Out{x, a.gamma, Scale<false, A>(1), Simd<A>::set(row.r)}});
    };
    if (a.gamma != nullptr) with(std::true_type{});
    else with(std::false_type{});
    return true;
  }
  /// Normalizes row i and returns true if it is all zeros, with mean square 0 (see
  /// declined_row). Otherwise writes nothing.
  static bool constant_row(const ForwardRows<T>& a, std::size_t i) {
    const T* x = a.x + i * a.x_stride;
    if (!all_equal(x, a.features, A(0))) return false;
    const Rstd r = scaled_rstd(0, a.eps, 1);
    const Row row{1, static_cast<A>(applied_rstd<A>(r.applied)), r.saved};
    save(a, i, row);
    output<false>(a, x, a.y + i * a.y_stride, row, Columns{0, a.features}, nullptr);
    return true;
  }
  template <std::size_t Vectors>
  static void short_rows(const ForwardRows<T>& a, std::size_t first, std::size_t count, bool* declined, std::size_t end) {
    if (a.gamma != nullptr) rms_norm_short_rows<Vectors, kGroupRows, true, T, A>(a, first, count, declined, end);
    else rms_norm_short_rows<Vectors, kGroupRows, false, T, A>(a, first, count, declined, end);
  }
};

// ---------------------------------------------------------------------------------------
// The forward driver, for either norm (Norm: LayerNormForward or RmsNormForward)

/// Rows of at most this many bytes of A go fused (see forward_fused): a pass then holds a row's
/// x, the next row's x, its output and γ, 32 KiB at 8 KiB a row, in a 48 KiB L1.
inline constexpr std::size_t kFusedMaxRowBytes = 8 * 1024;

/// Whether forward_fused takes a pass over rows longer than the registers: rows of at most
/// kFusedMaxRowBytes, in a pass that streams its output (for which every row of y must start on
/// a whole vector) or fits the cache with room to spare, there but for bfloat16 rows: on
/// AVX-512 they ran 1.12 (1024×768) to 1.19 (16×768) times as long fused in cache, with either
/// rounding, where float16 rows took 0.85–0.87 of the time and bfloat16 on AVX2 0.95.
template <bool Stream, class T>
bool fused_pass(const ForwardRows<T>& a) {
  const bool short_enough = a.features * sizeof(accum_t<T>) <= kFusedMaxRowBytes;
  if (Stream) return short_enough && every_row_aligned<accum_t<T>>(a.y, a.y_stride);
  return short_enough && a.in_cache && !std::is_same_v<T, bfloat16>;
}

/// Rows [begin, end) one at a time, each row's output written during the pass that reads the
/// next row's statistics, a vector of output after each vector read (row_sums with a
/// RowWriter). Row by row, a row's two passes alternate: the statistics only read, from
/// memory or the cache, and the output reads the row again from L1 and writes. Interleaved, the
/// next row's reads go on while this row is written, as in a copy, and the short serial chain
/// that ends a row's statistics (a horizontal sum, a square root, a division) overlaps the next
/// pass. A rescaled row's output is written on its own first. Results are the same bit for bit.
///
/// RMSNorm, against the 12 KiB groups where the pass fits the cache and single rows reading
/// ahead where it streams (Zen 5, floats, one thread, medians of 21 paired trials of two builds),
/// time: AVX-512 16×768 0.81, 4096×300 0.76, 1024×768 0.88, 512×2048 0.91, 2048×1024 0.90,
/// 4096×512 0.89, 32768×768 0.87–0.91, 8192×1536 0.71–0.80, 16384×2048 0.83–0.90; AVX2 16×768
/// 0.84, 4096×300 0.81, 1024×768 0.77, 2048×1024 0.85, 32768×768 0.77, 8192×1536 0.86; doubles
/// (AVX-512) 0.79–0.91 in cache, 0.76 at 32768×768; float16 0.85–0.87 in cache, 0.67 at
/// 32768×768; bfloat16 0.86–0.88 from memory. Predicted from a standalone harness (minimal
/// kernels, 768 floats): 0.8 from the cache and from memory, and at 4096×768 too, where x and
/// y fill the last-level cache without streaming: there single rows and their read-ahead stayed
/// faster (fused 1.06, AVX2 1.14), as they did for rows over 8 KiB (128×4096 1.10, 1024×4096
/// 1.11). Reading the row after next ahead in the fused pass cost 1.27 at 4096×768 and 1.18 at
/// 32768×768. LayerNorm's statistics (Welford blocks of 16 vectors) so interleaved with its
/// output ran slower than its groups and single rows: 1.19 at 4096×768, 1.13 at 4096×1024, 0.92
/// in L1 (16×768, against single rows), so LayerNorm does not fuse (LayerNormForward::kFused).
/// Nor did LayerNorm gain fused only where its output streams, where RMSNorm gains most (Zen 5,
/// AVX-512, floats, page-aligned arrays, medians of 15 paired trials), time against unfused:
/// 32768×768 1.01, 16384×1024 1.02, 8192×1536 1.13, 16384×2048 1.14; training forward
/// 32768×768 1.03.
/// On a Zen 4 with a 32 KiB L1 (floats, AVX-512, medians of 11 paired trials) RMSNorm fused in
/// cache took 0.76 at 16×768, 0.82 at 1024×768, 0.86 at 4096×300 and 0.96 at 2048×1024; the
/// streamed passes, each shape measured in both orders of the builds (which build was loaded
/// first moved the ratio by up to 9% in that regime), 0.98 at 32768×768 and 8192×1536 and 1.01
/// at 16384×2048, whose 8 KiB rows fill a quarter of that L1 each.
template <bool Stream, class Norm, class T>
void forward_fused(const ForwardRows<T>& a, std::size_t begin, std::size_t end) {
  if (begin == end) return;
  const std::size_t n = a.features;
  const auto x_of = [&](std::size_t i) { return a.x + i * a.x_stride; };
  typename Norm::Row row = Norm::statistics(a, x_of(begin), nullptr);
  Norm::save(a, begin, row);
  for (std::size_t i = begin; i + 1 < end; ++i) {
    T* y = a.y + i * a.y_stride;
    typename Norm::Row next;
    const auto next_statistics = [&](const auto& writer) { next = Norm::statistics(a, x_of(i + 1), nullptr, writer); };
    if (!Norm::template writing<Stream>(a, x_of(i), y, row, next_statistics)) {
      Norm::template output<Stream>(a, x_of(i), y, row, Columns{0, n}, nullptr);
      next_statistics(NoWriter{});
    }
    Norm::save(a, i + 1, next);
    row = next;
  }
  Norm::template output<Stream>(a, x_of(end - 1), a.y + (end - 1) * a.y_stride, row, Columns{0, n}, nullptr);
}

/// Rows [begin, end) in groups: the statistics of every row of a group, then every output;
/// long LayerNorm rows with β (in_pairs) go by pairs, their outputs by blocks of columns, each
/// block of both rows in turn.
template <bool Stream, class Norm, class T>
void forward_in_groups(const ForwardRows<T>& a, std::size_t begin, std::size_t end) {
  const bool pairs = in_pairs(a);
  const std::size_t group = pairs ? 2 : group_rows<T>(a.features, a.in_cache ? a.cached_group_bytes : kGroupBytes);
  const std::size_t block = pairs ? kColumnBytes / sizeof(accum_t<T>) : a.features;
  typename Norm::Row stats[kGroupRows];
  for (std::size_t first = begin; first < end; first += group) {
    const std::size_t count = end - first < group ? end - first : group;
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t i = first + k;
      stats[k] = Norm::statistics(a, a.x + i * a.x_stride, next_row(a, i + group, end, 0));
    }
    for (std::size_t k = 0; k < count; ++k) Norm::save(a, first + k, stats[k]);
    std::size_t width = block + (pairs ? unaligned_head<accum_t<T>>(a.y + first * a.y_stride) : 0);
    for (std::size_t from = 0; from < a.features; from += width, width = block) {
      const Columns c{from, a.features - from < width ? a.features - from : width};
      for (std::size_t k = 0; k < count; ++k) {
        const std::size_t i = first + k;
        Norm::template output<Stream>(a, a.x + i * a.x_stride, a.y + i * a.y_stride, stats[k], c,
                                      next_row(a, i + group, end, (a.features + from) / 2));
      }
    }
  }
}

/// Rows [begin, end) longer than the registers: fused where the norm and the pass allow it
/// (see forward_fused), else by groups.
template <bool Stream, class Norm, class T>
void forward_long_rows(const ForwardRows<T>& a, std::size_t begin, std::size_t end) {
  if constexpr (Norm::kFused) {
    if (fused_pass<Stream>(a)) return forward_fused<Stream, Norm>(a, begin, end);
  }
  forward_in_groups<Stream, Norm>(a, begin, end);
}

/// A short row the register kernels declined. Constant rows (LayerNorm) and zero rows (RMSNorm),
/// such as a batch's padding, have variance 0, which the general path would take for an
/// underflow: it looks up the row's peak and, for a nonzero constant, rescales and measures
/// again, to arrive at mean x₀ and variance 0 exactly, hence y = β. Here they go straight to
/// that answer: with every fourth row zeros (one thread, AVX-512, floats, standalone harness),
/// LayerNorm 4096×64 16.7 → 28.9 GiB/s, 4096×256 31.3 → 40.1, RMSNorm 4096×64 24.6 → 46.2,
/// 4096×256 46.6 → 60.0. Ordinary rows moved by less than 1%. Inside the kernels, the same
/// check had cost ordinary rows 3–20%, though it never ran for them: it changed the code
/// around it.
template <class Norm, class T>
void declined_row(const ForwardRows<T>& a, std::size_t i) {
  if (!Norm::constant_row(a, i)) forward_in_groups<false, Norm>(a, i, i + 1);
}

/// Rows [begin, end): short rows from registers (the rows they decline one at a time, see
/// declined_row), longer rows by groups. Short rows stream their output only where
/// every row starts on a whole vector: their registers sit at fixed offsets from the row's
/// start, with no unaligned head to peel as write_row does. Unaligned, they store normally,
/// and still beat streaming through the general path (LayerNorm 131072×64 floats, AVX-512,
/// one thread: general path streamed 11.8 GiB/s, short rows 27.6 stored, 30.2 streamed).
/// Non-temporal stores end with a fence.
template <class Norm, class T>
void forward(const ForwardRows<T>& a, std::size_t begin, std::size_t end) {
  if (fits_registers<T>(a.features)) {
    ForwardRows<T> registered = a;
    registered.stream = a.stream && every_row_aligned<accum_t<T>>(a.y, a.y_stride);
    with_register_count<accum_t<T>>(a.features, [&](auto vectors) {
      for (std::size_t first = begin; first < end; first += kGroupRows) {
        const std::size_t count = end - first < kGroupRows ? end - first : kGroupRows;
        bool declined[kGroupRows];
        Norm::template short_rows<vectors()>(registered, first, count, declined, end);
        for (std::size_t k = 0; k < count; ++k) {
          if (declined[k]) declined_row<Norm>(a, first + k);
        }
      }
    });
    if (registered.stream) Simd<accum_t<T>>::stream_fence();
  } else if (a.stream) {
    forward_long_rows<true, Norm>(a, begin, end);
    Simd<accum_t<T>>::stream_fence();
  } else {
    forward_long_rows<false, Norm>(a, begin, end);
  }
}

// ---------------------------------------------------------------------------------------
// Backward, per row, in x̂ form (DESIGN §2), with g = dy·γ:
//   LayerNorm: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)),  RMSNorm: dx = rstd·(g − x̂·mean(g·x̂)).
// One pass gathers the row sums, a second writes dx and adds dy·x̂ (and dy) into the
// gradients.
//
// LayerNorm's saved mean is one A, so x − mean is off by the mean's rounding (up to
// 6e-5 for a float row at 2000 + N(0,1)). With x̃ = (x − mean)·rstd, the true x̂ is
// x̃ − mean(x̃), as x̂ has mean 0; the first pass sums x̃ too and the second uses x̃ − mean(x̃).

template <bool Gamma, class T, class A>
struct LayerNormBackwardTerms {
  const T* dy;
  const T* x;
  const A* gamma;
  typename Simd<A>::vec mean, rstd;
  // acc[0] += g, acc[1] += g·x̃, acc[2] += x̃
  void add(std::size_t j, typename Simd<A>::vec* acc) const {
    using S = Simd<A>;
    const typename S::vec xt = S::mul(S::sub(S::load(x + j), mean), rstd);
    typename S::vec g = S::load(dy + j);
    if constexpr (Gamma) g = S::mul(g, S::load(gamma + j));
    acc[0] = S::add(acc[0], g);
    acc[1] = S::mul_add(g, xt, acc[1]);
    acc[2] = S::add(acc[2], xt);
  }
  void add_n(std::size_t j, std::size_t count, typename Simd<A>::vec* acc) const {
    using S = Simd<A>;
    const typename S::vec xt = S::keep_n(S::mul(S::sub(S::load_n(x + j, count), mean), rstd), count);
    typename S::vec g = S::load_n(dy + j, count);
    if constexpr (Gamma) g = S::mul(g, S::load_n(gamma + j, count));
    acc[0] = S::add(acc[0], g);
    acc[1] = S::mul_add(g, xt, acc[1]);
    acc[2] = S::add(acc[2], xt);
  }
};

/// Σ g·x̂ over an RMSNorm row, x̂ = x·rstd.
template <bool Gamma, class T, class A>
struct RmsNormBackwardTerms {
  const T* dy;
  const T* x;
  const A* gamma;
  typename Simd<A>::vec rstd;
  void add(std::size_t j, typename Simd<A>::vec* acc) const {
    using S = Simd<A>;
    typename S::vec g = S::load(dy + j);
    if constexpr (Gamma) g = S::mul(g, S::load(gamma + j));
    acc[0] = S::mul_add(g, S::mul(S::load(x + j), rstd), acc[0]);
  }
  void add_n(std::size_t j, std::size_t count, typename Simd<A>::vec* acc) const {
    using S = Simd<A>;
    typename S::vec g = S::load_n(dy + j, count);
    if constexpr (Gamma) g = S::mul(g, S::load_n(gamma + j, count));
    acc[0] = S::mul_add(g, S::mul(S::load_n(x + j, count), rstd), acc[0]);
  }
};

/// A row's constants for the second pass, negated for FMAs: x̂ = (x − mean)·r + neg_correction
/// and dx = g·r + x̂·neg_dx_xhat + neg_dx_const. For RMSNorm mean is 0, and neg_correction and
/// neg_dx_const are −0, which adds to a product without changing it, even a zero's sign.
template <class A>
struct BackwardCoefficients {
  A mean, r, neg_correction, neg_dx_xhat, neg_dx_const;
};

/// Calls f(gamma, beta, dx), each std::true_type or std::false_type, with the flags that fit
/// `a`: γ present (and so its gradient), β's gradient wanted, dx wanted.
template <class T, class F>
NORMKIT_ALWAYS_INLINE void with_backward_flags(const BackwardRows<T>& a, F&& f) {
  using yes = std::true_type;
  using no = std::false_type;
  const bool dx = a.dx != nullptr;
  if (a.gamma == nullptr) {
    if (dx) f(no{}, no{}, yes{});
  } else if (a.grad_beta != nullptr) {
    if (dx) f(yes{}, yes{}, yes{});
    else f(yes{}, yes{}, no{});
  } else {
    if (dx) f(yes{}, no{}, yes{});
    else f(yes{}, no{}, no{});
  }
}

/// Rows whose second passes run together, column by column (see BackwardTile), when they have
/// a γ gradient to share and take kTileMinRowBytes in A (4096 floats): then a row's x, dy, γ and
/// partials no longer fit a 48 KiB L1 together. Measured in normkit_bench against single rows
/// (float, AVX-512, one thread): LayerNorm backward 1024×4096 +22% GiB/s, 8192×4096 +11%,
/// RMSNorm 1024×4096 +11%. At 768 floats tiles won in L1 (32×768 +35%) but lost from the
/// last-level cache (4096×768 −14%), where single rows keep the better read-ahead, so shorter
/// rows go singly. Four rows were no faster than two, and their pointers no longer fit the
/// general registers.
inline constexpr std::size_t kTileRows = 2;
inline constexpr std::size_t kTileMinRowBytes = 16 * 1024;

/// The second pass over the Rows rows from `first`, given their coefficients, one column
/// vector at a time: the γ/β gradient partials of the column are loaded once, gain every
/// row's dy·x̂ and dy in registers, and are stored once. Row by row, the partials were loaded
/// and stored for every row: 5 loads, 3 stores and 7 operations a vector, ~4.8 cycles in L1
/// where the same work without the partials took 2.4 (AVX-512, Zen 5). Two rows take their
/// constants in 10 registers. Each row adds into the partials in row order, as row by row, so
/// the sums are unchanged. Every row's x and dy are loaded before any dx is stored, which an
/// in-place dx allows because rows do not overlap; the partials are stored before the last
/// row's dx, the order of the single-row pass this replaced (stored last, single rows of 768
/// floats ran 10–16% below that pass in normkit_bench; in this order, 13% above it).
/// Gamma: γ is present and so is its gradient; Beta: β's gradient is wanted; Dx: dx is wanted.
template <std::size_t Rows, bool Centered, bool Gamma, bool Beta, bool Dx, class T, class A>
struct BackwardTile {
  using S = Simd<A>;
  using V = typename S::vec;
  const T* x[Rows];
  const T* dy[Rows];
  T* dx[Rows];
  const A* gamma;
  A* grad_gamma;
  A* grad_beta;
  V mean[Rows], r[Rows], neg_correction[Rows], neg_dx_xhat[Rows], neg_dx_const[Rows];

  BackwardTile(const BackwardRows<T>& a, std::size_t first, const BackwardCoefficients<A>* c)
      : gamma(a.gamma), grad_gamma(a.grad_gamma), grad_beta(a.grad_beta) {
    for (std::size_t k = 0; k < Rows; ++k) {
      x[k] = a.x + (first + k) * a.x_stride;
      dy[k] = a.dy + (first + k) * a.dy_stride;
      dx[k] = Dx ? a.dx + (first + k) * a.dx_stride : nullptr;
      mean[k] = S::set(c[k].mean);
      r[k] = S::set(c[k].r);
      neg_correction[k] = S::set(c[k].neg_correction);
      neg_dx_xhat[k] = S::set(c[k].neg_dx_xhat);
      neg_dx_const[k] = S::set(c[k].neg_dx_const);
    }
  }

  /// Columns [j, j + count) of every row: a full vector (Full), streamed past the cache
  /// (Stream, full vectors only), or the first count lanes.
  template <bool Full, bool Stream>
  NORMKIT_ALWAYS_INLINE void column(std::size_t j, std::size_t count) const {
    V grad_g = S::zero(), grad_b = S::zero(), gam = S::zero();
    if constexpr (Gamma) {
      grad_g = load<Full>(grad_gamma + j, count);
      gam = load<Full>(gamma + j, count);
    }
    if constexpr (Beta) grad_b = load<Full>(grad_beta + j, count);
    V dys[Rows], xs[Rows];
    NORMKIT_UNROLL
    for (std::size_t k = 0; k < Rows; ++k) {
      dys[k] = load<Full>(dy[k] + j, count);
      xs[k] = load<Full>(x[k] + j, count);
      NORMKIT_IN_REGISTER(dys[k]);
    }
    NORMKIT_UNROLL
    for (std::size_t k = 0; k < Rows; ++k) {
      const V dyv = dys[k];
      V d = xs[k];
      if constexpr (Centered) d = S::sub(d, mean[k]);
      const V xhat = S::mul_add(d, r[k], neg_correction[k]);
      if constexpr (Gamma) grad_g = S::mul_add(dyv, xhat, grad_g);
      if constexpr (Beta) grad_b = S::add(dyv, grad_b);
      if (k + 1 == Rows) {
        if constexpr (Gamma) put<Full>(grad_gamma + j, grad_g, count);
        if constexpr (Beta) put<Full>(grad_beta + j, grad_b, count);
      }
      if constexpr (Dx) {
        const V g = Gamma ? S::mul(dyv, gam) : dyv;
        const V out = S::mul_add(g, r[k], S::mul_add(xhat, neg_dx_xhat[k], neg_dx_const[k]));
        if constexpr (Stream) S::stream(dx[k] + j, out);
        else put<Full>(dx[k] + j, out, count);
      }
    }
  }
};

/// Whether backward passes read ahead (see backward_tile and backward_in_tiles) wherever they run:
/// where a vector holds at most 32 bytes of T. Wider vectors (AVX-512 with floats or doubles) read
/// ahead where BackwardRows::wide_reads_ahead says so, on every CPU but a Zen 5 (see
/// wide_backward_reads_ahead in driver.hpp). On Zen 5 the tiles' prefetches cost more than they
/// brought: without them, LayerNorm backward took 0.80–0.96 of the time at 1024×4096 floats,
/// 0.90–0.93 at 256×16384 and 0.85–0.89 at 8192×4096, RMSNorm 0.80–0.92 (one thread, AVX-512,
/// medians of 30 paired trials of the two builds, three runs); one prefetch per line instead of
/// four moved nothing, and without the first passes' alone neither. Single rows kept theirs at
/// first, as LayerNorm had lost 2–5% without at 768 floats; measured again (Zen 5, medians of 15
/// paired trials, two runs), time without: LayerNorm 4096×768 0.96–0.98, 32768×768 0.93–0.95,
/// 43690×768 0.89–0.92, 4096×384 0.92, 2048×1024 0.90; RMSNorm 4096×768 0.89, 32768×768 0.91–0.92,
/// 2048×1024 0.59 (a row of 4 KiB read ahead by half of it), but 16384×2048 1.03–1.05.
///
/// Narrower vectors read ahead everywhere. On a Zen 5, AVX2 gains from it only at 8192×4096, from
/// memory, and was faster without elsewhere, from memory at 768 floats too. Time without (floats,
/// one thread, medians of 11–21 paired trials, one or two runs): LayerNorm 8192×4096 1.04–1.10,
/// 256×16384 0.82–0.91, 1024×4096 0.89–0.99, 64×16384 0.80, 32768×768 0.91; RMSNorm 1.05–1.08,
/// 0.79–0.82, 0.90–0.98, 0.86, 0.90. AVX2 runs on a Zen 5 only when NORMKIT_ISA forces it; on the
/// CPUs without AVX-512, which choose AVX2 themselves, this is unmeasured, so it keeps its
/// read-ahead. 16-bit types on AVX-512 (32 bytes of T a vector) keep theirs as well, for rows of
/// 4096: time without (Zen 5, one thread, 11 paired trials, one run, bfloat16 and float16 alike)
/// 8192×4096 1.20–1.28 and 1024×4096 1.11–1.16, against 256×16384 0.91–0.96 and 4096×768 and
/// 32768×768 0.96–0.99.
template <class A, class T>
inline constexpr bool kBackwardReadsAhead = Simd<A>::lanes * sizeof(T) <= 32;

template <class T>
bool backward_reads_ahead(const BackwardRows<T>& a) {
  return kBackwardReadsAhead<accum_t<T>, T> || a.wide_reads_ahead;
}

/// Runs a BackwardTile over every column of its rows while reading ahead (with ReadAhead, see
/// backward_reads_ahead) the second halves of the x of the `ahead_rows` rows after them, and in
/// tiles of several rows their dy too (the first passes read ahead the first halves), so that
/// memory keeps reading while this pass mostly writes (see write_row). Single rows leave dy to the
/// hardware prefetcher: reading it ahead too lost 7–14% at 768 floats (not measured for the long
/// rows that go singly, those without γ or streamed unaligned). Tiles, which read x and dy of two
/// rows at once, gained from it; predicted +15% from a standalone harness, measured in
/// normkit_bench (one thread, Zen 4, best of two alternated runs) for LayerNorm backward, float,
/// AVX-512: 1024×4096 15.3 → 16.3 GiB/s, 2048×8192 16.1 → 18.6, 8192×4096 16.4 → 19.4, 256×16384
/// 15.2 → 15.0; on AVX2 +26 to +61%; RMSNorm +13 to +25%, double +7 to +27%, bfloat16 +15 to +35%.
/// With Stream, dx's full vectors bypass the cache from the first aligned address on, which must be
/// the same column in every row.
template <std::size_t Rows, bool Centered, bool Gamma, bool Beta, bool Dx, bool Stream, bool ReadAhead, class T, class A>
void backward_tile(const BackwardRows<T>& a, std::size_t first, const BackwardCoefficients<A>* c, std::size_t ahead_rows) {
  using S = Simd<A>;
  constexpr std::size_t W = S::lanes;
  // A local copy, as in write_row: stores to dx could otherwise alias its members.
  const BackwardTile<Rows, Centered, Gamma, Beta, Dx, T, A> tile(a, first, c);
  const std::size_t n = a.features;
  std::size_t j = 0;
  if constexpr (Stream && Dx) {
    const std::size_t unaligned = unaligned_head<A>(tile.dx[0]);
    const std::size_t head = unaligned < n ? unaligned : n;
    if (head > 0) tile.template column<false, false>(0, head);
    j = head;
  }
  // Rows past the range read ahead this tile's last row instead, which is most likely cached:
  // a branch per row and column would cost more.
  const T* ahead[Rows];
  const T* ahead_dy[Rows];
  for (std::size_t k = 0; k < Rows; ++k) {
    const std::size_t row = first + (k < ahead_rows ? Rows + k : Rows - 1);
    ahead[k] = a.x + row * a.x_stride + n / 2;
    ahead_dy[k] = a.dy + row * a.dy_stride + n / 2;
  }
  for (; j + W <= n; j += W) {
    if constexpr (ReadAhead && Rows == 1) {
      read_ahead<A, AheadHint::into_l2>(ahead[0] + j / 2);
    } else if constexpr (ReadAhead) {
      NORMKIT_UNROLL
      for (std::size_t k = 0; k < Rows; ++k) {
        read_ahead<A, AheadHint::into_l2>(ahead[k] + j / 2);
        read_ahead<A, AheadHint::into_l2>(ahead_dy[k] + j / 2);
      }
    }
    tile.template column<true, Stream && Dx>(j, W);
  }
  if (j < n) tile.template column<false, false>(j, n - j);
}

/// backward_tile, reading ahead where backward_reads_ahead(a): its branches are compiled only
/// for vectors that may go either way.
template <std::size_t Rows, bool Centered, bool Gamma, bool Beta, bool Dx, bool Stream, class T, class A>
void backward_tile_of(const BackwardRows<T>& a, std::size_t first, const BackwardCoefficients<A>* c, std::size_t ahead_rows) {
  if constexpr (!kBackwardReadsAhead<A, T>) {
    if (!a.wide_reads_ahead) return backward_tile<Rows, Centered, Gamma, Beta, Dx, Stream, false>(a, first, c, ahead_rows);
  }
  backward_tile<Rows, Centered, Gamma, Beta, Dx, Stream, true>(a, first, c, ahead_rows);
}

/// A row's second pass (a BackwardTile of one row) as the writer of the next row's first pass
/// (see backward_fused).
template <class Tile>
struct TileWriter {
  Tile tile;
  template <bool Full>
  NORMKIT_ALWAYS_INLINE void column(std::size_t j, std::size_t count) const {
    tile.template column<Full, false>(j, count);
  }
};

/// Row i's x, where a first pass reads ahead (its first half, see write_row), or nullptr past `end`
/// or where backward passes read nothing ahead (backward_reads_ahead).
template <class T>
const T* next_x(const BackwardRows<T>& a, std::size_t i, std::size_t end) {
  return backward_reads_ahead(a) && i < end ? a.x + i * a.x_stride : nullptr;
}

/// Row i's dy, where a first pass in tiles also reads ahead, or nullptr as for next_x.
template <class T>
const T* next_dy(const BackwardRows<T>& a, std::size_t i, std::size_t end) {
  return backward_reads_ahead(a) && i < end ? a.dy + i * a.dy_stride : nullptr;
}

/// The second pass's coefficients of LayerNorm rows from their sums Σg, Σg·x̃, Σx̃ over n, a
/// row in each lane of double, negated for the FMAs of dx (see BackwardCoefficients). Means multiply
/// by −1/n: three divisions (13 cycles of latency each, and they share the divider) were the
/// hottest spot of a short row's critical path, and 1/n's rounding moves a coefficient by at
/// most a unit in the last place of a double.
///
/// A row alone (broadcast to every lane) and the same row in a vector of rows take the same
/// instructions, so they give the same coefficients bit for bit: the one sum of products,
/// correction·mean_g − mean_gx, is an explicit FMA, and nothing else adds, so a compiler free
/// to contract a product into an addition (GCC's vector intrinsics are plain arithmetic to it)
/// finds nothing to choose. Hence the negative means: negated afterwards, as 0 − x, they would
/// be such additions.
struct LayerNormCoefficients {
  using D = Simd<double>;
  D::vec neg_correction, neg_dx_xhat, neg_dx_const;

  NORMKIT_ALWAYS_INLINE LayerNormCoefficients(D::vec sum_g, D::vec sum_gx, D::vec sum_x, D::vec neg_inv_n, D::vec r) {
    neg_correction = D::mul(sum_x, neg_inv_n);
    const D::vec neg_mean_g = D::mul(sum_g, neg_inv_n);
    neg_dx_xhat = D::mul(r, D::mul_add(neg_correction, neg_mean_g, D::mul(sum_gx, neg_inv_n)));
    neg_dx_const = D::mul(r, neg_mean_g);
  }

  /// One row's, in every lane.
  NORMKIT_ALWAYS_INLINE LayerNormCoefficients(const double (&sums)[3], double neg_inv_n, double r)
      : LayerNormCoefficients(D::set(sums[0]), D::set(sums[1]), D::set(sums[2]), D::set(neg_inv_n), D::set(r)) {}

  /// The row taken alone (lane 0), with its mean and r, in A.
  template <class A>
  NORMKIT_ALWAYS_INLINE BackwardCoefficients<A> row(A mean, A r) const {
    return {mean, r, static_cast<A>(first(neg_correction)), static_cast<A>(first(neg_dx_xhat)),
            static_cast<A>(first(neg_dx_const))};
  }

  /// Lane 0 of v.
  NORMKIT_ALWAYS_INLINE static double first(D::vec v) {
    alignas(64) double lanes[D::lanes];
    D::store(lanes, v);
    return lanes[0];
  }
};

/// The second pass's coefficients of an RMSNorm row from its sum Σg·x̂ over n, inv_n = 1/n:
/// only dx's coefficient of x̂ is not zero. neg_correction and neg_dx_const are −0, so that
/// adding them leaves the products' zeros their sign (see BackwardCoefficients).
template <class A>
NORMKIT_ALWAYS_INLINE BackwardCoefficients<A> rms_norm_coefficients(A r, double sum_gx, double inv_n) {
  return {A(0), r, -A(0), static_cast<A>(-(static_cast<double>(r) * sum_gx * inv_n)), -A(0)};
}

/// LayerNorm for the backward drivers below: the row sums Σg, Σg·x̃, Σx̃ give the coefficients.
template <class T>
struct LayerNormBackward {
  static constexpr bool kCentered = true;
  static constexpr bool kFused = false;  // measured no faster fused (see backward_fused)
  static BackwardCoefficients<accum_t<T>> coefficients(const BackwardRows<T>& a, std::size_t i, const T* ahead,
                                                       const T* ahead_dy) {
    using A = accum_t<T>;
    using S = Simd<A>;
    const T* dy = a.dy + i * a.dy_stride;
    const T* x = a.x + i * a.x_stride;
    const A mean = a.mean[i], r = a.rstd[i];
    double sums[3];
    if (a.gamma != nullptr) {
      row_sums<A, 3>(a.features, LayerNormBackwardTerms<true, T, A>{dy, x, a.gamma, S::set(mean), S::set(r)}, sums, ahead, ahead_dy);
    } else {
      row_sums<A, 3>(a.features, LayerNormBackwardTerms<false, T, A>{dy, x, a.gamma, S::set(mean), S::set(r)}, sums, ahead, ahead_dy);
    }
    return LayerNormCoefficients(sums, -1 / static_cast<double>(a.features), static_cast<double>(r)).row(mean, r);
  }
};

/// RMSNorm for the backward drivers below: the row sum Σg·x̂ gives the coefficients.
template <class T>
struct RmsNormBackward {
  static constexpr bool kCentered = false;
  static constexpr bool kFused = true;  // see backward_fused
  template <class Writer = NoWriter>
  static BackwardCoefficients<accum_t<T>> coefficients(const BackwardRows<T>& a, std::size_t i, const T* ahead,
                                                       const T* ahead_dy, const Writer& writer = {}) {
    using A = accum_t<T>;
    using S = Simd<A>;
    const T* dy = a.dy + i * a.dy_stride;
    const T* x = a.x + i * a.x_stride;
    const A r = a.rstd[i];
    double sums[1];
    if (a.gamma != nullptr) {
      row_sums<A, 1>(a.features, RmsNormBackwardTerms<true, T, A>{dy, x, a.gamma, S::set(r)}, sums, ahead, ahead_dy, writer);
    } else {
      row_sums<A, 1>(a.features, RmsNormBackwardTerms<false, T, A>{dy, x, a.gamma, S::set(r)}, sums, ahead, ahead_dy, writer);
    }
    return rms_norm_coefficients(r, sums[0], 1 / static_cast<double>(a.features));
  }
};

/// γ and the γ/β gradient partials of short rows, for backward_in_registers. Where registers
/// allow (kHeld), they stay in registers from the first row to the last: loaded once, gaining
/// each row's dy·x̂ and dy in row order, as row by row, and stored once. Otherwise each row
/// loads γ and loads and stores both partials, 12 vector stores a 64-float LayerNorm row on
/// AVX-512 where dx alone is 4, and a 512-bit store issues every other cycle on Zen 4.
///
/// Held, with x, dy and γ·dy of a row beside them, and measured against each row loading them
/// (one thread, AVX-512, 4096 rows of floats, standalone harness): LayerNorm 64 floats +11%,
/// 96 +8%, 112 +1%, but 128 −11% (48 registers' worth, spilled); RMSNorm 64 +12%, 128 +12%,
/// 144 +10%, 160 ±0. On AVX2's 16 registers they gained 3–4% at 16 floats and lost 5–9% for
/// RMSNorm at 32 to 64, so only 32-register ISAs hold them. NEON and doubles follow the same
/// register count unmeasured.
template <std::size_t Vectors, bool Gamma, bool Beta, class A>
struct ShortRowGradients {
  using S = Simd<A>;
  using V = typename S::vec;
  static constexpr std::size_t kRowRegisters = (Gamma ? 3 : 2) * Vectors;  // x, dy, γ·dy
  static constexpr std::size_t kOwnRegisters = (Gamma ? 2 : 0) * Vectors + (Beta ? Vectors : 0);
  static constexpr bool kHeld = S::registers >= 32 && kRowRegisters + kOwnRegisters < S::registers * 3 / 2;

  // Locals: the stores to the gradients could alias the caller's rows, and GCC reloaded each
  // of these pointers after every store.
  const A* gamma;
  A* grad_gamma;
  A* grad_beta;
  RegisterRow<Vectors, A, A> held_gamma, held_grad_gamma, held_grad_beta;

  template <class T>
  NORMKIT_ALWAYS_INLINE explicit ShortRowGradients(const BackwardRows<T>& a)
      : gamma(a.gamma), grad_gamma(a.grad_gamma), grad_beta(a.grad_beta) {
    if constexpr (kHeld && Gamma) {
      held_gamma = RegisterRow<Vectors, A, A>(gamma, a.features);
      held_grad_gamma = RegisterRow<Vectors, A, A>(grad_gamma, a.features);
    }
    if constexpr (kHeld && Beta) held_grad_beta = RegisterRow<Vectors, A, A>(grad_beta, a.features);
  }

  /// γ in register k (lanes past the row zero).
  template <bool Full>
  NORMKIT_ALWAYS_INLINE V gamma_at(std::size_t k, std::size_t count) const {
    if constexpr (kHeld) return held_gamma.d[k];
    else return load<Full>(gamma + k * S::lanes, count);
  }

  /// Adds dy·x̂ to the γ partial and dy to the β partial in register k, those wanted.
  template <bool Full>
  NORMKIT_ALWAYS_INLINE void add(std::size_t k, std::size_t count, V dy, V xhat) {
    const std::size_t j = k * S::lanes;
    if constexpr (Gamma && kHeld) held_grad_gamma.d[k] = S::mul_add(dy, xhat, held_grad_gamma.d[k]);
    else if constexpr (Gamma) put<Full>(grad_gamma + j, S::mul_add(dy, xhat, load<Full>(grad_gamma + j, count)), count);
    if constexpr (Beta && kHeld) held_grad_beta.d[k] = S::add(dy, held_grad_beta.d[k]);
    else if constexpr (Beta) put<Full>(grad_beta + j, S::add(dy, load<Full>(grad_beta + j, count)), count);
  }

  /// Stores the partials held in registers.
  NORMKIT_ALWAYS_INLINE void store() const {
    if constexpr (kHeld && Gamma) held_grad_gamma.template store<false>(grad_gamma, Unchanged{});
    if constexpr (kHeld && Beta) held_grad_beta.template store<false>(grad_beta, Unchanged{});
  }

  struct Unchanged {
    template <bool Full>
    NORMKIT_ALWAYS_INLINE V value(V v, std::size_t, std::size_t) const {
      return v;
    }
  };
};

/// The lane sums Σg, Σg·x̃ and Σx̃ over a short row in registers, with x̃ = t·r, t = x − mean
/// (x for RMSNorm), and g = dy·γ, which replaces dy in `g`.
template <class A>
struct LaneSums {
  typename Simd<A>::vec g, gx, x;
};

template <std::size_t Vectors, bool Gamma, bool Beta, class T, class A>
NORMKIT_ALWAYS_INLINE LaneSums<A> lane_sums(const RegisterRow<Vectors, T, A>& t, RegisterRow<Vectors, T, A>& g,
                                            typename Simd<A>::vec r, const ShortRowGradients<Vectors, Gamma, Beta, A>& grads) {
  using S = Simd<A>;
  LaneSums<A> sums{S::zero(), S::zero(), S::zero()};
  t.for_each([&](std::size_t k, auto full, std::size_t count) {
    const typename S::vec xt = S::mul(t.d[k], r);
    if constexpr (Gamma) g.d[k] = S::mul(g.d[k], grads.template gamma_at<full()>(k, count));
    sums.g = S::add(sums.g, g.d[k]);
    sums.gx = S::mul_add(g.d[k], xt, sums.gx);
    sums.x = S::add(sums.x, xt);
  });
  return sums;
}

/// Backward of row i when it fits in Vectors registers: x and dy are read once, the sums and
/// then dx come from the registers, and γ and the gradient partials from `grads`. Each
/// element takes the general path's operations (x̃ = (x − mean)·r, x̂ = (x − mean)·r −
/// correction, as one FMA; mean 0 for RMSNorm), only the sums add in another order; what goes
/// is its per-row machinery, the chunk loop and its accumulator sets, which a row of a few
/// vectors does not fill. Its rows spill registers at 64 floats on AVX2 and at 16 vectors
/// anywhere, and still beat the general path (LayerNorm, AVX-512: 4096×136 floats +30%,
/// 4096×192 +20%, 4096×256 +10%); reloading dy instead measured no better at 64 floats on
/// AVX2. inv_n is 1/features (see LayerNormCoefficients).
template <std::size_t Vectors, bool Centered, bool Gamma, bool Beta, bool Dx, class T, class A>
NORMKIT_ALWAYS_INLINE void backward_in_registers(const BackwardRows<T>& a, std::size_t i, double inv_n,
                                                 ShortRowGradients<Vectors, Gamma, Beta, A>& grads) {
  using S = Simd<A>;
  using V = typename S::vec;
  constexpr std::size_t W = S::lanes;
  const std::size_t n = a.features;
  RegisterRow<Vectors, T, A> t(a.x + i * a.x_stride, n);
  RegisterRow<Vectors, T, A> g(a.dy + i * a.dy_stride, n);
  const RegisterRow<Vectors, T, A> dy = g;
  const A r = a.rstd[i];
  const V vr = S::set(r);
  if constexpr (Centered) t.subtract(S::set(a.mean[i]));
  const LaneSums<A> sums = lane_sums(t, g, vr, grads);
  BackwardCoefficients<A> c;
  if constexpr (Centered) {
    const double totals[3] = {static_cast<double>(S::sum(sums.g)), static_cast<double>(S::sum(sums.gx)),
                              static_cast<double>(S::sum(sums.x))};
    c = LayerNormCoefficients(totals, -inv_n, static_cast<double>(r)).row(a.mean[i], r);
  } else {
    c = rms_norm_coefficients(r, static_cast<double>(S::sum(sums.gx)), inv_n);
  }
  const V neg_correction = S::set(c.neg_correction), neg_dx_xhat = S::set(c.neg_dx_xhat);
  const V neg_dx_const = S::set(c.neg_dx_const);
  T* dx = Dx ? a.dx + i * a.dx_stride : nullptr;
  t.for_each([&](std::size_t k, auto full, std::size_t count) {
    const std::size_t j = k * W;
    const V xhat = S::mul_add(t.d[k], vr, neg_correction);
    grads.template add<full()>(k, count, dy.d[k], xhat);
    if constexpr (Dx) put<full()>(dx + j, S::mul_add(g.d[k], vr, S::mul_add(xhat, neg_dx_xhat, neg_dx_const)), count);
  });
}

/// The second pass's constants of a group of short LayerNorm rows (see
/// layer_norm_backward_group): BackwardCoefficients' fields as arrays, one element a row.
template <std::size_t Rows, class A>
struct BackwardGroup {
  alignas(64) A mean[Rows], r[Rows], neg_correction[Rows], neg_dx_xhat[Rows], neg_dx_const[Rows];
};

/// LayerNorm backward of the short rows [first, first + count), count ≤ Rows, each in Vectors
/// registers, phase by phase as the short forward rows go (see layer_norm_short_rows): every
/// row's sums Σg, Σg·x̃, Σx̃ from x and dy in registers, horizontal sums a vector of rows at a
/// time (Simd::sums), then the coefficients a vector of rows at a time, then every row's dx
/// and gradient terms, from x and dy again, now in L1. Each row takes the operations of
/// backward_in_registers, in the same order (Simd::sum adds a vector's lanes as Simd::sums
/// does, and LayerNormCoefficients' instructions are the same for a row alone), so its dx is
/// the same bit for bit wherever the pass's size sends it. Coefficients computed row by row in
/// scalar double instead had cost 7–9% at 4096×64 floats (Zen 5, AVX-512), 3% with AVX2 and
/// 0–4% at 1024×100 and 4096×256 (medians of 15 paired trials). The first phase runs as the
/// forward groups' do (see each_row), unrolled where a row takes at most a quarter of the
/// registers.
///
/// Row by row (backward_in_registers), each row's dx waited on three horizontal sums, the
/// coefficients' arithmetic in double and broadcasts. Predicted from the forward rows' gain
/// when they went phase by phase (+24%): +20% at 64 floats. Measured (Zen 5, AVX-512, floats,
/// one thread, medians of 40–60 paired trials against row by row), time: 512×64 0.72–0.85,
/// 2048×64 0.90–0.95, 4096×64 0.90–0.95, 8192×64 0.93–0.96, 1024×128 and 4096×128 0.92–0.96,
/// 4096×256 0.73–0.88. From memory it lost (65536×64: 1.2–1.4), and so did RMSNorm's rows,
/// whose single sum leaves a shorter chain (4096×64 1.10, 4096×128 1.06–1.09): those go row by
/// row.
template <std::size_t Vectors, std::size_t Rows, bool Gamma, bool Beta, bool Dx, class T, class A>
NORMKIT_ALWAYS_INLINE void layer_norm_backward_group(const BackwardRows<T>& rows, std::size_t first, std::size_t count,
                                                     ShortRowGradients<Vectors, Gamma, Beta, A>& grads) {
  // A local copy, as in layer_norm_short_rows.
  const BackwardRows<T> a = rows;
  using S = Simd<A>;
  using D = Simd<double>;
  using V = typename S::vec;
  static_assert(Rows % S::lanes == 0 && Rows % D::lanes == 0, "row_totals and the coefficients fill whole vectors");
  constexpr std::size_t W = S::lanes;
  const std::size_t n = a.features;
  BackwardGroup<Rows, A> group;
  alignas(64) A sum_g[Rows], sum_gx[Rows], sum_x[Rows];
  V part_g[Rows], part_gx[Rows], part_x[Rows];
  each_row<Vectors, Rows, A>(count, [&](std::size_t k) {
    const std::size_t i = first + (k < count ? k : count - 1);
    group.mean[k] = a.mean[i];
    group.r[k] = a.rstd[i];
    RegisterRow<Vectors, T, A> t(a.x + i * a.x_stride, n);
    RegisterRow<Vectors, T, A> g(a.dy + i * a.dy_stride, n);
    const V vr = S::set(group.r[k]);
    t.subtract(S::set(group.mean[k]));
    const LaneSums<A> sums = lane_sums(t, g, vr, grads);
    part_g[k] = sums.g;
    part_gx[k] = sums.gx;
    part_x[k] = sums.x;
  }, [&](std::size_t k) {
    group.r[k] = 0;
    part_g[k] = part_gx[k] = part_x[k] = S::zero();
  });
  row_totals(part_g, sum_g);
  row_totals(part_gx, sum_gx);
  row_totals(part_x, sum_x);
  const typename D::vec neg_inv_n = D::set(-1 / static_cast<double>(n));
  alignas(64) double wide[3][Rows];
  NORMKIT_UNROLL
  for (std::size_t k = 0; k < Rows; k += D::lanes) {
    const LayerNormCoefficients c(D::load(sum_g + k), D::load(sum_gx + k), D::load(sum_x + k), neg_inv_n, D::load(group.r + k));
    D::store(wide[0] + k, c.neg_correction);
    D::store(wide[1] + k, c.neg_dx_xhat);
    D::store(wide[2] + k, c.neg_dx_const);
  }
  narrow(wide[0], group.neg_correction);
  narrow(wide[1], group.neg_dx_xhat);
  narrow(wide[2], group.neg_dx_const);
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t i = first + k;
    RegisterRow<Vectors, T, A> t(a.x + i * a.x_stride, n);
    const RegisterRow<Vectors, T, A> dy(a.dy + i * a.dy_stride, n);
    const V vr = S::set(group.r[k]), neg_correction = S::set(group.neg_correction[k]);
    const V neg_dx_xhat = S::set(group.neg_dx_xhat[k]), neg_dx_const = S::set(group.neg_dx_const[k]);
    t.subtract(S::set(group.mean[k]));
    T* dx = Dx ? a.dx + i * a.dx_stride : nullptr;
    t.for_each([&](std::size_t v, auto full, std::size_t lanes) {
      const V xhat = S::mul_add(t.d[v], vr, neg_correction);
      grads.template add<full()>(v, lanes, dy.d[v], xhat);
      if constexpr (Dx) {
        const V g = Gamma ? S::mul(dy.d[v], grads.template gamma_at<full()>(v, lanes)) : dy.d[v];
        put<full()>(dx + v * W, S::mul_add(g, vr, S::mul_add(xhat, neg_dx_xhat, neg_dx_const)), lanes);
      }
    });
  }
}

/// Rows [begin, end) that fit registers, with the flags that fit `a`: LayerNorm's by groups of
/// kGroupRows where the pass fits the cache (see layer_norm_backward_group), others row by row.
template <std::size_t Vectors, class Norm, class T>
void backward_short_rows(const BackwardRows<T>& a, std::size_t begin, std::size_t end) {
  const double inv_n = 1 / static_cast<double>(a.features);
  with_backward_flags(a, [&](auto gamma, auto beta, auto dx) {
    using A = accum_t<T>;
    ShortRowGradients<Vectors, gamma(), beta(), A> grads(a);
    if constexpr (Norm::kCentered) {
      if (a.in_cache) {
        for (std::size_t first = begin; first < end; first += kGroupRows) {
          const std::size_t count = end - first < kGroupRows ? end - first : kGroupRows;
          layer_norm_backward_group<Vectors, kGroupRows, gamma(), beta(), dx(), T, A>(a, first, count, grads);
        }
        grads.store();
        return;
      }
    }
    for (std::size_t i = begin; i < end; ++i) {
      backward_in_registers<Vectors, Norm::kCentered, gamma(), beta(), dx(), T, A>(a, i, inv_n, grads);
    }
    grads.store();
  });
}

/// Rows of at most this many bytes of A go backward fused where the pass fits the cache (see
/// backward_fused): a pass then holds two rows of x and dy, a row of dx, γ and its gradient
/// partials, 24 KiB at 4 KiB a row, in a 48 KiB L1.
inline constexpr std::size_t kFusedBackwardMaxRowBytes = 4 * 1024;

/// Whether backward_fused takes a pass over rows longer than the registers: rows of float or
/// double of at most kFusedBackwardMaxRowBytes, in a pass that fits the cache (so nothing is
/// streamed). Rows of 16-bit values, widened as they are read, ran slower fused on AVX-512
/// (float16 1.07–1.12 times as long at 16×768, 1024×768 and 2048×1024, bfloat16 1.04) and no
/// faster on AVX2 (0.99).
template <class T>
bool fused_backward(const BackwardRows<T>& a) {
  return std::is_same_v<T, accum_t<T>> && a.in_cache && a.features * sizeof(T) <= kFusedBackwardMaxRowBytes;
}

/// Rows [begin, end) one at a time, each row's dx (and γ/β gradients) written during the pass
/// that reads the next row's sum (row_sums with a TileWriter), as forward_fused does for the
/// forward: the next row's reads go on while this row's second pass reads x and dy again from
/// L1, and the sum's horizontal add and the coefficients overlap the next pass. Results are
/// the same bit for bit.
///
/// RMSNorm, against single rows (Zen 5, one thread, medians of 15–25 paired trials of two
/// builds), time, in cache: floats on AVX-512 16×768 0.70–0.72, 1024×768 0.87–0.89, 256×1024
/// 0.88–0.95, 1024×1024 0.90, 2048×512 0.86–0.87, 4096×300 0.88–0.98, and 1.28 at 512×2048
/// (8 KiB rows); on AVX2 16×768 0.77, 1024×768 0.77, 2048×512 0.79; doubles on AVX-512 16×512
/// 0.72, 1024×512 0.93, 2048×300 0.91, on AVX2 1024×512 0.89. Where the pass overflows
/// the cache fusing won and lost by shape (streamed: 4096×768 1.05–1.15, 4096×1024 1.05,
/// 8192×768 0.90, 16384×384 0.73; neither streamed nor in cache: 2048×1024 1.00, 4096×512 0.96),
/// so those passes go singly. LayerNorm's three sums so fused ran no faster (1024×768 1.00,
/// 16×768 0.99, 4096×300 1.01; 2048×1024 1.31), so LayerNorm does not fuse
/// (LayerNormBackward::kFused). On a Zen 4 with a 32 KiB L1 (floats, medians of 11 paired
/// trials), in cache: AVX-512 16×768 0.68, 1024×768 0.82–0.85, 2048×512 0.87, 4096×256 0.64,
/// 256×1024 and 1024×1024 1.00; AVX2 1024×768 0.87, 2048×512 0.80.
template <class Norm, bool Gamma, bool Beta, bool Dx, class T>
void backward_fused(const BackwardRows<T>& a, std::size_t begin, std::size_t end) {
  using A = accum_t<T>;
  using Tile = BackwardTile<1, Norm::kCentered, Gamma, Beta, Dx, T, A>;
  if (begin == end) return;
  BackwardCoefficients<A> c = Norm::coefficients(a, begin, nullptr, nullptr);
  for (std::size_t i = begin; i + 1 < end; ++i) {
    const Tile tile(a, i, &c);
    c = Norm::coefficients(a, i + 1, nullptr, nullptr, TileWriter<Tile>{tile});
  }
  backward_tile<1, Norm::kCentered, Gamma, Beta, Dx, false, kBackwardReadsAhead<A, T>>(a, end - 1, &c, 0);
}

/// Rows [begin, end) in two passes: fused where the norm and the pass allow it (see
/// backward_fused), else the sums of kTileRows rows, then their second passes together. One at
/// a time: rows too short for tiles (see kTileRows) or without γ, the rows left over, and every
/// row when streamed rows of dx would not share their aligned columns.
template <class Norm, bool Gamma, bool Beta, bool Dx, bool Stream, class T>
void backward_in_tiles(const BackwardRows<T>& a, std::size_t begin, std::size_t end) {
  using A = accum_t<T>;
  constexpr bool kCentered = Norm::kCentered;
  if constexpr (Norm::kFused && !Stream) {
    if (fused_backward(a)) return backward_fused<Norm, Gamma, Beta, Dx>(a, begin, end);
  }
  std::size_t i = begin;
  const bool tiled = Gamma && a.features * sizeof(A) >= kTileMinRowBytes;
  if (tiled && (!(Stream && Dx) || a.dx_stride % Simd<A>::lanes == 0)) {
    for (; i + kTileRows <= end; i += kTileRows) {
      BackwardCoefficients<A> c[kTileRows];
      for (std::size_t k = 0; k < kTileRows; ++k) {
        const std::size_t ahead = i + k + kTileRows;
        c[k] = Norm::coefficients(a, i + k, next_x(a, ahead, end), next_dy(a, ahead, end));
      }
      const std::size_t next = i + kTileRows;
      backward_tile_of<kTileRows, kCentered, Gamma, Beta, Dx, Stream>(a, i, c, end - next < kTileRows ? end - next : kTileRows);
    }
  }
  for (; i < end; ++i) {
    const BackwardCoefficients<A> c = Norm::coefficients(a, i, next_x(a, i + 1, end), nullptr);
    backward_tile_of<1, kCentered, Gamma, Beta, Dx, Stream>(a, i, &c, i + 1 < end ? 1 : 0);
  }
}

/// Backward over rows [begin, end) for either norm: short rows from registers, others in two
/// passes; non-temporal stores of dx end with a fence. Short rows store dx normally even where
/// it is streamed: through the two passes, streamed, they lost to their registers' ordinary
/// stores (LayerNorm 131072×64 floats, AVX-512, one thread: 17.3 against 23.8 GiB/s, RMSNorm
/// 20.6 against 25.8). Streaming from the registers gained again at 64 floats (26.7, 33.4)
/// but lost 10% at 256, for twice their instantiations.
template <class Norm, class T>
void backward(const BackwardRows<T>& a, std::size_t begin, std::size_t end) {
  if (fits_registers<T>(a.features)) {
    with_register_count<accum_t<T>>(a.features, [&](auto vectors) { backward_short_rows<vectors(), Norm>(a, begin, end); });
  } else if (a.stream) {
    with_backward_flags(a, [&](auto gamma, auto beta, auto dx) { backward_in_tiles<Norm, gamma(), beta(), dx(), true>(a, begin, end); });
    Simd<accum_t<T>>::stream_fence();
  } else {
    with_backward_flags(a, [&](auto gamma, auto beta, auto dx) { backward_in_tiles<Norm, gamma(), beta(), dx(), false>(a, begin, end); });
  }
}

/// How many elements of A past a line start backward wants the γ/β gradient partials to
/// begin: where dx is streamed, as many as dx's address counts elements of T past one, so
/// that column j of the partials is aligned wherever column j of dx is. Streamed rows start
/// their full vectors at dx's first aligned column (see backward_tile), and partials on a line
/// would otherwise straddle two at every vector when dx does not start on one. With x, dy and
/// dx 16 bytes past a line, LayerNorm backward took 0.68 of the time at 32768×768 floats (0.67
/// with dx alone off a line), RMSNorm 0.76, and at 8192×4096 0.94 and 0.97 (AVX-512, one
/// thread, Zen 4, medians of 9–11 paired trials). Short rows keep their partials on a line:
/// their columns start at 0, streamed or not. Where dx's rows start at different points of
/// their lines, each row goes on its own (see backward_in_tiles), and the first row decides.
template <class T>
std::size_t gradient_offset(const BackwardRows<T>& a) {
  using A = accum_t<T>;
  if (!a.stream || a.dx == nullptr || fits_registers<T>(a.features)) return 0;
  constexpr std::size_t line = kLineBytes / sizeof(A);
  return reinterpret_cast<std::uintptr_t>(a.dx) / sizeof(T) % line;
}

/// out[j] += in[j]: adds one block's γ/β gradient partials into another.
template <class A>
void add_into(A* out, const A* in, std::size_t n) {
  using S = Simd<A>;
  constexpr std::size_t W = S::lanes;
  std::size_t j = 0;
  for (; j + W <= n; j += W) S::store(out + j, S::add(S::load(out + j), S::load(in + j)));
  if (j < n) S::store_n(out + j, S::add(S::load_n(out + j, n - j), S::load_n(in + j, n - j)), n - j);
}

/// Whether p[0, n) are all finite: v − v is 0 for a finite v and NaN for ±Inf or NaN, and a
/// NaN survives every addition after it.
template <class A>
bool all_finite(const A* p, std::size_t n) {
  using S = Simd<A>;
  constexpr std::size_t W = S::lanes;
  typename S::vec acc = S::zero();
  std::size_t j = 0;
  for (; j + W <= n; j += W) {
    const typename S::vec v = S::load(p + j);
    acc = S::add(acc, S::sub(v, v));
  }
  if (j < n) {
    const typename S::vec v = S::load_n(p + j, n - j);
    acc = S::add(acc, S::sub(v, v));
  }
  return S::sum(acc) == 0;
}

/// The kernels of this instruction set, as one type the dispatcher can pass around.
struct Kernels {
  template <class T>
  static void layer_norm_forward(const ForwardRows<T>& a, std::size_t begin, std::size_t end) {
    forward<LayerNormForward<T>>(a, begin, end);
  }
  template <class T>
  static void rms_norm_forward(const ForwardRows<T>& a, std::size_t begin, std::size_t end) {
    forward<RmsNormForward<T>>(a, begin, end);
  }
  template <class T>
  static void layer_norm_backward(const BackwardRows<T>& a, std::size_t begin, std::size_t end) {
    backward<LayerNormBackward<T>>(a, begin, end);
  }
  template <class T>
  static void rms_norm_backward(const BackwardRows<T>& a, std::size_t begin, std::size_t end) {
    backward<RmsNormBackward<T>>(a, begin, end);
  }
  template <class T>
  static std::size_t gradient_offset(const BackwardRows<T>& a) {
    return NORMKIT_KERNEL_NS::gradient_offset(a);
  }
  template <class A>
  static void add_into(A* out, const A* in, std::size_t n) {
    NORMKIT_KERNEL_NS::add_into(out, in, n);
  }
  template <class A>
  static bool all_finite(const A* p, std::size_t n) {
    return NORMKIT_KERNEL_NS::all_finite(p, n);
  }
};

}  // namespace normkit::detail::NORMKIT_KERNEL_NS
