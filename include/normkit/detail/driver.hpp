// Running the row kernels over a whole tensor on the active instruction set: forward in one
// sweep; backward in fixed blocks of rows whose γ/β gradient partials are summed pairwise.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "aligned.hpp"
#include "block_sum.hpp"
#include "dispatch.hpp"
#include "overflowed_rows.hpp"
#include "rows.hpp"

namespace normkit::detail {

enum class norm_kind { layer, rms };

/// Rows per γ/β partial: each partial adds this many rows in A, and partials are added
/// pairwise, so 65536 rows cost 64 + log2(1024) roundings per gradient value, not 65536.
inline constexpr std::size_t kGradBlockRows = 64;

/// The byte count in the environment variable `name`, or `fallback` where it is unset or empty.
inline std::size_t bytes_from_environment(const char* name, std::size_t fallback) noexcept {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? static_cast<std::size_t>(std::strtoull(text, nullptr, 10)) : fallback;
}

/// A pass whose arrays together take at least this many bytes writes its output with
/// non-temporal stores. Its input and output then no longer fit a last-level cache of that
/// size together, so a next kernel reading the output from its start would find the start
/// evicted, and each line it misses evicts one it was about to read: the output would come
/// from memory anyway. Storing it normally would only read each line for ownership first and
/// push the input out of the cache. NORMKIT_STREAM_MIN_BYTES overrides the default, 32 MiB,
/// the last-level cache of the Zen 4 core measured below.
///
/// Measured in normkit_bench (floats, one thread, AVX-512), against the rule it replaced, an
/// output of 32 MiB or more: LayerNorm forward 1024×4096 16.7 → 33.2 GiB/s and 256×16384
/// 17.6 → 34.4, RMSNorm 21.1 → 42.9 and 17.8 → 35.0; LayerNorm backward 4096×768 23.8 → 30.6,
/// 1024×4096 15.6 → 20.5. LayerNorm forward loses up to 9% where the input and the output
/// fill the cache only just, with rows of 768 floats (6144×768 33.5 → 30.6).
inline std::size_t stream_min_bytes() noexcept {
  static const std::size_t bytes = bytes_from_environment("NORMKIT_STREAM_MIN_BYTES", std::size_t{32} << 20);
  return bytes;
}

/// Whether a pass over `arrays` distinct arrays of `array_bytes` each streams its output (see
/// stream_min_bytes). An array updated in place counts once.
inline bool should_stream(std::size_t array_bytes, std::size_t arrays) noexcept {
  return array_bytes * arrays >= stream_min_bytes();
}

/// Whether a pass over `arrays` distinct arrays of `array_bytes` each leaves at least half of
/// the last-level cache free, as the cache size that stream_min_bytes assumes: at most half of
/// it, or at most NORMKIT_GROUP_MAX_BYTES where that is set. Forward rows then go by larger
/// groups (see cached_group_bytes), which gained up to 16 MiB of x and y on a Zen 5 with a
/// 32 MiB cache and lost from 20 MiB on, and read nothing ahead (see write_row); short
/// LayerNorm rows go backward by groups (see layer_norm_backward_group).
inline bool fits_cache(std::size_t array_bytes, std::size_t arrays) noexcept {
  static const std::size_t max_bytes = bytes_from_environment("NORMKIT_GROUP_MAX_BYTES", stream_min_bytes() / 2);
  return array_bytes * arrays <= max_bytes;
}

/// Rows of a pass whose arrays take at most half the last-level cache (ForwardRows::in_cache)
/// go by groups of up to kCachedGroupBytes of input (less with a smaller L1, see
/// cached_group_bytes): there what a row waits for is its own statistics' chain, not memory.
/// Ablations of a 768-float LayerNorm row in L1 (Zen 5, AVX-512, one thread, standalone
/// harness): 104 ns a row, of which the output pass alone takes ~30 and the statistics' vector
/// work ~20; the rest is the chain. Groups of 12 KiB against single rows, floats, time per row,
/// the same harness, best of nine rounds: LayerNorm 32×384 −27%, 32×768 −17%, 32×1024 −10%,
/// 32×1536 −5%, 32×2048 ±0, 1024×768 (6 MiB of x and y) −15%, 2048×768 (12 MiB) −13%, 2730×768
/// (16 MiB) −7 to −12%; RMSNorm 32×384 −25%, 32×768 −11%, 32×1024 −10%, 2048×768 −6%, 2730×768
/// −6 to +2%. 6, 16 and 24 KiB were no better. Past half the cache the groups lose: 3413×768
/// (20 MiB) LayerNorm +6 to +33%, and at 4096×768 (24 MiB) LayerNorm +12%, RMSNorm +40%, as
/// the 2 KiB groups had found (see kGroupBytes in kernels-inl.hpp), which is why the threshold
/// is a fraction of the cache (see fits_cache). Then a group, the group it read ahead and its
/// output lines took ~36 KiB of that Zen 5's 48 KiB L1; passes that fit the cache have since
/// stopped reading ahead.
inline constexpr std::size_t kCachedGroupBytes = 12 * 1024;

/// Input bytes per group of rows where a forward pass fits the cache: kCachedGroupBytes, or a
/// quarter of the L1 data cache where that is less, as on a Zen 4 (32 KiB: 8 KiB groups). There
/// a 12 KiB group of 768-float rows, its output lines, γ and β take ~30 KiB of the 32. Predicted
/// 3–8% at rows of 384 to 1024 floats. Measured with 8 KiB against 12 KiB (Zen 4, AVX-512,
/// floats, one thread, standalone harness, medians of 15 paired trials, up to three runs),
/// time: LayerNorm forward 2048×768 0.89–0.92, 2730×768 0.74–0.81, 1536×1024 0.94–0.95,
/// 4096×384 0.96–0.98, 1024×768 0.99, 32×768 and 1024×1024 1.01; training forward 2048×768
/// 0.93. Groups of 6 KiB gained less (2730×768 0.86, 2048×768 0.97). RMSNorm rows of floats
/// and doubles that fit the cache go fused, not by groups (see forward_fused); its 16-bit rows
/// go by groups, unmeasured with 8 KiB. The L1 size is read on AMD CPUs only (see amd_l1d_kib):
/// other AMD families follow the rule unmeasured (Zen 1 to 3 have 32 KiB too), and other CPUs
/// keep kCachedGroupBytes, also unmeasured where their L1 is smaller (32 KiB on Skylake-X).
inline std::size_t cached_group_bytes() noexcept {
  static const std::size_t bytes = [] {
    const std::size_t quarter = std::size_t{amd_l1d_kib()} * 1024 / 4;
    return quarter != 0 && quarter < kCachedGroupBytes ? quarter : kCachedGroupBytes;
  }();
  return bytes;
}

/// Whether an input of `bytes` fits the last-level cache that stream_min_bytes assumes, so that a
/// pass run right after the kernel that wrote it, or run again, finds it there: long forward rows
/// then read nothing ahead (see kCachedLongRowBytes).
inline bool input_fits_cache(std::size_t bytes) noexcept { return bytes <= stream_min_bytes(); }

/// Whether backward passes over vectors of more than 32 bytes of T (AVX-512 with floats or
/// doubles) read the rows ahead, as narrower vectors always do (see kBackwardReadsAhead): on
/// every CPU but AMD's Zen 5 (family 1Ah), where those prefetches cost more than they brought
/// (without them, 0.80–0.96 of the time for long LayerNorm rows). On a Zen 4 they saved a
/// quarter of it: LayerNorm backward with them, time (floats, one thread, medians of 9 paired
/// trials in both orders of the builds, two runs): 1024×4096 0.76–0.80, 256×16384 0.79–0.82,
/// 8192×4096 0.72–0.74, 4096×768 and 32768×768 1.00–1.01; RMSNorm 1024×4096 0.87, 8192×4096
/// 0.75. Other CPUs keep them unmeasured. The environment variable
/// NORMKIT_BACKWARD_READ_AHEAD=1 or 0 overrides the choice (other values are reported on stderr
/// and ignored, as NORMKIT_ISA's).
inline bool wide_backward_reads_ahead() noexcept {
  static const bool reads = [] {
    const char* requested = std::getenv("NORMKIT_BACKWARD_READ_AHEAD");
    if (requested != nullptr && std::string_view(requested) == "0") return false;
    if (requested != nullptr && std::string_view(requested) == "1") return true;
    if (requested != nullptr && *requested != '\0') {
      std::fprintf(stderr, "normkit: NORMKIT_BACKWARD_READ_AHEAD=%s is neither 0 nor 1; ignored\n", requested);
    }
    return amd_family() != 0x1au;
  }();
  return reads;
}

/// How LayerNorm's forward passes read the next row ahead: with the non-temporal hint on AMD's
/// Zen 5 (family 1Ah), for floats and doubles; into L2 everywhere else. Found by trying each
/// hint, with no prediction made, after LayerNorm rows of 4096 floats without β had run in
/// 0.75–0.80 of the time of rows with β, whose x, γ and β fill its 48 KiB L1 (rows of 2048:
/// ±3%). Against into L2 (Zen 5, one thread, AVX-512 and floats unless noted, standalone
/// harness, page-aligned arrays, medians of 15–31 paired trials, several runs), time:
/// LayerNorm forward 1024×4096 0.77–0.93, 8192×4096 0.91–0.95, 2048×4096 0.86, 4096×8192
/// 0.91–0.97, 8192×3072 0.89, 65536×512 0.85–0.97, 4096×768 0.96–0.97, 32768×768 0.96–0.98;
/// training forward 1024×4096 0.87–0.96, 8192×4096 0.78–0.92; AVX2 1024×4096 0.96, 8192×4096
/// 0.84, rows of 768 ±1%; doubles 2048×4096 0.92, 4096×2048 0.96. Either pass alone, the
/// statistics' or the outputs', took 0.96–0.99 at rows of 4096. bfloat16 and float16 lost
/// with it (8192×4096 1.06–1.08, other shapes ±3%), so they keep L2, as RMSNorm does (forward
/// 0.94–1.00, not steadily). Reading nothing ahead took 0.88 at 1024×4096 and 0.95 at
/// 8192×4096, but 1.11–1.52 at 4096×768, 32768×768 and 65536×512; prefetching into L1
/// (prefetcht0) took 0.95–0.97 at rows of 4096. Why the non-temporal hint does better is not
/// known. Each row is read twice, by its statistics and then by its outputs, so on a CPU that
/// keeps non-temporal lines in L1 only and drops them before the second read, which the x86
/// manuals allow, the outputs could read x from memory again. A Zen 4 (family 19h, 32 KiB of
/// L1) lost with the hint (same harness, medians of 15 paired trials), time against into L2:
/// LayerNorm forward 1024×4096 1.10, 2048×4096 1.16, 8192×4096 1.20, 4096×768 1.03, 32768×768
/// 1.07, 256×16384 1.03; training forward 1024×4096 1.09, 8192×4096 1.14. So it keeps into L2,
/// and so do other CPUs, unmeasured with the hint.
template <class T>
AheadHint layer_norm_ahead_hint() noexcept {
  static const bool zen5 = amd_family() == 0x1au;
  return std::is_same_v<T, accum_t<T>> && zen5 ? AheadHint::non_temporal : AheadHint::into_l2;
}

/// How many distinct arrays a backward pass touches: dx may be dy or x, updated in place, and
/// nothing keeps dy and x apart.
inline std::size_t backward_arrays(const void* dy, const void* x, const void* dx) noexcept {
  return std::size_t{1} + static_cast<std::size_t>(x != dy) + static_cast<std::size_t>(dx != dy && dx != x);
}

template <norm_kind Kind, class T>
void forward_rows(const ForwardRows<T>& args, std::size_t rows) {
  with_active_kernels<T>([&](auto kernels) {
    using K = decltype(kernels);
    if constexpr (Kind == norm_kind::layer) K::layer_norm_forward(args, 0, rows);
    else K::rms_norm_forward(args, 0, rows);
  });
}

template <norm_kind Kind, class T>
void backward_kernel(const BackwardRows<T>& args, std::size_t begin, std::size_t end) {
  with_active_kernels<T>([&](auto kernels) {
    using K = decltype(kernels);
    if constexpr (Kind == norm_kind::layer) K::layer_norm_backward(args, begin, end);
    else K::rms_norm_backward(args, begin, end);
  });
}

template <class A>
bool all_finite(const A* p, std::size_t n) {
  return with_active_kernels<A>([&](auto kernels) { return decltype(kernels)::all_finite(p, n); });
}

/// Backward over rows [begin, end) in row order: the row kernels between the rows whose rstd
/// overflowed, which go one by one through overflowed_row_backward. Only where eps allows
/// such rows does it look at each row's rstd, and then only after a vector scan found some
/// rstd not finite: with eps = 0, a comparison a row cost 2–9% on rows of 16 and 64 floats,
/// the scan nothing measurable (0.96–1.04 of the time).
template <norm_kind Kind, class T>
void backward_rows(const BackwardRows<T>& args, std::size_t begin, std::size_t end) {
  if (!rstd_may_overflow<accum_t<T>>(args.eps) || all_finite(args.rstd + begin, end - begin)) {
    backward_kernel<Kind>(args, begin, end);
    return;
  }
  std::size_t from = begin;
  for (std::size_t i = begin; i < end; ++i) {
    if (!rstd_overflowed(args, i)) continue;
    if (from < i) backward_kernel<Kind>(args, from, i);
    overflowed_row_backward<Kind == norm_kind::layer>(args, i);
    from = i + 1;
  }
  if (from < end) backward_kernel<Kind>(args, from, end);
}

template <class A>
void add_into(A* out, const A* in, std::size_t n) {
  with_active_kernels<A>([&](auto kernels) { decltype(kernels)::add_into(out, in, n); });
}

template <class T>
std::size_t gradient_offset(const BackwardRows<T>& args) {
  return with_active_kernels<T>([&](auto kernels) { return decltype(kernels)::gradient_offset(args); });
}

/// Backward over `rows` rows. With grad_gamma (and grad_beta) given, the gradient sums over
/// the rows are formed block by block, in `workspace`, and added into them once, at the end.
template <norm_kind Kind, class T>
void backward(BackwardRows<T> args, std::size_t rows, accum_t<T>* grad_gamma, accum_t<T>* grad_beta,
              SumWorkspace<accum_t<T>>& workspace) {
  using A = accum_t<T>;
  if (grad_gamma == nullptr) {
    args.grad_gamma = args.grad_beta = nullptr;
    if (args.dx != nullptr) backward_rows<Kind>(args, 0, rows);
    return;
  }
  const std::size_t f = args.features;
  // Both partials start as far into a cache line as the kernels ask, β's on the line after
  // γ's last value.
  constexpr std::size_t line = kLineBytes / sizeof(A);
  const std::size_t gamma_at = gradient_offset(args);
  const std::size_t beta_at = (gamma_at + f + line - 1) / line * line + gamma_at;
  PairwiseSum<A, void (*)(A*, const A*, std::size_t)> partials(grad_beta != nullptr ? beta_at + f : gamma_at + f,
                                                                     &add_into<A>, workspace);
  for (std::size_t begin = 0; begin < rows; begin += kGradBlockRows) {
    aligned_vector<A>& block = partials.next();
    args.grad_gamma = block.data() + gamma_at;
    args.grad_beta = grad_beta != nullptr ? block.data() + beta_at : nullptr;
    backward_rows<Kind>(args, begin, begin + kGradBlockRows < rows ? begin + kGradBlockRows : rows);
    partials.commit();
  }
  if (rows == 0) return;
  const aligned_vector<A>& total = partials.total();
  add_into(grad_gamma, total.data() + gamma_at, f);
  if (grad_beta != nullptr) add_into(grad_beta, total.data() + beta_at, f);
}

}  // namespace normkit::detail
