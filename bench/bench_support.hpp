// Shared pieces of normkit's benchmarks: shapes, element types, page-aligned buffers, the input
// data of one shape (cached, so that every benchmark of a shape uses the same memory), the
// correctness check against normkit::reference that every implementation passes before it is
// timed, and the copy bandwidth that throughput is compared with (the `roofline` counter).
#pragma once

#include <benchmark/benchmark.h>
#include <normkit/normkit.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "precompiled_kernels.hpp"  // the kernels come compiled (precompiled/CMakeLists.txt)
#include "summary.hpp"

namespace normkit_bench {

/// rows × features, row-major, the layout every implementation here uses.
struct Shape {
  std::size_t rows, features;
  std::size_t size() const { return rows * features; }
  std::string name() const { return std::to_string(rows) + "x" + std::to_string(features); }
};

template <class T>
inline constexpr bool is_16bit_v = std::is_same_v<T, normkit::bfloat16> || std::is_same_v<T, normkit::float16>;

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, double>) return "f64";
  if constexpr (std::is_same_v<T, normkit::bfloat16>) return "bf16";
  if constexpr (std::is_same_v<T, normkit::float16>) return "f16";
  return "f32";
}

/// Exact: every element type is a subset of double. (The 16-bit types convert explicitly, and
/// only to float.)
template <class T>
double to_double(T v) {
  if constexpr (is_16bit_v<T>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

/// Rounds to T; the 16-bit types through float (which may differ from rounding directly in the
/// last bit: benchmark data only needs to be some value of T, read back exactly by to_double).
template <class T>
T from_double(double v) {
  if constexpr (is_16bit_v<T>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

/// Prints a message and ends the program with a failure status: a benchmark whose
/// implementation computes the wrong thing must not produce numbers.
[[noreturn]] inline void fail(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "normkit_bench: %s\n", message.c_str());
  std::exit(EXIT_FAILURE);
}

/// An uninitialized array aligned to a 4 KiB page, so that every implementation sees the same
/// alignment (64-byte lines, whole pages) whatever malloc would have given.
template <class T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t n) : size_(n) {
    const std::size_t bytes = (n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    data_.reset(static_cast<T*>(std::aligned_alloc(kAlign, bytes == 0 ? kAlign : bytes)));
    if (!data_) throw std::bad_alloc();
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  std::span<T> span() { return {data_.get(), size_}; }
  std::span<const T> span() const { return {data_.get(), size_}; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }

 private:
  static constexpr std::size_t kAlign = 4096;
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T[], Free> data_;
  std::size_t size_ = 0;
};

/// Deterministic uniform numbers in [-1, 1) (splitmix64).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  double uniform() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1p-52 - 1.0;
  }

 private:
  std::uint64_t state_;
};

inline constexpr double kLayerNormEps = 1e-5;  // PyTorch's defaults, also normkit's
inline constexpr double kRmsNormEps = 1e-6;

/// normkit::reference's results for the rows of a problem that get checked: all rows when the
/// problem is small enough for the double-precision reference to be quick (then the γ/β
/// gradient sums are checked as well), otherwise the first and the last kSampleRows rows
/// (rows are independent in both forward and dx, so a sample checks them fully).
struct ReferenceResults {
  std::vector<std::size_t> rows;  // which rows of the problem; the reference holds them in order
  bool all_rows = false;
  normkit::reference::Forward layer_forward, rms_forward;
  normkit::reference::Backward layer_backward, rms_backward;
  // Per feature, Σ|dy·x̂| and Σ|dy| over the checked rows: the scale the rounding error of the
  // γ/β gradient sums grows with (see check_sums()).
  std::vector<double> layer_gamma_terms, layer_beta_terms, rms_gamma_terms;
};

inline constexpr std::size_t kFullCheckElements = std::size_t{1} << 22;
inline constexpr std::size_t kSampleRows = 64;

/// Everything one shape's benchmarks work on. Inputs are filled once; outputs are written by
/// whichever implementation runs. Rows have different offsets and spreads (as activations do),
/// and γ, β are not 1 and 0, so that the affine part is computed for real.
template <class T>
struct Problem {
  using A = normkit::accum_t<T>;

  Shape shape;
  Buffer<T> x, dy, y, dx;
  std::vector<A> gamma, beta;
  std::vector<A> mean, rstd;            // LayerNorm statistics of x, input of LayerNorm backward
  std::vector<A> rms_rstd;              // RMSNorm statistics of x, input of RMSNorm backward
  std::vector<A> out_mean, out_rstd;    // written by training forward benchmarks
  std::unique_ptr<ReferenceResults> reference;  // computed on first use

  explicit Problem(Shape s)
      : shape(s), x(s.size()), dy(s.size()), y(s.size()), dx(s.size()), gamma(s.features), beta(s.features),
        mean(s.rows), rstd(s.rows), rms_rstd(s.rows), out_mean(s.rows), out_rstd(s.rows) {
    Rng rng(0x5eed + s.rows * 31 + s.features);
    for (std::size_t r = 0; r < s.rows; ++r) {
      const double offset = rng.uniform(), spread = 1.0 + 0.5 * rng.uniform();
      for (std::size_t j = 0; j < s.features; ++j) {
        x[r * s.features + j] = from_double<T>(offset + spread * rng.uniform());
      }
    }
    for (std::size_t i = 0; i < s.size(); ++i) dy[i] = from_double<T>(rng.uniform());
    for (std::size_t j = 0; j < s.features; ++j) {
      gamma[j] = static_cast<A>(1.0 + 0.25 * rng.uniform());
      beta[j] = static_cast<A>(0.25 * rng.uniform());
    }
    // Touch every page of the outputs now, so that no benchmark pays for first-touch faults.
    std::fill_n(y.data(), s.size(), from_double<T>(0));
    std::fill_n(dx.data(), s.size(), from_double<T>(0));
    // The saved statistics backward needs, from normkit's own training forward.
    normkit::LayerNorm<T> layer(s.features, {.eps = kLayerNormEps});
    layer.forward(x.span(), y.span(), mean, rstd);
    normkit::RMSNorm<T> rms(s.features, {.eps = kRmsNormEps});
    rms.forward(x.span(), y.span(), rms_rstd);
  }

  const ReferenceResults& ref() {
    if (!reference) reference = compute_reference();
    return *reference;
  }

 private:
  std::unique_ptr<ReferenceResults> compute_reference() const {
    auto out = std::make_unique<ReferenceResults>();
    const std::size_t rows = shape.rows, f = shape.features;
    out->all_rows = shape.size() <= kFullCheckElements || rows <= 2 * kSampleRows;
    for (std::size_t r = 0; r < rows; ++r) {
      if (out->all_rows || r < kSampleRows || r >= rows - kSampleRows) out->rows.push_back(r);
    }
    std::vector<double> xs, dys;
    xs.reserve(out->rows.size() * f);
    dys.reserve(out->rows.size() * f);
    for (std::size_t r : out->rows) {
      for (std::size_t j = 0; j < f; ++j) {
        xs.push_back(to_double(x[r * f + j]));
        dys.push_back(to_double(dy[r * f + j]));
      }
    }
    const std::vector<double> g(gamma.begin(), gamma.end()), b(beta.begin(), beta.end());
    namespace ref = normkit::reference;
    out->layer_forward = ref::layer_norm_forward(xs, f, g, b, kLayerNormEps);
    out->rms_forward = ref::rms_norm_forward(xs, f, g, kRmsNormEps);
    out->layer_backward = ref::layer_norm_backward(dys, xs, f, g, kLayerNormEps);
    out->rms_backward = ref::rms_norm_backward(dys, xs, f, g, kRmsNormEps);
    out->layer_gamma_terms.assign(f, 0.0);
    out->layer_beta_terms.assign(f, 0.0);
    out->rms_gamma_terms.assign(f, 0.0);
    for (std::size_t i = 0; i < out->rows.size(); ++i) {
      for (std::size_t j = 0; j < f; ++j) {
        const double d = dys[i * f + j], v = xs[i * f + j];
        const double layer_xhat = (v - out->layer_forward.mean[i]) * out->layer_forward.rstd[i];
        out->layer_gamma_terms[j] += std::fabs(d * layer_xhat);
        out->layer_beta_terms[j] += std::fabs(d);
        out->rms_gamma_terms[j] += std::fabs(d * v * out->rms_forward.rstd[i]);
      }
    }
    return out;
  }
};

/// The problem of this shape. One problem per element type is kept: benchmarks are registered
/// grouped by shape, so consecutive benchmarks share it and the large shapes (512 MiB of
/// buffers for 8192×4096 floats) are not all held at once.
template <class T>
Problem<T>& problem(Shape shape) {
  static std::unique_ptr<Problem<T>> cached;
  if (!cached || cached->shape.rows != shape.rows || cached->shape.features != shape.features) {
    cached.reset();  // free the old buffers before allocating the new ones
    cached = std::make_unique<Problem<T>>(shape);
  }
  return *cached;
}

// ---- Checks against normkit::reference -------------------------------------------------------

/// Largest |got − want| / max(1, |want|): an absolute error for values of order one (outputs,
/// dx) and a relative one for large values (γ/β gradient sums over many rows). NaN counts as
/// infinite.
inline double scaled_error(double got, double want) {
  const double e = std::fabs(got - want) / std::max(1.0, std::fabs(want));
  return std::isnan(e) ? HUGE_VAL : e;
}

inline constexpr double kTolerance = 1e-4;

/// The tolerance for outputs stored as T: kTolerance plus the rounding to T itself, half a unit
/// in the last place relative to max(1, |value|) (2^-8 for bfloat16's 7 mantissa bits, 2^-11
/// for float16's 10), which no implementation can avoid.
template <class T>
constexpr double output_tolerance() {
  if constexpr (std::is_same_v<T, normkit::bfloat16>) return kTolerance + 0x1p-8;
  if constexpr (std::is_same_v<T, normkit::float16>) return kTolerance + 0x1p-11;
  return kTolerance;
}

/// Compares the checked rows of a rows × features result (got, full size) with the reference
/// rows (want, holding only the checked rows, in order).
template <class V>
void check_rows(const std::string& what, const V* got, const std::vector<double>& want, const ReferenceResults& ref,
                std::size_t features) {
  double worst = 0;
  for (std::size_t i = 0; i < ref.rows.size(); ++i) {
    for (std::size_t j = 0; j < features; ++j) {
      worst = std::max(worst, scaled_error(to_double(got[ref.rows[i] * features + j]), want[i * features + j]));
    }
  }
  if (!(worst <= output_tolerance<V>())) {
    fail(what + ": differs from normkit::reference by " + std::to_string(worst) + " (tolerance " +
         std::to_string(output_tolerance<V>()) + ")");
  }
}

/// Compares per-row values (mean, rstd) or per-feature values (γ/β gradients).
template <class V>
void check_values(const std::string& what, std::span<const V> got, std::span<const double> want,
                  std::span<const std::size_t> index = {}) {
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, scaled_error(static_cast<double>(got[index.empty() ? i : index[i]]), want[i]));
  }
  if (!(worst <= kTolerance)) {
    fail(what + ": differs from normkit::reference by " + std::to_string(worst) + " (tolerance " +
         std::to_string(kTolerance) + ")");
  }
}

/// Compares γ/β gradient sums over all rows. A float sum over n rows carries a rounding error
/// that grows with n and with Σ|terms| (not with |sum|, which cancellation can make small): a
/// correct float loop summing 4096 rows one by one is off by more than 1e-4 of |sum|. So the
/// error is measured relative to max(1, Σ|terms|) here; a wrong formula is still far off.
template <class V>
void check_sums(const std::string& what, std::span<const V> got, std::span<const double> want,
                std::span<const double> terms) {
  double worst = 0;
  for (std::size_t j = 0; j < want.size(); ++j) {
    const double e = std::fabs(static_cast<double>(got[j]) - want[j]) / std::max(1.0, terms[j]);
    worst = std::isnan(e) ? HUGE_VAL : std::max(worst, e);
  }
  if (!(worst <= kTolerance)) {
    fail(what + ": differs from normkit::reference by " + std::to_string(worst) +
         " of the sum of |terms| (tolerance " + std::to_string(kTolerance) + ")");
  }
}

// ---- Copy bandwidth: the denominator of the roofline counter ---------------------------------

/// dx[i] = x[i] + dy[i]: two streams in, one out, the memory traffic of a backward pass with no
/// arithmetic to speak of. memcpy is tuned per CPU by the C library; this loop gets the same
/// chance through target_clones (AVX-512, AVX2 or baseline chosen at load time) and a fixed-size
/// inner block that GCC's -O2 vectorizer accepts without a remainder loop. (target_clones does
/// not take templates, hence one overload per element type.)
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && defined(__linux__)
#define NORMKIT_BENCH_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NORMKIT_BENCH_CLONES
#endif
NORMKIT_BENCH_CLONES
inline void add_arrays(float* __restrict out, const float* __restrict a, const float* __restrict b, std::size_t n) {
  constexpr std::size_t kBlock = 64;
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (std::size_t k = 0; k < kBlock; ++k) out[i + k] = a[i + k] + b[i + k];
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}
NORMKIT_BENCH_CLONES
inline void add_arrays(double* __restrict out, const double* __restrict a, const double* __restrict b,
                       std::size_t n) {
  constexpr std::size_t kBlock = 32;
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (std::size_t k = 0; k < kBlock; ++k) out[i + k] = a[i + k] + b[i + k];
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}
// The 16-bit types have no arithmetic of their own: their raw bits are added as integers, which
// moves the same bytes as an addition would.
NORMKIT_BENCH_CLONES
inline void add_arrays(normkit::bfloat16* __restrict out, const normkit::bfloat16* __restrict a,
                       const normkit::bfloat16* __restrict b, std::size_t n) {
  constexpr std::size_t kBlock = 128;
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (std::size_t k = 0; k < kBlock; ++k) out[i + k].bits = static_cast<std::uint16_t>(a[i + k].bits + b[i + k].bits);
  }
  for (; i < n; ++i) out[i].bits = static_cast<std::uint16_t>(a[i].bits + b[i].bits);
}
NORMKIT_BENCH_CLONES
inline void add_arrays(normkit::float16* __restrict out, const normkit::float16* __restrict a,
                       const normkit::float16* __restrict b, std::size_t n) {
  constexpr std::size_t kBlock = 128;
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (std::size_t k = 0; k < kBlock; ++k) out[i + k].bits = static_cast<std::uint16_t>(a[i + k].bits + b[i + k].bits);
  }
  for (; i < n; ++i) out[i].bits = static_cast<std::uint16_t>(a[i].bits + b[i].bits);
}
#undef NORMKIT_BENCH_CLONES

/// The two copies the roofline compares with: `forward` moves the bytes of a forward pass
/// (memcpy of x into y: one array read, one written); `backward` those of a backward pass
/// (dx = x + dy: two read, one written).
enum class Footprint { forward, backward };

inline int arrays_moved(Footprint f) { return f == Footprint::forward ? 2 : 3; }

template <class T>
void copy_once(Problem<T>& p, Footprint f) {
  if (f == Footprint::forward) {
    std::memcpy(p.y.data(), p.x.data(), p.shape.size() * sizeof(T));
  } else {
    add_arrays(p.dx.data(), p.x.data(), p.dy.data(), p.shape.size());
  }
  benchmark::ClobberMemory();
}

/// Bytes per second of the copy for this problem's arrays, measured once per (array size,
/// footprint) and cached for the rest of the run. It runs on the problem's own buffers, right
/// before the first benchmark of the shape that needs it, so the two numbers of a `roofline`
/// ratio come from the same memory in the same run.
/// The measurement: one untimed pass (warms caches and TLB as a benchmark's first iterations
/// do), then 5 windows of at least 20 ms each; the rate is that of the fastest window. On a
/// shared or noisy machine, interference only ever slows a window down, so the best window is
/// the closest to what the hardware can do, and a `roofline` is not inflated by a copy that
/// happened to be measured during a slow moment. Within a window the clock is read only between
/// batches of passes (doubling in size), so tiny arrays are not timed mostly by the clock.
template <class T>
double copy_rate(Problem<T>& p, Footprint f) {
  static std::map<std::pair<std::size_t, int>, double> rates;
  const std::size_t bytes = p.shape.size() * sizeof(T) * static_cast<std::size_t>(arrays_moved(f));
  const auto key = std::make_pair(p.shape.size() * sizeof(T), arrays_moved(f));
  if (const auto it = rates.find(key); it != rates.end()) return it->second;

  using clock = std::chrono::steady_clock;
  copy_once(p, f);
  double best = 0;
  for (int window = 0; window < 5; ++window) {
    std::size_t passes = 0, batch = 1;
    double seconds = 0;
    const auto start = clock::now();
    do {
      for (std::size_t i = 0; i < batch; ++i) copy_once(p, f);
      passes += batch;
      batch *= 2;
      seconds = std::chrono::duration<double>(clock::now() - start).count();
    } while (seconds < 0.02);
    best = std::max(best, static_cast<double>(bytes) * static_cast<double>(passes) / seconds);
  }
  rates.emplace(key, best);
  return best;
}

/// The benchmark loop: runs body() for as many iterations as Google Benchmark asks, and returns
/// the loop's wall-clock seconds for the `roofline` counter. (Google Benchmark shows rate
/// counters with a "/s" unit, which a ratio must not have, so the ratio is computed from this
/// clock, which brackets the same iterations Google Benchmark times.) ClobberMemory after each
/// call keeps the compiler from merging or dropping the repeated stores.
template <class Body>
double timed_loop(benchmark::State& state, Body&& body) {
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    body();
    benchmark::ClobberMemory();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Reports the bytes moved (bytes_per_second) and `roofline`: this benchmark's bytes per second
/// divided by the copy's at the same shape (copy_rate()). Both also go to results(), under the
/// benchmark's name, for the summary printed at the end of the run.
inline void report_bytes(benchmark::State& state, const std::string& name, std::size_t bytes_per_iteration,
                         double copy_bytes_per_second, double loop_seconds) {
  const double total = static_cast<double>(bytes_per_iteration) * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(total));
  const Measurement m{total / loop_seconds, total / loop_seconds / copy_bytes_per_second};
  state.counters["roofline"] = m.roofline;
  results().record(name, m);
}

/// Runs the benchmark on one instruction set and restores the previous one afterwards.
class IsaScope {
 public:
  explicit IsaScope(normkit::isa which) : previous_(normkit::active_isa()) { normkit::set_isa(which); }
  ~IsaScope() { normkit::set_isa(previous_); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  normkit::isa previous_;
};

}  // namespace normkit_bench
