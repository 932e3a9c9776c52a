// normkit_bench: throughput of normkit's LayerNorm and RMSNorm, forward (inference and
// training) and backward, on every instruction set this CPU supports, next to a plain copy of
// the same bytes, a naive scalar loop, and oneDNN's layer normalization when it is installed.
//
// Benchmark names are <what>/<pass>/<type>/<rows>x<features>/<implementation>, e.g.
//   LayerNorm/forward/f32/4096x768/avx512    normkit on AVX-512 (one row per supported ISA)
//   LayerNorm/forward/f32/4096x768/naive     the loop one writes without a library
//   LayerNorm/forward/f32/4096x768/onednn    oneDNN, single thread
//   copy/forward/f32/4096x768                memcpy of x into y: the bytes of a forward pass
//   copy/backward/f32/4096x768               dx = x + dy: the bytes of a backward pass
// Passes: `forward` is inference; `training` also writes each row's mean and rstd; `backward`
// writes dx and adds the γ (and β) gradients.
//
// Reading the numbers:
// - bytes_per_second counts the tensor traffic: forward reads x and writes y; backward reads x
//   and dy and writes dx (the per-row statistics and the per-feature γ/β are not counted).
// - `roofline` is that rate divided by the copy rate of the same footprint at the same shape,
//   measured in the same run on the same buffers (see copy_rate() in bench_support.hpp): 1.0
//   means "as fast as moving the bytes". The copy rate is the best of five short windows, so
//   noise lowers rooflines rather than inflating them. Small shapes live in cache, large ones
//   (32768x768, 8192x4096: 96 and 128 MiB per array) in DRAM on most machines. glibc's memcpy
//   switches to non-temporal stores (no read-for-ownership of y) above a size threshold
//   (x86_non_temporal_threshold, about 3/4 of the last-level cache per thread), which an
//   ordinary store loop cannot match: above it, forward rooflines near 2/3 already mean
//   "memory-bound".
// - Every row is wall-clock time (UseRealTime) of one thread. oneDNN is limited to one thread
//   too (see limit_onednn_threads()).
// - Before timing, every implementation's result on the benchmark's own data is compared with
//   normkit::reference (double precision); a mismatch above 1e-4 ends the program with an error.
//
// Running: the default is a short run (--benchmark_min_time=0.05 unless that flag or the
// BENCHMARK_MIN_TIME environment variable is given). Select with e.g.
//   normkit_bench --benchmark_filter='LayerNorm/forward/f32/.*'   (one pass, all shapes)
//   normkit_bench --benchmark_filter='/4096x768/'                   (one shape, everything)
// Benchmarks are registered grouped by shape because each shape's data is built once and
// shared by the benchmarks that follow; --benchmark_enable_random_interleaving works but
// rebuilds data often.

#include "bench_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#ifdef NORMKIT_BENCH_HAVE_ONEDNN
#include <dlfcn.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace normkit_bench {
namespace {

enum class Norm { layer, rms };
enum class Pass { forward, training, backward };

const char* name_of(Norm n) { return n == Norm::layer ? "LayerNorm" : "RMSNorm"; }
const char* name_of(Pass p) {
  switch (p) {
    case Pass::forward: return "forward";
    case Pass::training: return "training";
    case Pass::backward: break;
  }
  return "backward";
}
Footprint footprint_of(Pass p) { return p == Pass::backward ? Footprint::backward : Footprint::forward; }

template <class T>
std::size_t bytes_moved(const Shape& s, Footprint f) {
  return s.size() * sizeof(T) * static_cast<std::size_t>(arrays_moved(f));
}

template <class T>
std::string benchmark_name(const char* what, Pass pass, const Shape& s, std::string_view impl) {
  // Built by appending: GCC 12 at -O3 gives a false -Wrestrict for "literal" + std::string.
  std::string name(what);
  name.append("/").append(name_of(pass)).append("/").append(type_name<T>()).append("/").append(s.name());
  if (!impl.empty()) name.append("/").append(impl);
  return name;
}

// ---- normkit ---------------------------------------------------------------------------------

template <class T>
void bm_normkit(benchmark::State& state, Shape shape, Norm norm, Pass pass, normkit::isa which) {
  using A = normkit::accum_t<T>;
  Problem<T>& p = problem<T>(shape);
  const double copy = copy_rate(p, footprint_of(pass));
  const ReferenceResults& ref = p.ref();
  const std::size_t f = shape.features;
  const IsaScope scope(which);  // restores the previous ISA when the benchmark returns
  const std::string isa(normkit::to_string(normkit::active_isa()));
  state.SetLabel(isa);
  const std::string what = benchmark_name<T>(name_of(norm), pass, shape, isa);
  const auto x = p.x.span(), dy = p.dy.span();
  const auto y = p.y.span(), dx = p.dx.span();
  double seconds = 0;

  // Each case makes one untimed call first, checked against the reference (it also warms the
  // caches), then times the same call.
  if (norm == Norm::layer) {
    normkit::LayerNorm<T> layer(f, {.eps = kLayerNormEps});
    std::copy(p.gamma.begin(), p.gamma.end(), layer.gamma().begin());
    std::copy(p.beta.begin(), p.beta.end(), layer.beta().begin());
    switch (pass) {
      case Pass::forward:
        layer.forward(x, y);
        check_rows(what, p.y.data(), ref.layer_forward.y, ref, f);
        seconds = timed_loop(state, [&] { layer.forward(x, y); });
        break;
      case Pass::training:
        layer.forward(x, y, p.out_mean, p.out_rstd);
        check_rows(what, p.y.data(), ref.layer_forward.y, ref, f);
        check_values<A>(what + " mean", p.out_mean, ref.layer_forward.mean, ref.rows);
        check_values<A>(what + " rstd", p.out_rstd, ref.layer_forward.rstd, ref.rows);
        seconds = timed_loop(state, [&] { layer.forward(x, y, p.out_mean, p.out_rstd); });
        break;
      case Pass::backward:
        layer.backward(dy, x, p.mean, p.rstd, dx);
        check_rows(what + " dx", p.dx.data(), ref.layer_backward.dx, ref, f);
        if (ref.all_rows) {
          check_sums<A>(what + " grad_gamma", layer.grad_gamma(), ref.layer_backward.grad_gamma,
                        ref.layer_gamma_terms);
          check_sums<A>(what + " grad_beta", layer.grad_beta(), ref.layer_backward.grad_beta, ref.layer_beta_terms);
        }
        // The gradients keep accumulating over the iterations, as over micro-batches.
        seconds = timed_loop(state, [&] { layer.backward(dy, x, p.mean, p.rstd, dx); });
        break;
    }
  } else {
    normkit::RMSNorm<T> rms(f, {.eps = kRmsNormEps});
    std::copy(p.gamma.begin(), p.gamma.end(), rms.gamma().begin());
    switch (pass) {
      case Pass::forward:
        rms.forward(x, y);
        check_rows(what, p.y.data(), ref.rms_forward.y, ref, f);
        seconds = timed_loop(state, [&] { rms.forward(x, y); });
        break;
      case Pass::training:
        rms.forward(x, y, p.out_rstd);
        check_rows(what, p.y.data(), ref.rms_forward.y, ref, f);
        check_values<A>(what + " rstd", p.out_rstd, ref.rms_forward.rstd, ref.rows);
        seconds = timed_loop(state, [&] { rms.forward(x, y, p.out_rstd); });
        break;
      case Pass::backward:
        rms.backward(dy, x, p.rms_rstd, dx);
        check_rows(what + " dx", p.dx.data(), ref.rms_backward.dx, ref, f);
        if (ref.all_rows) {
          check_sums<A>(what + " grad_gamma", rms.grad_gamma(), ref.rms_backward.grad_gamma, ref.rms_gamma_terms);
        }
        seconds = timed_loop(state, [&] { rms.backward(dy, x, p.rms_rstd, dx); });
        break;
    }
  }
  report_bytes(state, bytes_moved<T>(shape, footprint_of(pass)), copy, seconds);
}

// ---- copy ------------------------------------------------------------------------------------

template <class T>
void bm_copy(benchmark::State& state, Shape shape, Footprint footprint) {
  Problem<T>& p = problem<T>(shape);
  const double copy = copy_rate(p, footprint);
  state.SetLabel(footprint == Footprint::forward ? "memcpy(y, x)" : "dx = x + dy");
  const double seconds = timed_loop(state, [&] { copy_once(p, footprint); });
  // Its roofline compares Google Benchmark's mean rate with the cached best-window rate: 1 or a
  // little below.
  report_bytes(state, bytes_moved<T>(shape, footprint), copy, seconds);
}

// ---- naive: what one writes without normkit ---------------------------------------------------
//
// Straightforward float loops: two passes for the statistics (mean, then squared deviations;
// not the one-pass E[x²] − E[x]², which examples/stability.cpp shows failing), a third to write
// y, float accumulators, no manual vectorization. Compiled with the same flags as everything
// else, so the compiler vectorizes what it can on its own (the reductions it may not reorder).

void naive_layer_norm_forward(const float* x, float* y, std::size_t rows, std::size_t n, const float* gamma,
                              const float* beta, float eps) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float sum = 0;
    for (std::size_t j = 0; j < n; ++j) sum += xr[j];
    const float mean = sum / static_cast<float>(n);
    float squares = 0;
    for (std::size_t j = 0; j < n; ++j) squares += (xr[j] - mean) * (xr[j] - mean);
    const float rstd = 1.0f / std::sqrt(squares / static_cast<float>(n) + eps);
    for (std::size_t j = 0; j < n; ++j) yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
  }
}

void naive_rms_norm_forward(const float* x, float* y, std::size_t rows, std::size_t n, const float* gamma,
                            float eps) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float squares = 0;
    for (std::size_t j = 0; j < n; ++j) squares += xr[j] * xr[j];
    const float rstd = 1.0f / std::sqrt(squares / static_cast<float>(n) + eps);
    for (std::size_t j = 0; j < n; ++j) yr[j] = xr[j] * rstd * gamma[j];
  }
}

// With the saved mean/rstd, x̂ = (x − mean)·rstd and g = dy·γ:
// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), dγ += dy·x̂, dβ += dy.
void naive_layer_norm_backward(const float* dy, const float* x, const float* mean, const float* rstd, float* dx,
                               std::size_t rows, std::size_t n, const float* gamma, float* grad_gamma,
                               float* grad_beta) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    const float* dyr = dy + r * n;
    float* dxr = dx + r * n;
    float sum_g = 0, sum_gx = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const float xhat = (xr[j] - mean[r]) * rstd[r];
      const float g = dyr[j] * gamma[j];
      sum_g += g;
      sum_gx += g * xhat;
    }
    const float mean_g = sum_g / static_cast<float>(n), mean_gx = sum_gx / static_cast<float>(n);
    for (std::size_t j = 0; j < n; ++j) {
      const float xhat = (xr[j] - mean[r]) * rstd[r];
      dxr[j] = rstd[r] * (dyr[j] * gamma[j] - mean_g - xhat * mean_gx);
      grad_gamma[j] += dyr[j] * xhat;
      grad_beta[j] += dyr[j];
    }
  }
}

// x̂ = x·rstd, g = dy·γ: dx = rstd·(g − x̂·mean(g·x̂)), dγ += dy·x̂.
void naive_rms_norm_backward(const float* dy, const float* x, const float* rstd, float* dx, std::size_t rows,
                             std::size_t n, const float* gamma, float* grad_gamma) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    const float* dyr = dy + r * n;
    float* dxr = dx + r * n;
    float sum_gx = 0;
    for (std::size_t j = 0; j < n; ++j) sum_gx += dyr[j] * gamma[j] * xr[j] * rstd[r];
    const float mean_gx = sum_gx / static_cast<float>(n);
    for (std::size_t j = 0; j < n; ++j) {
      const float xhat = xr[j] * rstd[r];
      dxr[j] = rstd[r] * (dyr[j] * gamma[j] - xhat * mean_gx);
      grad_gamma[j] += dyr[j] * xhat;
    }
  }
}

void bm_naive(benchmark::State& state, Shape shape, Norm norm, Pass pass) {
  Problem<float>& p = problem<float>(shape);
  const double copy = copy_rate(p, footprint_of(pass));
  const ReferenceResults& ref = p.ref();
  const std::size_t rows = shape.rows, f = shape.features;
  state.SetLabel("naive");
  const std::string what = benchmark_name<float>(name_of(norm), pass, shape, "naive");
  const float* g = p.gamma.data();
  const float* b = p.beta.data();
  std::vector<float> grad_gamma(f, 0.0f), grad_beta(f, 0.0f);
  double seconds = 0;

  if (norm == Norm::layer && pass == Pass::forward) {
    const auto run = [&] {
      naive_layer_norm_forward(p.x.data(), p.y.data(), rows, f, g, b, static_cast<float>(kLayerNormEps));
    };
    run();
    check_rows(what, p.y.data(), ref.layer_forward.y, ref, f);
    seconds = timed_loop(state, run);
  } else if (norm == Norm::rms && pass == Pass::forward) {
    const auto run = [&] {
      naive_rms_norm_forward(p.x.data(), p.y.data(), rows, f, g, static_cast<float>(kRmsNormEps));
    };
    run();
    check_rows(what, p.y.data(), ref.rms_forward.y, ref, f);
    seconds = timed_loop(state, run);
  } else if (norm == Norm::layer && pass == Pass::backward) {
    const auto run = [&] {
      naive_layer_norm_backward(p.dy.data(), p.x.data(), p.mean.data(), p.rstd.data(), p.dx.data(), rows, f, g,
                                grad_gamma.data(), grad_beta.data());
    };
    run();
    check_rows(what + " dx", p.dx.data(), ref.layer_backward.dx, ref, f);
    if (ref.all_rows) {
      check_sums<float>(what + " grad_gamma", grad_gamma, ref.layer_backward.grad_gamma, ref.layer_gamma_terms);
      check_sums<float>(what + " grad_beta", grad_beta, ref.layer_backward.grad_beta, ref.layer_beta_terms);
    }
    seconds = timed_loop(state, run);
  } else if (norm == Norm::rms && pass == Pass::backward) {
    const auto run = [&] {
      naive_rms_norm_backward(p.dy.data(), p.x.data(), p.rms_rstd.data(), p.dx.data(), rows, f, g,
                              grad_gamma.data());
    };
    run();
    check_rows(what + " dx", p.dx.data(), ref.rms_backward.dx, ref, f);
    if (ref.all_rows) {
      check_sums<float>(what + " grad_gamma", grad_gamma, ref.rms_backward.grad_gamma, ref.rms_gamma_terms);
    }
    seconds = timed_loop(state, run);
  } else {
    fail(std::string("bm_naive: no naive benchmark ") + what);
  }
  report_bytes(state, bytes_moved<float>(shape, footprint_of(pass)), copy, seconds);
}

// ---- oneDNN ----------------------------------------------------------------------------------

#ifdef NORMKIT_BENCH_HAVE_ONEDNN

// oneDNN parallelizes over the cores by default; normkit runs on the calling thread. The
// measured condition here is one thread for both. Debian's libdnnl (and most builds) use the
// OpenMP runtime, where the thread count is OpenMP's: we call omp_set_num_threads(1) on the
// benchmark thread before any primitive exists, which is what running with OMP_NUM_THREADS=1
// does. The benchmark is not linked with OpenMP itself, so the function is looked up in the
// libgomp/libomp that libdnnl brought into the process. Returns a description for the context.
std::string limit_onednn_threads() {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  void* set_symbol = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
  void* get_symbol = dlsym(RTLD_DEFAULT, "omp_get_max_threads");
  if (set_symbol == nullptr || get_symbol == nullptr) fail("oneDNN uses OpenMP but omp_set_num_threads was not found");
  void (*set_threads)(int) = nullptr;
  int (*max_threads)() = nullptr;
  std::memcpy(&set_threads, &set_symbol, sizeof set_symbol);  // object to function pointer
  std::memcpy(&max_threads, &get_symbol, sizeof get_symbol);
  set_threads(1);
  if (max_threads() != 1) fail("could not limit oneDNN's OpenMP runtime to one thread");
  return "1 thread (OpenMP runtime, omp_set_num_threads(1))";
#elif DNNL_CPU_RUNTIME == DNNL_RUNTIME_SEQ
  return "1 thread (sequential runtime)";
#else
  // TBB or threadpool builds: limit the threads with that runtime's own controls.
  return "threads as the runtime decides (not OpenMP or sequential: not limited here)";
#endif
}

std::string onednn_description() {
  const dnnl::version_t* v = dnnl::version();
  const char* isa = "other";
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx: isa = "avx512_core_amx"; break;
    case dnnl::cpu_isa::avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl::cpu_isa::avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl::cpu_isa::avx512_core: isa = "avx512_core"; break;
    case dnnl::cpu_isa::avx2_vnni: isa = "avx2_vnni"; break;
    case dnnl::cpu_isa::avx2: isa = "avx2"; break;
    case dnnl::cpu_isa::avx: isa = "avx"; break;
    case dnnl::cpu_isa::sse41: isa = "sse41"; break;
    default: break;
  }
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         ", max ISA " + isa;
}

struct OneDnn {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

OneDnn& onednn() {
  static OneDnn instance;
  return instance;
}

// Layer normalization over the last dimension of a rows × features f32 tensor, with scale (γ)
// and shift (β) as separate arguments: normalization_flags::use_scale | use_shift (the 2.x
// spelling; use_scale_shift packs both into one array and is deprecated).
void bm_onednn(benchmark::State& state, Shape shape, Pass pass) {
  using dnnl::memory;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  Problem<float>& p = problem<float>(shape);
  const double copy = copy_rate(p, footprint_of(pass));
  const ReferenceResults& ref = p.ref();
  OneDnn& dnn = onednn();
  const std::string what = benchmark_name<float>("LayerNorm", pass, shape, "onednn");
  const auto rows = static_cast<memory::dim>(shape.rows), f = static_cast<memory::dim>(shape.features);
  const memory::desc data_md({rows, f}, dt::f32, tag::ab);
  const memory::desc stat_md({rows}, dt::f32, tag::a);
  const memory::desc param_md({f}, dt::f32, tag::a);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  const auto eps = static_cast<float>(kLayerNormEps);
  double seconds = 0;

  // oneDNN memory objects wrap our buffers (no copies); γ/β get their own copies because
  // oneDNN takes them as non-const.
  std::vector<float> scale(p.gamma), shift(p.beta), diff_scale(shape.features), diff_shift(shape.features);
  std::vector<float> mean(shape.rows), variance(shape.rows);
  memory src(data_md, dnn.engine, p.x.data()), dst(data_md, dnn.engine, p.y.data());
  memory scale_m(param_md, dnn.engine, scale.data()), shift_m(param_md, dnn.engine, shift.data());
  memory mean_m(stat_md, dnn.engine, mean.data()), variance_m(stat_md, dnn.engine, variance.data());

  if (pass == Pass::forward) {
    const dnnl::layer_normalization_forward::primitive_desc pd(
        {dnnl::prop_kind::forward_inference, data_md, eps, flags}, dnn.engine);
    state.SetLabel(std::string("onednn ") + pd.impl_info_str());
    const dnnl::layer_normalization_forward prim(pd);
    const std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, scale_m}, {DNNL_ARG_SHIFT, shift_m}};
    prim.execute(dnn.stream, args);
    dnn.stream.wait();
    check_rows(what, p.y.data(), ref.layer_forward.y, ref, shape.features);
    seconds = timed_loop(state, [&] {
      prim.execute(dnn.stream, args);
      dnn.stream.wait();
    });
  } else if (pass == Pass::backward) {
    // Backward needs the training forward's primitive descriptor as a hint, and takes the mean
    // and variance (not rstd) that training forward produced: computed here, untimed.
    const dnnl::layer_normalization_forward::primitive_desc fwd_pd(
        {dnnl::prop_kind::forward_training, data_md, stat_md, eps, flags}, dnn.engine);
    const dnnl::layer_normalization_forward fwd(fwd_pd);
    fwd.execute(dnn.stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, scale_m},
                             {DNNL_ARG_SHIFT, shift_m}, {DNNL_ARG_MEAN, mean_m}, {DNNL_ARG_VARIANCE, variance_m}});
    dnn.stream.wait();

    const dnnl::layer_normalization_backward::primitive_desc pd(
        {dnnl::prop_kind::backward, data_md, data_md, stat_md, eps, flags}, dnn.engine, fwd_pd);
    state.SetLabel(std::string("onednn ") + pd.impl_info_str());
    const dnnl::layer_normalization_backward prim(pd);
    memory diff_dst(data_md, dnn.engine, p.dy.data()), diff_src(data_md, dnn.engine, p.dx.data());
    memory diff_scale_m(param_md, dnn.engine, diff_scale.data());
    memory diff_shift_m(param_md, dnn.engine, diff_shift.data());
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},          {DNNL_ARG_MEAN, mean_m},
                                         {DNNL_ARG_VARIANCE, variance_m}, {DNNL_ARG_DIFF_DST, diff_dst},
                                         {DNNL_ARG_SCALE, scale_m},     {DNNL_ARG_SHIFT, shift_m},
                                         {DNNL_ARG_DIFF_SRC, diff_src}, {DNNL_ARG_DIFF_SCALE, diff_scale_m},
                                         {DNNL_ARG_DIFF_SHIFT, diff_shift_m}};
    std::vector<unsigned char> workspace(pd.workspace_desc().get_size());  // none expected; if any
    if (!workspace.empty()) {
      args.emplace(DNNL_ARG_WORKSPACE, memory(pd.workspace_desc(), dnn.engine, workspace.data()));
    }
    prim.execute(dnn.stream, args);
    dnn.stream.wait();
    check_rows(what + " dx", p.dx.data(), ref.layer_backward.dx, ref, shape.features);
    if (ref.all_rows) {  // oneDNN overwrites diff_scale/diff_shift rather than adding
      check_sums<float>(what + " diff_scale", diff_scale, ref.layer_backward.grad_gamma, ref.layer_gamma_terms);
      check_sums<float>(what + " diff_shift", diff_shift, ref.layer_backward.grad_beta, ref.layer_beta_terms);
    }
    seconds = timed_loop(state, [&] {
      prim.execute(dnn.stream, args);
      dnn.stream.wait();
    });
  } else {
    fail(std::string("bm_onednn: no oneDNN benchmark ") + what);
  }
  report_bytes(state, bytes_moved<float>(shape, footprint_of(pass)), copy, seconds);
}

#endif  // NORMKIT_BENCH_HAVE_ONEDNN

// ---- registration ----------------------------------------------------------------------------

// Cache-resident to DRAM-sized: 1x768 is one token of a 768-wide model (latency-bound);
// 4096x64 small rows; 4096x768 and 32768x768 BERT/GPT-2 widths in cache and in DRAM;
// 1024x4096 and 8192x4096 LLaMA-7B widths; 256x16384 long rows.
constexpr Shape kFloatShapes[] = {{1, 768},     {4096, 64},   {4096, 768}, {1024, 4096},
                                  {256, 16384}, {32768, 768}, {8192, 4096}};
// double costs twice the bytes and is less common: two shapes keep the default run short.
constexpr Shape kDoubleShapes[] = {{4096, 768}, {1024, 4096}};

benchmark::internal::Benchmark* configure(benchmark::internal::Benchmark* b) {
  return b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

template <class T>
void register_shape(const Shape& shape, bool with_peers) {
  // The copies first: their rates are then measured before any kernel of the shape runs.
  for (Footprint footprint : {Footprint::forward, Footprint::backward}) {
    const std::string name = std::string("copy/") + (footprint == Footprint::forward ? "forward" : "backward") + "/" +
                             type_name<T>() + "/" + shape.name();
    configure(benchmark::RegisterBenchmark(name.c_str(), [shape, footprint](benchmark::State& state) {
      bm_copy<T>(state, shape, footprint);
    }));
  }
  for (Norm norm : {Norm::layer, Norm::rms}) {
    for (Pass pass : {Pass::forward, Pass::training, Pass::backward}) {
      for (normkit::isa which : normkit::supported_isas()) {
        const std::string name = benchmark_name<T>(name_of(norm), pass, shape, normkit::to_string(which));
        configure(benchmark::RegisterBenchmark(name.c_str(), [shape, norm, pass, which](benchmark::State& state) {
          bm_normkit<T>(state, shape, norm, pass, which);
        }));
      }
      if (!with_peers || pass == Pass::training) continue;
      if constexpr (std::is_same_v<T, float>) {
        const std::string naive = benchmark_name<T>(name_of(norm), pass, shape, "naive");
        configure(benchmark::RegisterBenchmark(naive.c_str(), [shape, norm, pass](benchmark::State& state) {
          bm_naive(state, shape, norm, pass);
        }));
#ifdef NORMKIT_BENCH_HAVE_ONEDNN
        if (norm == Norm::layer) {  // oneDNN has no RMSNorm primitive in 2.x
          const std::string dnn = benchmark_name<T>(name_of(norm), pass, shape, "onednn");
          configure(benchmark::RegisterBenchmark(dnn.c_str(), [shape, pass](benchmark::State& state) {
            bm_onednn(state, shape, pass);
          }));
        }
#endif
      }
    }
  }
}

void register_all() {
  for (const Shape& shape : kFloatShapes) register_shape<float>(shape, /*with_peers=*/true);
  for (const Shape& shape : kDoubleShapes) register_shape<double>(shape, /*with_peers=*/false);
}

}  // namespace
}  // namespace normkit_bench

int main(int argc, char** argv) {
  // A short default run (well under two minutes on two cores): unless the user chose a minimum
  // time, on the command line or in BENCHMARK_MIN_TIME, each benchmark runs for 0.05 s.
  std::vector<char*> args(argv, argv + argc);
  bool min_time_given = std::getenv("BENCHMARK_MIN_TIME") != nullptr;
  for (int i = 1; i < argc; ++i) {
    min_time_given = min_time_given || std::string_view(argv[i]).starts_with("--benchmark_min_time");
  }
  std::string default_min_time = "--benchmark_min_time=0.05";
  if (!min_time_given) args.insert(args.begin() + (argc > 0 ? 1 : 0), default_min_time.data());
  int count = static_cast<int>(args.size());
  args.push_back(nullptr);

  std::string isas;
  for (normkit::isa which : normkit::supported_isas()) {
    if (!isas.empty()) isas += ' ';
    isas += normkit::to_string(which);
  }
  benchmark::AddCustomContext("normkit_isas", isas);
  benchmark::AddCustomContext("normkit_default_isa", std::string(normkit::to_string(normkit::active_isa())));
#ifdef NORMKIT_BENCH_HAVE_ONEDNN
  benchmark::AddCustomContext("onednn_threads", normkit_bench::limit_onednn_threads());
  benchmark::AddCustomContext("onednn", normkit_bench::onednn_description());
#else
  benchmark::AddCustomContext("onednn", "not built in (NORMKIT_BENCH_HAVE_ONEDNN undefined)");
#endif

  normkit_bench::register_all();
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
