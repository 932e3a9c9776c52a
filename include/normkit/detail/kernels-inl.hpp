// Row kernels of LayerNorm and RMSNorm, written once over the vector operations Simd<A> of one
// instruction set (see arch/scalar.hpp for the list).
//
// detail/dispatch.hpp includes this file once per instruction set, with NORMKIT_KERNEL_NS
// naming that set's namespace and inside its target region, so that every kernel is compiled
// for the set and inlines its vector operations. Hence no include guard, and no #include:
// a standard header first seen inside a target region would be compiled for that target.
//
// Accuracy plan (DESIGN §2), shared by every kernel here:
// - Rows are read in chunks of kChunk vectors. Within a chunk each lane accumulates in A;
//   chunks are combined in double. A row of 65537 floats thus adds at most 1024 terms in
//   float anywhere, instead of 65537.
// - LayerNorm statistics are Welford-style per lane: each block of kBlock vectors is reduced
//   exactly by two passes over registers, then merged into the running lane moments with
//   Chan's formula (block weights from a table, no division in the loop). The values are
//   shifted by the row's first element first, so rows like 2000 + N(0,1) are accumulated as
//   N(0,1)-sized numbers and the mean is recovered as a hi/lo pair.

#ifndef NORMKIT_KERNEL_NS
#error "detail/kernels-inl.hpp is included by detail/dispatch.hpp only"
#endif

namespace normkit::detail::NORMKIT_KERNEL_NS {

// kBlock = 4 vectors per lane update: the block's two passes are 4 independent add/FMA chains,
// and the serial Chan update (a sub and an FMA, ~8 cycles of latency) is paid once per 4 loads.
inline constexpr std::size_t kBlock = 4;
inline constexpr std::size_t kChunkBlocks = 16;
inline constexpr std::size_t kChunkVectors = kBlock * kChunkBlocks;

/// Chan's weights for merging block b + 1 (kBlock values per lane) into the b blocks before it:
/// the mean moves by delta / (b + 1), and M2 gains delta² · kBlock · b / (b + 1).
template <class A>
struct BlockWeights {
  A mean[kChunkBlocks];
  A m2[kChunkBlocks];
  constexpr BlockWeights() : mean(), m2() {
    for (std::size_t b = 0; b < kChunkBlocks; ++b) {
      mean[b] = A(1) / static_cast<A>(b + 1);
      m2[b] = static_cast<A>(kBlock * b) / static_cast<A>(b + 1);
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

/// Moments of d = x·scale − shift over n (> 0, < kBlock·lanes) values: two passes from memory.
template <class T, class A>
Moments tail_moments(const T* x, std::size_t n, A scale, A shift) {
  using S = Simd<A>;
  using V = typename S::vec;
  constexpr std::size_t W = S::lanes;
  const V vscale = S::set(scale), vshift = S::set(-shift);
  V acc = S::zero();
  std::size_t j = 0;
  for (; j + W <= n; j += W) acc = S::add(acc, S::mul_add(S::load(x + j), vscale, vshift));
  if (j < n) acc = S::add(acc, S::keep_n(S::mul_add(S::load_n(x + j, n - j), vscale, vshift), n - j));
  const A mean = S::sum(acc) / static_cast<A>(n);
  const V vmean = S::set(mean);
  V m2 = S::zero();
  for (j = 0; j + W <= n; j += W) {
    const V e = S::sub(S::mul_add(S::load(x + j), vscale, vshift), vmean);
    m2 = S::mul_add(e, e, m2);
  }
  if (j < n) {
    const V e = S::keep_n(S::sub(S::mul_add(S::load_n(x + j, n - j), vscale, vshift), vmean), n - j);
    m2 = S::mul_add(e, e, m2);
  }
  return {static_cast<double>(n), static_cast<double>(mean), static_cast<double>(S::sum(m2))};
}

/// Moments of d = x·scale − shift over a row of n values.
template <class T, class A>
Moments shifted_moments(const T* x, std::size_t n, A scale, A shift) {
  using S = Simd<A>;
  using V = typename S::vec;
  constexpr std::size_t W = S::lanes, step = kBlock * W;
  static constexpr BlockWeights<A> weights{};
  const V vscale = S::set(scale), vshift = S::set(-shift), quarter = S::set(A(1) / A(kBlock));
  Moments total;
  std::size_t j = 0;
  while (n - j >= step) {
    const std::size_t blocks = (n - j) / step < kChunkBlocks ? (n - j) / step : kChunkBlocks;
    V mean = S::zero(), m2 = S::zero();
    for (std::size_t b = 0; b < blocks; ++b, j += step) {
      const V d0 = S::mul_add(S::load(x + j), vscale, vshift);
      const V d1 = S::mul_add(S::load(x + j + W), vscale, vshift);
      const V d2 = S::mul_add(S::load(x + j + 2 * W), vscale, vshift);
      const V d3 = S::mul_add(S::load(x + j + 3 * W), vscale, vshift);
      const V block_mean = S::mul(S::add(S::add(d0, d1), S::add(d2, d3)), quarter);
      const V e0 = S::sub(d0, block_mean), e1 = S::sub(d1, block_mean);
      const V e2 = S::sub(d2, block_mean), e3 = S::sub(d3, block_mean);
      const V block_m2 = S::add(S::mul_add(e0, e0, S::mul(e1, e1)), S::mul_add(e2, e2, S::mul(e3, e3)));
      const V delta = S::sub(block_mean, mean);
      mean = S::mul_add(delta, S::set(weights.mean[b]), mean);
      m2 = S::add(m2, S::mul_add(S::mul(delta, delta), S::set(weights.m2[b]), block_m2));
    }
    total = merge(total, merge_lanes<A>(mean, m2, blocks * kBlock));
  }
  if (j < n) total = merge(total, tail_moments(x + j, n - j, scale, shift));
  return total;
}

/// Sums of N per-element terms over a row of n values. `terms.add(j, acc)` adds the terms of
/// the full vector at j into acc[0..N); `terms.add_n(j, count, acc)` those of the first count
/// lanes. Accumulated in A within chunks and in double across them.
template <class A, std::size_t N, class Terms>
void row_sums(std::size_t n, const Terms& terms, double (&total)[N]) {
  using S = Simd<A>;
  using V = typename S::vec;
  constexpr std::size_t W = S::lanes, chunk = kChunkVectors * W;
  for (std::size_t i = 0; i < N; ++i) total[i] = 0;
  for (std::size_t j = 0; j < n;) {
    const std::size_t end = n - j > chunk ? j + chunk : n;
    V acc[N];
    for (std::size_t i = 0; i < N; ++i) acc[i] = S::zero();
    for (; j + W <= end; j += W) terms.add(j, acc);
    if (j < end) {
      terms.add_n(j, end - j, acc);
      j = end;
    }
    for (std::size_t i = 0; i < N; ++i) total[i] += static_cast<double>(S::sum(acc[i]));
  }
}

/// The largest |x| of a row, or NaN if any value is NaN or ±Inf. Only for the rare rows whose
/// statistics overflow or underflow, so plain scalar code.
template <class T>
double peak_magnitude(const T* x, std::size_t n) {
  double peak = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const double v = std::fabs(static_cast<double>(static_cast<accum_t<T>>(x[j])));
    if (!(v <= std::numeric_limits<double>::max())) return std::numeric_limits<double>::quiet_NaN();
    if (v > peak) peak = v;
  }
  return peak;
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
template <class T, class A>
struct CenteredTerms {
  const T* x;
  typename Simd<A>::vec scale, neg_hi;
  void add(std::size_t j, typename Simd<A>::vec* acc) const {
    using S = Simd<A>;
    acc[0] = S::add(acc[0], S::mul_add(S::load(x + j), scale, neg_hi));
  }
  void add_n(std::size_t j, std::size_t count, typename Simd<A>::vec* acc) const {
    using S = Simd<A>;
    acc[0] = S::add(acc[0], S::keep_n(S::mul_add(S::load_n(x + j, count), scale, neg_hi), count));
  }
};

template <class T, class A = accum_t<T>>
LayerNormRow<A> layer_norm_row(const T* x, std::size_t n, double eps) {
  using S = Simd<A>;
  A scale = 1;
  A shift = static_cast<A>(x[0]);
  Moments m = shifted_moments(x, n, scale, shift);
  double var = m.m2 / m.count;
  // Variance overflowed A (or the row holds NaN/Inf), or is small enough to lose bits: rescale
  // finite, nonzero rows by a power of two and measure again. A NaN/Inf row keeps its NaN.
  if (!(var >= tiny_variance<A> && var <= static_cast<double>(std::numeric_limits<A>::max()))) {
    const double peak = peak_magnitude(x, n);
    if (peak > 0 && peak <= std::numeric_limits<double>::max()) {
      scale = static_cast<A>(row_scale<A>(peak));
      shift = static_cast<A>(x[0]) * scale;
      m = shifted_moments(x, n, scale, shift);
      var = m.m2 / m.count;
    }
  }
  const double center = static_cast<double>(shift) + m.mean;
  const A hi = static_cast<A>(center);
  A lo = static_cast<A>(center - static_cast<double>(hi));
  // The first element was far from the mean (|mean − x₀| > 8σ), so the lanes accumulated
  // numbers of size |mean − x₀| and m.mean carries A's rounding at that size. Measure the
  // remainder after hi directly: x·scale − hi is now of the size of σ.
  if (m.mean * m.mean > 64 * var) {
    double sum[1];
    row_sums<A, 1>(n, CenteredTerms<T, A>{x, S::set(scale), S::set(-hi)}, sum);
    lo = static_cast<A>(sum[0] / static_cast<double>(n));
  }
  const double r = scaled_rstd(var, eps, static_cast<double>(scale));
  const double mean = (static_cast<double>(hi) + static_cast<double>(lo)) / static_cast<double>(scale);
  const double rstd = static_cast<double>(scale) / std::sqrt(eps == 0 ? var : var + eps * static_cast<double>(scale) * static_cast<double>(scale));
  return {scale, hi, lo, static_cast<A>(r), mean, rstd};
}

template <bool Gamma, bool Beta, class T, class A>
void layer_norm_apply(const T* x, T* y, std::size_t n, const A* gamma, const A* beta,
                      const LayerNormRow<A>& row) {
  using S = Simd<A>;
  using V = typename S::vec;
  constexpr std::size_t W = S::lanes;
  const V scale = S::set(row.scale), neg_hi = S::set(-row.hi), lo = S::set(row.lo), r = S::set(row.r);
  std::size_t j = 0;
  for (; j + W <= n; j += W) {
    V v = S::mul(S::sub(S::mul_add(S::load(x + j), scale, neg_hi), lo), r);
    if constexpr (Gamma && Beta) v = S::mul_add(v, S::load(gamma + j), S::load(beta + j));
    else if constexpr (Gamma) v = S::mul(v, S::load(gamma + j));
    S::store(y + j, v);
  }
  if (j < n) {
    const std::size_t count = n - j;
    V v = S::mul(S::sub(S::mul_add(S::load_n(x + j, count), scale, neg_hi), lo), r);
    if constexpr (Gamma && Beta) v = S::mul_add(v, S::load_n(gamma + j, count), S::load_n(beta + j, count));
    else if constexpr (Gamma) v = S::mul(v, S::load_n(gamma + j, count));
    S::store_n(y + j, v, count);
  }
}

template <class T>
void layer_norm_forward(const ForwardRows<T>& a, std::size_t begin, std::size_t end) {
  using A = accum_t<T>;
  for (std::size_t i = begin; i < end; ++i) {
    const T* x = a.x + i * a.x_stride;
    T* y = a.y + i * a.y_stride;
    const LayerNormRow<A> row = layer_norm_row(x, a.features, a.eps);
    if (a.mean != nullptr) a.mean[i] = static_cast<A>(row.mean);
    if (a.rstd != nullptr) a.rstd[i] = static_cast<A>(row.rstd);
    if (a.gamma != nullptr && a.beta != nullptr) layer_norm_apply<true, true>(x, y, a.features, a.gamma, a.beta, row);
    else if (a.gamma != nullptr) layer_norm_apply<true, false>(x, y, a.features, a.gamma, a.beta, row);
    else layer_norm_apply<false, false>(x, y, a.features, a.gamma, a.beta, row);
  }
}

// ---------------------------------------------------------------------------------------
// RMSNorm forward

template <class T, class A>
struct SquareTerms {
  const T* x;
  typename Simd<A>::vec scale;
  void add(std::size_t j, typename Simd<A>::vec* acc) const {
    using S = Simd<A>;
    const typename S::vec v = S::mul(S::load(x + j), scale);
    acc[0] = S::mul_add(v, v, acc[0]);
  }
  void add_n(std::size_t j, std::size_t count, typename Simd<A>::vec* acc) const {
    using S = Simd<A>;
    const typename S::vec v = S::mul(S::load_n(x + j, count), scale);
    acc[0] = S::mul_add(v, v, acc[0]);
  }
};

/// How an RMSNorm row is normalized: y = (x·scale)·r·γ with r = 1/sqrt(mean((x·scale)²) + eps·scale²).
template <class A>
struct RmsNormRow {
  A scale, r;
  double rstd;
};

template <class T, class A = accum_t<T>>
RmsNormRow<A> rms_norm_row(const T* x, std::size_t n, double eps) {
  using S = Simd<A>;
  A scale = 1;
  double sum[1];
  row_sums<A, 1>(n, SquareTerms<T, A>{x, S::set(scale)}, sum);
  double ms = sum[0] / static_cast<double>(n);
  if (!(ms >= tiny_variance<A> && ms <= static_cast<double>(std::numeric_limits<A>::max()))) {
    const double peak = peak_magnitude(x, n);
    if (peak > 0 && peak <= std::numeric_limits<double>::max()) {
      scale = static_cast<A>(row_scale<A>(peak));
      row_sums<A, 1>(n, SquareTerms<T, A>{x, S::set(scale)}, sum);
      ms = sum[0] / static_cast<double>(n);
    }
  }
  const double s = static_cast<double>(scale);
  return {scale, static_cast<A>(scaled_rstd(ms, eps, s)), s / std::sqrt(eps == 0 ? ms : ms + eps * s * s)};
}

template <bool Gamma, class T, class A>
void rms_norm_apply(const T* x, T* y, std::size_t n, const A* gamma, const RmsNormRow<A>& row) {
  using S = Simd<A>;
  using V = typename S::vec;
  constexpr std::size_t W = S::lanes;
  const V scale = S::set(row.scale), r = S::set(row.r);
  std::size_t j = 0;
  for (; j + W <= n; j += W) {
    V v = S::mul(S::mul(S::load(x + j), scale), r);
    if constexpr (Gamma) v = S::mul(v, S::load(gamma + j));
    S::store(y + j, v);
  }
  if (j < n) {
    const std::size_t count = n - j;
    V v = S::mul(S::mul(S::load_n(x + j, count), scale), r);
    if constexpr (Gamma) v = S::mul(v, S::load_n(gamma + j, count));
    S::store_n(y + j, v, count);
  }
}

template <class T>
void rms_norm_forward(const ForwardRows<T>& a, std::size_t begin, std::size_t end) {
  using A = accum_t<T>;
  for (std::size_t i = begin; i < end; ++i) {
    const T* x = a.x + i * a.x_stride;
    T* y = a.y + i * a.y_stride;
    const RmsNormRow<A> row = rms_norm_row(x, a.features, a.eps);
    if (a.rstd != nullptr) a.rstd[i] = static_cast<A>(row.rstd);
    if (a.gamma != nullptr) rms_norm_apply<true>(x, y, a.features, a.gamma, row);
    else rms_norm_apply<false>(x, y, a.features, a.gamma, row);
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

/// The second pass over one row, given its sums: x̂ = (x − mean)·r − correction,
/// dx = r·g − x̂·dx_xhat − dx_const (dx_xhat = r·mean(g·x̂), dx_const = r·mean(g), 0 for
/// RMSNorm), grad_gamma += dy·x̂ and grad_beta += dy. Gamma: γ is present and so is its
/// gradient; Beta: β's gradient is wanted; Dx: dx is wanted.
template <bool Gamma, bool Beta, bool Dx, class T, class A>
struct BackwardPass {
  using S = Simd<A>;
  using V = typename S::vec;
  const T* dy;
  const T* x;
  T* dx;
  const A* gamma;
  A* grad_gamma;
  A* grad_beta;
  V mean, r, neg_correction, neg_dx_xhat, neg_dx_const;

  template <bool Full, class U>
  static V get(const U* p, std::size_t count) {
    if constexpr (Full) return S::load(p);
    else return S::load_n(p, count);
  }
  template <bool Full, class U>
  static void put(U* p, V v, std::size_t count) {
    if constexpr (Full) S::store(p, v);
    else S::store_n(p, v, count);
  }

  template <bool Full>
  void step(std::size_t j, std::size_t count) const {
    const V dyv = get<Full>(dy + j, count);
    const V xhat = S::mul_add(S::sub(get<Full>(x + j, count), mean), r, neg_correction);
    if constexpr (Dx) {
      V g = dyv;
      if constexpr (Gamma) g = S::mul(g, get<Full>(gamma + j, count));
      put<Full>(dx + j, S::mul_add(g, r, S::mul_add(xhat, neg_dx_xhat, neg_dx_const)), count);
    }
    if constexpr (Gamma) put<Full>(grad_gamma + j, S::mul_add(dyv, xhat, get<Full>(grad_gamma + j, count)), count);
    if constexpr (Beta) put<Full>(grad_beta + j, S::add(dyv, get<Full>(grad_beta + j, count)), count);
  }

  void run(std::size_t n) const {
    constexpr std::size_t W = S::lanes;
    std::size_t j = 0;
    for (; j + W <= n; j += W) step<true>(j, W);
    if (j < n) step<false>(j, n - j);
  }
};

template <bool Gamma, bool Beta, bool Dx, class T, class A>
void backward_pass(const BackwardRows<T>& a, std::size_t i, A mean, A r, A correction, A dx_xhat,
                   A dx_const) {
  using S = Simd<A>;
  const BackwardPass<Gamma, Beta, Dx, T, A> pass{
      a.dy + i * a.dy_stride, a.x + i * a.x_stride, Dx ? a.dx + i * a.dx_stride : nullptr,
      a.gamma, a.grad_gamma, a.grad_beta, S::set(mean), S::set(r), S::set(-correction),
      S::set(-dx_xhat), S::set(-dx_const)};
  pass.run(a.features);
}

/// The second pass with the flags that fit `a`: γ present (with its gradient), β's gradient
/// wanted, dx wanted.
template <class T, class A>
void backward_row(const BackwardRows<T>& a, std::size_t i, A mean, A r, A correction, A dx_xhat,
                  A dx_const) {
  const bool dx = a.dx != nullptr;
  if (a.gamma == nullptr) {
    if (dx) backward_pass<false, false, true>(a, i, mean, r, correction, dx_xhat, dx_const);
  } else if (a.grad_beta != nullptr) {
    if (dx) backward_pass<true, true, true>(a, i, mean, r, correction, dx_xhat, dx_const);
    else backward_pass<true, true, false>(a, i, mean, r, correction, dx_xhat, dx_const);
  } else {
    if (dx) backward_pass<true, false, true>(a, i, mean, r, correction, dx_xhat, dx_const);
    else backward_pass<true, false, false>(a, i, mean, r, correction, dx_xhat, dx_const);
  }
}

template <class T>
void layer_norm_backward(const BackwardRows<T>& a, std::size_t begin, std::size_t end) {
  using A = accum_t<T>;
  using S = Simd<A>;
  const double n = static_cast<double>(a.features);
  for (std::size_t i = begin; i < end; ++i) {
    const T* dy = a.dy + i * a.dy_stride;
    const T* x = a.x + i * a.x_stride;
    const A mean = a.mean[i], r = a.rstd[i];
    double sums[3];  // Σg, Σg·x̃, Σx̃
    if (a.gamma != nullptr) {
      row_sums<A, 3>(a.features, LayerNormBackwardTerms<true, T, A>{dy, x, a.gamma, S::set(mean), S::set(r)}, sums);
    } else {
      row_sums<A, 3>(a.features, LayerNormBackwardTerms<false, T, A>{dy, x, a.gamma, S::set(mean), S::set(r)}, sums);
    }
    const double correction = sums[2] / n;
    const double mean_g = sums[0] / n;
    const double mean_gx = sums[1] / n - correction * mean_g;
    const double rd = static_cast<double>(r);
    backward_row(a, i, mean, r, static_cast<A>(correction), static_cast<A>(rd * mean_gx),
                 static_cast<A>(rd * mean_g));
  }
}

template <class T>
void rms_norm_backward(const BackwardRows<T>& a, std::size_t begin, std::size_t end) {
  using A = accum_t<T>;
  using S = Simd<A>;
  const double n = static_cast<double>(a.features);
  for (std::size_t i = begin; i < end; ++i) {
    const T* dy = a.dy + i * a.dy_stride;
    const T* x = a.x + i * a.x_stride;
    const A r = a.rstd[i];
    double sums[1];  // Σg·x̂
    if (a.gamma != nullptr) {
      row_sums<A, 1>(a.features, RmsNormBackwardTerms<true, T, A>{dy, x, a.gamma, S::set(r)}, sums);
    } else {
      row_sums<A, 1>(a.features, RmsNormBackwardTerms<false, T, A>{dy, x, a.gamma, S::set(r)}, sums);
    }
    backward_row(a, i, A(0), r, A(0), static_cast<A>(static_cast<double>(r) * sums[0] / n), A(0));
  }
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

/// The kernels of this instruction set, as one type the dispatcher can pass around.
struct Kernels {
  template <class T>
  static void layer_norm_forward(const ForwardRows<T>& a, std::size_t begin, std::size_t end) {
    NORMKIT_KERNEL_NS::layer_norm_forward(a, begin, end);
  }
  template <class T>
  static void rms_norm_forward(const ForwardRows<T>& a, std::size_t begin, std::size_t end) {
    NORMKIT_KERNEL_NS::rms_norm_forward(a, begin, end);
  }
  template <class T>
  static void layer_norm_backward(const BackwardRows<T>& a, std::size_t begin, std::size_t end) {
    NORMKIT_KERNEL_NS::layer_norm_backward(a, begin, end);
  }
  template <class T>
  static void rms_norm_backward(const BackwardRows<T>& a, std::size_t begin, std::size_t end) {
    NORMKIT_KERNEL_NS::rms_norm_backward(a, begin, end);
  }
  template <class A>
  static void add_into(A* out, const A* in, std::size_t n) {
    NORMKIT_KERNEL_NS::add_into(out, in, n);
  }
};

}  // namespace normkit::detail::NORMKIT_KERNEL_NS
