// normkit_bench: throughput of normkit's LayerNorm and RMSNorm, forward (inference and
// training) and backward, in float, double, bfloat16 and float16, on every instruction set this
// CPU supports, next to a plain copy of the same bytes, a naive loop, and oneDNN's layer
// normalization when it is installed; then a summary table of normkit against those.
//
// Benchmark names are <what>/<pass>/<type>/<rows>x<features>/<implementation>, e.g.
//   LayerNorm/forward/f32/4096x768/avx512    normkit on AVX-512 (one row per supported ISA)
//   LayerNorm/forward/f32/4096x768/naive     the loop one writes without a library
//   LayerNorm/forward/f32/4096x768/onednn    oneDNN, single thread (f32, and bf16 where it can)
//   copy/forward/f32/4096x768                memcpy of x into y: the bytes of a forward pass
//   copy/backward/f32/4096x768               dx = x + dy: the bytes of a backward pass
// Passes: `forward` is inference; `training` also writes each row's mean and rstd; `backward`
// writes dx and adds the γ (and β) gradients. Types: f32, f64, bf16, f16. Every row's label is
// its implementation: the instruction set for normkit.
//
// Reading the numbers:
// - bytes_per_second counts the tensor traffic: forward reads x and writes y; backward reads x
//   and dy and writes dx (the per-row statistics and the per-feature γ/β are not counted), with
//   the element's own size (2 bytes for bf16 and f16).
// - `roofline` is that rate divided by the copy rate of the same footprint at the same shape,
//   measured in the same run on the same buffers (see copy_rate() in bench_support.hpp): 1.0
//   means "as fast as moving the bytes". The copy rate is the best of five short windows, so
//   noise lowers rooflines rather than inflating them. Small shapes live in cache, large ones
//   (32768x768, 8192x4096: 96 and 128 MiB per float array) in DRAM on most machines. glibc's
//   memcpy switches to non-temporal stores (no read-for-ownership of y) above a size threshold
//   (x86_non_temporal_threshold, about 3/4 of the last-level cache per thread), which an
//   ordinary store loop cannot match: above it, forward rooflines near 2/3 already mean
//   "memory-bound".
// - Every row is wall-clock time (UseRealTime) of one thread. oneDNN is limited to one thread
//   too (see limit_onednn_threads() in benchmarks.hpp).
// - Before timing, every implementation's result on the benchmark's own data is compared with
//   normkit::reference (double precision); a mismatch above 1e-4 (plus the rounding to a 16-bit
//   output) ends the program with an error.
//
// Running: by default the curated set (kCurated: about 200 benchmarks, under two minutes), each
// benchmark for --benchmark_min_time=0.05 unless that flag or BENCHMARK_MIN_TIME is given. The
// full matrix (8 shapes x 4 types) with --all or NORMKIT_BENCH_ALL=1; a --benchmark_filter
// selects from the full matrix, e.g.
//   normkit_bench --benchmark_filter='LayerNorm/forward/f32/.*'   (one pass, all shapes)
//   normkit_bench --benchmark_filter='/4096x768/'                   (one shape, everything)
// --shapes=RxF[,RxF...] replaces the matrix's shapes with your own, e.g. your model's widths.
// At the end the summary (print_summary() in summary.hpp) gives one line per pass, type and
// shape: normkit on the instruction set it picks here, its GiB/s and roofline, and its speed-up
// over each peer; on stdout, or stderr when --benchmark_format makes stdout JSON or CSV.
// bench/plot.py draws the JSON output (--benchmark_out=FILE --benchmark_out_format=json).
// Benchmarks are registered grouped by shape because each shape's data is built once and
// shared by the benchmarks that follow; --benchmark_enable_random_interleaving works but
// rebuilds data often.

#include "benchmarks.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace normkit_bench {
namespace {

// The default run, when neither --benchmark_filter nor --all is given: float at one shape per
// level of the memory hierarchy (L1, L2, last-level cache, DRAM on most machines) and the
// other types at one cache-resident shape, every pass, instruction set and peer of each. About
// 200 benchmarks: well under two minutes on two cores, including each shape's setup.
struct Selected {
  const char* type;
  Shape shape;
};
constexpr Selected kCurated[] = {{"f32", {1, 768}},    {"f32", {32, 768}},  {"f32", {4096, 768}},
                                 {"f32", {8192, 4096}}, {"f64", {4096, 768}}, {"bf16", {4096, 768}},
                                 {"f16", {4096, 768}}};

/// The curated set as a --benchmark_filter: names are <what>/<pass>/<type>/<shape>[/...].
std::string curated_filter() {
  std::string filter("^[^/]+/[^/]+/(");
  for (const Selected& s : kCurated) {
    if (&s != kCurated) filter += '|';
    filter.append(s.type).append("/").append(s.shape.name());
  }
  return filter.append(")(/|$)");
}

// The order of registration is the order of the run and of the summary.
void register_all(std::span<const Shape> shapes) {
  register_type<float>(shapes);
  register_type<double>(shapes);
  register_type<normkit::bfloat16>(shapes);
  register_type<normkit::float16>(shapes);
}

/// The shapes of --shapes=RxF[,RxF...], or nothing (with a message) if the list is empty or
/// an item is not two positive numbers whose product fits a size_t.
std::vector<Shape> parse_shapes(std::string_view list) {
  const auto number = [](std::string_view digits, std::size_t& out) {
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return error == std::errc() && end == digits.data() + digits.size() && out > 0;
  };
  std::vector<Shape> shapes;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view item = list.substr(start, comma - start);
    start = comma + 1;
    const std::size_t x = item.find('x');
    Shape shape{};
    if (x == std::string_view::npos || !number(item.substr(0, x), shape.rows) ||
        !number(item.substr(x + 1), shape.features) || shape.features > SIZE_MAX / shape.rows) {
      std::fprintf(stderr, "normkit_bench: --shapes wants <rows>x<features>[,...] of positive numbers, not '%.*s'\n",
                   static_cast<int>(item.size()), item.data());
      return {};
    }
    shapes.push_back(shape);
  }
  return shapes;
}

// ---- command line ----------------------------------------------------------------------------

/// Whether one of the arguments is --<flag> or --<flag>=..., or the environment sets it the way
/// Google Benchmark reads its flags from there (BENCHMARK_FILTER for --benchmark_filter).
bool flag_given(const std::vector<char*>& args, std::string_view flag) {
  std::string env;
  for (char c : flag) env += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (std::getenv(env.c_str()) != nullptr) return true;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string_view arg(args[i]);
    if (arg.substr(0, 2) == "--" && arg.substr(2).starts_with(flag) &&
        (arg.size() == flag.size() + 2 || arg[flag.size() + 2] == '=')) {
      return true;
    }
  }
  return false;
}

/// The value of --benchmark_format (or BENCHMARK_FORMAT): where the summary can go depends on it.
std::string_view display_format(const std::vector<char*>& args) {
  std::string_view format = "console";
  if (const char* env = std::getenv("BENCHMARK_FORMAT")) format = env;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string_view arg(args[i]);
    if (arg.starts_with("--benchmark_format=")) format = arg.substr(std::string_view("--benchmark_format=").size());
  }
  return format;
}

void print_help() {
  std::printf(
      "normkit_bench: LayerNorm and RMSNorm throughput next to a copy, a naive loop and oneDNN,\n"
      "then a summary table. Benchmark names:\n"
      "  <LayerNorm|RMSNorm|copy>/<forward|training|backward>/<f32|f64|bf16|f16>/<rows>x<features>/<impl>\n"
      "By default the curated set runs: %zu (type, shape) pairs, every pass, instruction set and peer.\n"
      "  --all                  the full matrix instead: %zu shapes x 4 types (or NORMKIT_BENCH_ALL=1)\n"
      "  --benchmark_filter=RE  the benchmarks of the full matrix whose names match RE\n"
      "  --shapes=RxF[,RxF...]  the full matrix over these shapes instead of the built-in ones\n\n",
      std::size(kCurated), std::size(kShapes));
  benchmark::PrintDefaultHelp();
}

}  // namespace
}  // namespace normkit_bench

int main(int argc, char** argv) {
  using namespace normkit_bench;
  std::vector<char*> args(argv, argv + argc);
  const std::ptrdiff_t first_flag = argc > 0 ? 1 : 0;  // after the program name

  // --all is normkit_bench's own flag: taken out before Google Benchmark sees the arguments.
  const char* all_env = std::getenv("NORMKIT_BENCH_ALL");
  bool all = all_env != nullptr && *all_env != '\0' && std::string_view(all_env) != "0";
  const auto all_flag = std::find_if(args.begin() + first_flag, args.end(),
                                     [](const char* a) { return std::string_view(a) == "--all"; });
  if (all_flag != args.end()) {
    all = true;
    args.erase(all_flag);
  }
  // So is --shapes, which implies the full matrix: the curated set names the built-in shapes.
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  const char* shapes_arg = nullptr;
  const auto shapes_flag = std::find_if(args.begin() + first_flag, args.end(),
                                        [](const char* a) { return std::string_view(a).starts_with("--shapes="); });
  if (shapes_flag != args.end()) {
    shapes_arg = *shapes_flag + std::string_view("--shapes=").size();
    shapes = parse_shapes(shapes_arg);
    if (shapes.empty()) return 1;
    all = true;
    args.erase(shapes_flag);
  }
  // A short run: unless the user chose a minimum time, each benchmark runs for 0.05 s. And the
  // curated set, unless the user chose what to run.
  std::string default_min_time = "--benchmark_min_time=0.05";
  std::string default_filter = "--benchmark_filter=" + curated_filter();
  const bool filter_given = flag_given(args, "benchmark_filter");
  if (!flag_given(args, "benchmark_min_time")) args.insert(args.begin() + first_flag, default_min_time.data());
  if (!all && !filter_given) args.insert(args.begin() + first_flag, default_filter.data());
  // JSON or CSV on stdout must stay parseable: the summary then goes to stderr.
  std::ostream& summary_out = display_format(args) == "console" ? std::cout : std::cerr;
  int count = static_cast<int>(args.size());
  args.push_back(nullptr);

  std::string isas;
  std::vector<std::string_view> isa_names;
  for (normkit::isa which : normkit::supported_isas()) {
    if (!isas.empty()) isas += ' ';
    isas += normkit::to_string(which);
    isa_names.push_back(normkit::to_string(which));
  }
  const std::string_view default_isa = normkit::to_string(normkit::active_isa());
  benchmark::AddCustomContext("normkit_isas", isas);
  benchmark::AddCustomContext("normkit_default_isa", std::string(default_isa));
  benchmark::AddCustomContext("normkit_selection", filter_given ? "--benchmark_filter over the full matrix"
                                                   : all        ? "the full matrix"
                                                                : "the curated set (--all for the full matrix)");
  benchmark::AddCustomContext("normkit_shapes", shapes_arg != nullptr ? shapes_arg : "built-in");
#ifdef NORMKIT_BENCH_HAVE_ONEDNN
  benchmark::AddCustomContext("onednn_threads", limit_onednn_threads());
  benchmark::AddCustomContext("onednn", onednn_description());
#else
  benchmark::AddCustomContext("onednn", "not built in (NORMKIT_BENCH_HAVE_ONEDNN undefined)");
#endif

  register_all(shapes);
  benchmark::Initialize(&count, args.data(), print_help);
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  print_summary(summary_out, default_isa, isa_names);
  benchmark::Shutdown();
  return 0;
}
