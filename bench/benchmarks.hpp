// The benchmarks of normkit_bench: normkit, the copy, the naive loop and oneDNN on one problem,
// and their registration for one element type. Shared by the files that register the element
// types (normkit_bench.cpp has the names, how to read the numbers, and main()).
#pragma once

#include "bench_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <span>
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

enum class Norm { layer, rms };
enum class Pass { forward, training, backward };

inline const char* name_of(Norm n) { return n == Norm::layer ? "LayerNorm" : "RMSNorm"; }
inline const char* name_of(Pass p) {
  switch (p) {
    case Pass::forward: return "forward";
    case Pass::training: return "training";
    case Pass::backward: break;
  }
  return "backward";
}
inline Footprint footprint_of(Pass p) { return p == Pass::backward ? Footprint::backward : Footprint::forward; }

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
  report_bytes(state, what, bytes_moved<T>(shape, footprint_of(pass)), copy, seconds);
}

// ---- copy ------------------------------------------------------------------------------------

inline std::string copy_name(Footprint footprint, const char* type, const Shape& shape) {
  std::string name("copy/");
  name.append(footprint == Footprint::forward ? "forward" : "backward").append("/").append(type);
  return name.append("/").append(shape.name());
}

template <class T>
void bm_copy(benchmark::State& state, Shape shape, Footprint footprint) {
  Problem<T>& p = problem<T>(shape);
  const double copy = copy_rate(p, footprint);
  state.SetLabel(footprint == Footprint::forward ? "memcpy(y, x)" : "dx = x + dy");
  const double seconds = timed_loop(state, [&] { copy_once(p, footprint); });
  // Its roofline compares Google Benchmark's mean rate with the cached best-window rate: 1 or a
  // little below.
  report_bytes(state, copy_name(footprint, type_name<T>(), shape), bytes_moved<T>(shape, footprint), copy, seconds);
}

// ---- naive: what one writes without normkit ---------------------------------------------------
//
// Straightforward loops: two passes for the statistics (mean, then squared deviations; not the
// one-pass E[x²] − E[x]², which examples/stability.cpp shows failing), a third to write y,
// accumulators in accum_t<T> (float, or double for double) as normkit's, no manual
// vectorization. Compiled with the same flags as everything else, so the compiler vectorizes
// what it can on its own (the reductions it may not reorder). The training forward is the
// inference forward that also stores each row's statistics (mean_out, rstd_out not null).

template <class T, class A = normkit::accum_t<T>>
void naive_layer_norm_forward(const T* x, T* y, std::size_t rows, std::size_t n, const A* gamma, const A* beta, A eps,
                              A* mean_out, A* rstd_out) {
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    A sum = 0;
    for (std::size_t j = 0; j < n; ++j) sum += static_cast<A>(xr[j]);
    const A mean = sum / static_cast<A>(n);
    A squares = 0;
    for (std::size_t j = 0; j < n; ++j) squares += (static_cast<A>(xr[j]) - mean) * (static_cast<A>(xr[j]) - mean);
    const A rstd = A(1) / std::sqrt(squares / static_cast<A>(n) + eps);
    if (mean_out != nullptr) {
      mean_out[r] = mean;
      rstd_out[r] = rstd;
    }
    for (std::size_t j = 0; j < n; ++j) yr[j] = static_cast<T>((static_cast<A>(xr[j]) - mean) * rstd * gamma[j] + beta[j]);
  }
}

template <class T, class A = normkit::accum_t<T>>
void naive_rms_norm_forward(const T* x, T* y, std::size_t rows, std::size_t n, const A* gamma, A eps, A* rstd_out) {
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    A squares = 0;
    for (std::size_t j = 0; j < n; ++j) squares += static_cast<A>(xr[j]) * static_cast<A>(xr[j]);
    const A rstd = A(1) / std::sqrt(squares / static_cast<A>(n) + eps);
    if (rstd_out != nullptr) rstd_out[r] = rstd;
    for (std::size_t j = 0; j < n; ++j) yr[j] = static_cast<T>(static_cast<A>(xr[j]) * rstd * gamma[j]);
  }
}

// With the saved mean/rstd, x̂ = (x − mean)·rstd and g = dy·γ:
// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), dγ += dy·x̂, dβ += dy.
template <class T, class A = normkit::accum_t<T>>
void naive_layer_norm_backward(const T* dy, const T* x, const A* mean, const A* rstd, T* dx, std::size_t rows,
                               std::size_t n, const A* gamma, A* grad_gamma, A* grad_beta) {
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    const T* dyr = dy + r * n;
    T* dxr = dx + r * n;
    A sum_g = 0, sum_gx = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const A xhat = (static_cast<A>(xr[j]) - mean[r]) * rstd[r];
      const A g = static_cast<A>(dyr[j]) * gamma[j];
      sum_g += g;
      sum_gx += g * xhat;
    }
    const A mean_g = sum_g / static_cast<A>(n), mean_gx = sum_gx / static_cast<A>(n);
    for (std::size_t j = 0; j < n; ++j) {
      const A xhat = (static_cast<A>(xr[j]) - mean[r]) * rstd[r];
      const A d = static_cast<A>(dyr[j]);
      dxr[j] = static_cast<T>(rstd[r] * (d * gamma[j] - mean_g - xhat * mean_gx));
      grad_gamma[j] += d * xhat;
      grad_beta[j] += d;
    }
  }
}

// x̂ = x·rstd, g = dy·γ: dx = rstd·(g − x̂·mean(g·x̂)), dγ += dy·x̂.
template <class T, class A = normkit::accum_t<T>>
void naive_rms_norm_backward(const T* dy, const T* x, const A* rstd, T* dx, std::size_t rows, std::size_t n,
                             const A* gamma, A* grad_gamma) {
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    const T* dyr = dy + r * n;
    T* dxr = dx + r * n;
    A sum_gx = 0;
    for (std::size_t j = 0; j < n; ++j) sum_gx += static_cast<A>(dyr[j]) * gamma[j] * static_cast<A>(xr[j]) * rstd[r];
    const A mean_gx = sum_gx / static_cast<A>(n);
    for (std::size_t j = 0; j < n; ++j) {
      const A xhat = static_cast<A>(xr[j]) * rstd[r];
      const A d = static_cast<A>(dyr[j]);
      dxr[j] = static_cast<T>(rstd[r] * (d * gamma[j] - xhat * mean_gx));
      grad_gamma[j] += d * xhat;
    }
  }
}

template <class T>
void bm_naive(benchmark::State& state, Shape shape, Norm norm, Pass pass) {
  using A = normkit::accum_t<T>;
  Problem<T>& p = problem<T>(shape);
  const double copy = copy_rate(p, footprint_of(pass));
  const ReferenceResults& ref = p.ref();
  const std::size_t rows = shape.rows, f = shape.features;
  state.SetLabel("naive");
  const std::string what = benchmark_name<T>(name_of(norm), pass, shape, "naive");
  const A* g = p.gamma.data();
  const A* b = p.beta.data();
  const auto layer_eps = static_cast<A>(kLayerNormEps), rms_eps = static_cast<A>(kRmsNormEps);
  std::vector<A> grad_gamma(f, A(0)), grad_beta(f, A(0));
  double seconds = 0;

  // As for normkit: one untimed call, checked against the reference, then the timed calls.
  if (norm == Norm::layer && pass != Pass::backward) {
    A* mean = pass == Pass::training ? p.out_mean.data() : nullptr;
    A* rstd = pass == Pass::training ? p.out_rstd.data() : nullptr;
    const auto run = [&] { naive_layer_norm_forward(p.x.data(), p.y.data(), rows, f, g, b, layer_eps, mean, rstd); };
    run();
    check_rows(what, p.y.data(), ref.layer_forward.y, ref, f);
    if (pass == Pass::training) {
      check_values<A>(what + " mean", p.out_mean, ref.layer_forward.mean, ref.rows);
      check_values<A>(what + " rstd", p.out_rstd, ref.layer_forward.rstd, ref.rows);
    }
    seconds = timed_loop(state, run);
  } else if (norm == Norm::rms && pass != Pass::backward) {
    A* rstd = pass == Pass::training ? p.out_rstd.data() : nullptr;
    const auto run = [&] { naive_rms_norm_forward(p.x.data(), p.y.data(), rows, f, g, rms_eps, rstd); };
    run();
    check_rows(what, p.y.data(), ref.rms_forward.y, ref, f);
    if (pass == Pass::training) check_values<A>(what + " rstd", p.out_rstd, ref.rms_forward.rstd, ref.rows);
    seconds = timed_loop(state, run);
  } else if (norm == Norm::layer) {
    const auto run = [&] {
      naive_layer_norm_backward(p.dy.data(), p.x.data(), p.mean.data(), p.rstd.data(), p.dx.data(), rows, f, g,
                                grad_gamma.data(), grad_beta.data());
    };
    run();
    check_rows(what + " dx", p.dx.data(), ref.layer_backward.dx, ref, f);
    if (ref.all_rows) {
      check_sums<A>(what + " grad_gamma", grad_gamma, ref.layer_backward.grad_gamma, ref.layer_gamma_terms);
      check_sums<A>(what + " grad_beta", grad_beta, ref.layer_backward.grad_beta, ref.layer_beta_terms);
    }
    seconds = timed_loop(state, run);
  } else {
    const auto run = [&] {
      naive_rms_norm_backward(p.dy.data(), p.x.data(), p.rms_rstd.data(), p.dx.data(), rows, f, g, grad_gamma.data());
    };
    run();
    check_rows(what + " dx", p.dx.data(), ref.rms_backward.dx, ref, f);
    if (ref.all_rows) {
      check_sums<A>(what + " grad_gamma", grad_gamma, ref.rms_backward.grad_gamma, ref.rms_gamma_terms);
    }
    seconds = timed_loop(state, run);
  }
  report_bytes(state, what, bytes_moved<T>(shape, footprint_of(pass)), copy, seconds);
}

// ---- oneDNN ----------------------------------------------------------------------------------

#ifdef NORMKIT_BENCH_HAVE_ONEDNN

// oneDNN parallelizes over the cores by default; normkit runs on the calling thread. The
// measured condition here is one thread for both. Debian's libdnnl (and most builds) use the
// OpenMP runtime, where the thread count is OpenMP's: we call omp_set_num_threads(1) on the
// benchmark thread before any primitive exists, which is what running with OMP_NUM_THREADS=1
// does. The benchmark is not linked with OpenMP itself, so the function is looked up in the
// libgomp/libomp that libdnnl brought into the process. Returns a description for the context.
inline std::string limit_onednn_threads() {
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

inline std::string onednn_description() {
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

inline OneDnn& onednn() {
  static OneDnn instance;
  return instance;
}

/// oneDNN's name for T's data type: f32 and bf16 have layer normalization in oneDNN 2.x (bf16
/// only on CPUs with AVX-512; see onednn_supports()); double and float16 have none.
template <class T>
constexpr bool onednn_has_type_v = std::is_same_v<T, float> || std::is_same_v<T, normkit::bfloat16>;

template <class T>
constexpr dnnl::memory::data_type onednn_type() {
  return std::is_same_v<T, float> ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::bf16;
}

// Layer normalization over the last dimension of a rows × features tensor, with scale (γ) and
// shift (β) as separate f32 arguments: normalization_flags::use_scale | use_shift (the 2.x
// spelling; use_scale_shift packs both into one array and is deprecated). Statistics are f32.
struct OneDnnDescs {
  dnnl::memory::desc data, stat, param;
  dnnl::normalization_flags flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;

  template <class T>
  static OneDnnDescs make(const Shape& shape) {
    using dnnl::memory;
    const auto rows = static_cast<memory::dim>(shape.rows), f = static_cast<memory::dim>(shape.features);
    return {memory::desc({rows, f}, onednn_type<T>(), memory::format_tag::ab),
            memory::desc({rows}, memory::data_type::f32, memory::format_tag::a),
            memory::desc({f}, memory::data_type::f32, memory::format_tag::a)};
  }
  dnnl::layer_normalization_forward::primitive_desc forward(dnnl::prop_kind kind, const dnnl::engine& engine) const {
    const auto eps = static_cast<float>(kLayerNormEps);
    if (kind == dnnl::prop_kind::forward_inference) return {{kind, data, eps, flags}, engine};
    return {{kind, data, stat, eps, flags}, engine};
  }
  dnnl::layer_normalization_backward::primitive_desc backward(
      const dnnl::engine& engine, const dnnl::layer_normalization_forward::primitive_desc& hint) const {
    return {{dnnl::prop_kind::backward, data, data, stat, static_cast<float>(kLayerNormEps), flags}, engine, hint};
  }
};

/// Whether this oneDNN has every pass for T on this CPU (its bf16 kernels need AVX-512), asked
/// once, on a small shape, before the benchmarks are registered.
template <class T>
bool onednn_supports() {
  try {
    const OneDnnDescs d = OneDnnDescs::make<T>({64, 768});
    const dnnl::engine& engine = onednn().engine;
    d.forward(dnnl::prop_kind::forward_inference, engine);
    d.backward(engine, d.forward(dnnl::prop_kind::forward_training, engine));
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

template <class T>
void bm_onednn(benchmark::State& state, Shape shape, Pass pass) {
  using dnnl::memory;
  Problem<T>& p = problem<T>(shape);
  const double copy = copy_rate(p, footprint_of(pass));
  const ReferenceResults& ref = p.ref();
  OneDnn& dnn = onednn();
  const std::string what = benchmark_name<T>("LayerNorm", pass, shape, "onednn");
  const OneDnnDescs d = OneDnnDescs::make<T>(shape);
  double seconds = 0;

  // oneDNN memory objects wrap our buffers (no copies); γ/β get their own copies because
  // oneDNN takes them as non-const, aligned as normkit's own γ/β are.
  Buffer<float> scale(shape.features), shift(shape.features), diff_scale(shape.features), diff_shift(shape.features);
  std::copy(p.gamma.begin(), p.gamma.end(), scale.data());
  std::copy(p.beta.begin(), p.beta.end(), shift.data());
  std::vector<float> mean(shape.rows), variance(shape.rows);
  memory src(d.data, dnn.engine, p.x.data()), dst(d.data, dnn.engine, p.y.data());
  memory scale_m(d.param, dnn.engine, scale.data()), shift_m(d.param, dnn.engine, shift.data());
  memory mean_m(d.stat, dnn.engine, mean.data()), variance_m(d.stat, dnn.engine, variance.data());
  const auto run = [&](const dnnl::primitive& prim, const std::unordered_map<int, memory>& args) {
    prim.execute(dnn.stream, args);
    dnn.stream.wait();
  };

  if (pass != Pass::backward) {
    // Inference; training also writes each row's mean and variance (oneDNN's statistics).
    const bool training = pass == Pass::training;
    const auto pd = d.forward(training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference,
                              dnn.engine);
    state.SetLabel(std::string("onednn ") + pd.impl_info_str());
    const dnnl::layer_normalization_forward prim(pd);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, scale_m}, {DNNL_ARG_SHIFT, shift_m}};
    if (training) {
      args.emplace(DNNL_ARG_MEAN, mean_m);
      args.emplace(DNNL_ARG_VARIANCE, variance_m);
    }
    run(prim, args);
    check_rows(what, p.y.data(), ref.layer_forward.y, ref, shape.features);
    if (training) {
      std::vector<double> rstd(shape.rows);
      for (std::size_t r = 0; r < shape.rows; ++r) rstd[r] = 1.0 / std::sqrt(variance[r] + kLayerNormEps);
      check_values<float>(what + " mean", mean, ref.layer_forward.mean, ref.rows);
      check_values<double>(what + " 1/sqrt(variance + eps)", rstd, ref.layer_forward.rstd, ref.rows);
    }
    seconds = timed_loop(state, [&] { run(prim, args); });
  } else {
    // Backward needs the training forward's primitive descriptor as a hint, and takes the mean
    // and variance (not rstd) that training forward produced: computed here, untimed.
    const auto fwd_pd = d.forward(dnnl::prop_kind::forward_training, dnn.engine);
    run(dnnl::layer_normalization_forward(fwd_pd), {{DNNL_ARG_SRC, src},       {DNNL_ARG_DST, dst},
                                                    {DNNL_ARG_SCALE, scale_m},   {DNNL_ARG_SHIFT, shift_m},
                                                    {DNNL_ARG_MEAN, mean_m},     {DNNL_ARG_VARIANCE, variance_m}});

    const auto pd = d.backward(dnn.engine, fwd_pd);
    state.SetLabel(std::string("onednn ") + pd.impl_info_str());
    const dnnl::layer_normalization_backward prim(pd);
    memory diff_dst(d.data, dnn.engine, p.dy.data()), diff_src(d.data, dnn.engine, p.dx.data());
    memory diff_scale_m(d.param, dnn.engine, diff_scale.data());
    memory diff_shift_m(d.param, dnn.engine, diff_shift.data());
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},          {DNNL_ARG_MEAN, mean_m},
                                         {DNNL_ARG_VARIANCE, variance_m}, {DNNL_ARG_DIFF_DST, diff_dst},
                                         {DNNL_ARG_SCALE, scale_m},     {DNNL_ARG_SHIFT, shift_m},
                                         {DNNL_ARG_DIFF_SRC, diff_src}, {DNNL_ARG_DIFF_SCALE, diff_scale_m},
                                         {DNNL_ARG_DIFF_SHIFT, diff_shift_m}};
    std::vector<unsigned char> workspace(pd.workspace_desc().get_size());  // none expected; if any
    if (!workspace.empty()) {
      args.emplace(DNNL_ARG_WORKSPACE, memory(pd.workspace_desc(), dnn.engine, workspace.data()));
    }
    run(prim, args);
    check_rows(what + " dx", p.dx.data(), ref.layer_backward.dx, ref, shape.features);
    if (ref.all_rows) {  // oneDNN overwrites diff_scale/diff_shift rather than adding
      check_sums<float>(what + " diff_scale", diff_scale.span(), ref.layer_backward.grad_gamma, ref.layer_gamma_terms);
      check_sums<float>(what + " diff_shift", diff_shift.span(), ref.layer_backward.grad_beta, ref.layer_beta_terms);
    }
    seconds = timed_loop(state, [&] { run(prim, args); });
  }
  report_bytes(state, what, bytes_moved<T>(shape, footprint_of(pass)), copy, seconds);
}

#endif  // NORMKIT_BENCH_HAVE_ONEDNN

// ---- registration ----------------------------------------------------------------------------

// Cache-resident to DRAM-sized, each a different working set so that a chart of throughput
// against size has one point per shape: 1x768 is one token of a 768-wide model (latency-bound),
// 32x768 a small batch of them; 4096x64 small rows; 4096x768 and 32768x768 BERT/GPT-2 widths in
// cache and in DRAM; 1024x4096 and 8192x4096 LLaMA-7B widths; 512x16384 long rows.
inline constexpr Shape kShapes[] = {{1, 768},    {32, 768},    {4096, 64},   {4096, 768},
                                    {1024, 4096}, {512, 16384}, {32768, 768}, {8192, 4096}};

inline benchmark::internal::Benchmark* configure(benchmark::internal::Benchmark* b) {
  return b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

template <class T>
void register_shape(const Shape& shape, bool with_onednn) {
  // The copies first: their rates are then measured before any kernel of the shape runs.
  for (Footprint footprint : {Footprint::forward, Footprint::backward}) {
    const std::string name = copy_name(footprint, type_name<T>(), shape);
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
      const std::string naive = benchmark_name<T>(name_of(norm), pass, shape, "naive");
      configure(benchmark::RegisterBenchmark(naive.c_str(), [shape, norm, pass](benchmark::State& state) {
        bm_naive<T>(state, shape, norm, pass);
      }));
#ifdef NORMKIT_BENCH_HAVE_ONEDNN
      if constexpr (onednn_has_type_v<T>) {
        if (with_onednn && norm == Norm::layer) {  // oneDNN has no RMSNorm primitive in 2.x
          const std::string dnn = benchmark_name<T>(name_of(norm), pass, shape, "onednn");
          configure(benchmark::RegisterBenchmark(dnn.c_str(), [shape, pass](benchmark::State& state) {
            bm_onednn<T>(state, shape, pass);
          }));
        }
      }
#endif
    }
  }
}

template <class T>
void register_type(std::span<const Shape> shapes) {
#ifdef NORMKIT_BENCH_HAVE_ONEDNN
  bool with_onednn = false;
  if constexpr (onednn_has_type_v<T>) with_onednn = onednn_supports<T>();
#else
  const bool with_onednn = false;
#endif
  for (const Shape& shape : shapes) register_shape<T>(shape, with_onednn);
}

}  // namespace normkit_bench
