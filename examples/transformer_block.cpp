// transformer_block: where LayerNorm and RMSNorm sit in a transformer, on the CPU.
//
// A pre-LN block (GPT-2 and most models since) normalizes *before* each sublayer and adds the
// sublayer's output back to the unnormalized stream:
//
//     h   = x + Attention(Norm1(x))
//     out = h + MLP(Norm2(h))
//
// The residual stream x/h is never normalized itself; its scale can grow from block to block,
// and the norms keep what each sublayer sees at a fixed scale. We run this block twice, once
// with LayerNorm (GPT-2) and once with RMSNorm (LLaMA, which drops LayerNorm's mean
// subtraction and β: cheaper, and works as well in practice).
//
// Then the point of this example: LayerNorm and RMSNorm compute each token's statistics from
// that token's own features only (unlike BatchNorm, which averages over the batch). So a token
// gives bit-for-bit the same output whether it is run alone or as one row of a batch of 64;
// an inference server can batch requests together without changing anyone's answer. We check
// exactly that, with memcmp, and exit non-zero if it does not hold.
//
// The matrices are small and random (this is about data flow, not about a trained model), and
// the matrix products are plain loops, so the whole program runs in well under a second.

#include <normkit/normkit.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kHidden = 768;   // GPT-2 small / BERT-base width
constexpr std::size_t kHeadDim = 64;   // one attention head
constexpr std::size_t kMlpDim = 256;   // real models use 4 * hidden; smaller keeps this fast
constexpr std::size_t kBatch = 64;     // tokens processed together

// Deterministic pseudo-random numbers (splitmix64): the same on every platform and standard
// library, unlike std::uniform_real_distribution, so the printed numbers are reproducible.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  // Uniform in [-1, 1).
  float uniform() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    return static_cast<float>(static_cast<double>(z >> 40) * 0x1p-23 - 1.0);
  }

 private:
  std::uint64_t state_;
};

// y = x W + b for one row: x has `in` values, y gets `out` values. W is stored [in][out] so the
// inner loop runs over contiguous memory. Each row is computed on its own, in the same order
// whatever the batch size, so it cannot make a row depend on its neighbours.
struct Linear {
  std::size_t in, out;
  std::vector<float> w, b;

  Linear(std::size_t in_features, std::size_t out_features, Rng& rng)
      : in(in_features), out(out_features), w(in_features * out_features), b(out_features) {
    // Uniform in ±sqrt(3 / in) has variance 1 / in, so outputs keep about the scale of inputs.
    const float scale = std::sqrt(3.0f / static_cast<float>(in));
    for (float& v : w) v = scale * rng.uniform();
    for (float& v : b) v = 0.1f * rng.uniform();
  }

  void apply(const float* x, float* y) const {
    for (std::size_t j = 0; j < out; ++j) y[j] = b[j];
    for (std::size_t k = 0; k < in; ++k) {
      const float xk = x[k];
      const float* wk = &w[k * out];
      for (std::size_t j = 0; j < out; ++j) y[j] += xk * wk[j];
    }
  }
};

// GELU, the MLP activation of GPT-2 and BERT (exact form with erf).
float gelu(float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678f)); }

// Trained norms do not have γ = 1, β = 0; give them plausible values so that the affine part
// of the norm is exercised too. The parameters are spans into the norm object.
void randomize_parameters(normkit::LayerNorm<float>& norm, Rng& rng) {
  for (float& g : norm.gamma()) g = 1.0f + 0.2f * rng.uniform();
  for (float& b : norm.beta()) b = 0.1f * rng.uniform();
}
void randomize_parameters(normkit::RMSNorm<float>& norm, Rng& rng) {  // RMSNorm has no β
  for (float& g : norm.gamma()) g = 1.0f + 0.2f * rng.uniform();
}

// One pre-norm transformer block. Norm is normkit::LayerNorm<float> or normkit::RMSNorm<float>.
template <class Norm>
class Block {
 public:
  explicit Block(std::uint64_t seed)
      : rng_(seed),
        norm1_(kHidden),
        norm2_(kHidden),
        value_(kHidden, kHeadDim, rng_),
        output_(kHeadDim, kHidden, rng_),
        up_(kHidden, kMlpDim, rng_),
        down_(kMlpDim, kHidden, rng_) {
    randomize_parameters(norm1_, rng_);
    randomize_parameters(norm2_, rng_);
  }

  // x: tokens × kHidden values, row-major. Returns the block's output, same shape.
  std::vector<float> forward(std::span<const float> x) const {
    const std::size_t tokens = x.size() / kHidden;
    std::vector<float> normed(x.size()), h(x.size()), out(x.size());
    std::vector<float> head(kHeadDim), mlp(kMlpDim), sub(kHidden);

    // h = x + Attention(Norm1(x)). One normkit call normalizes all rows at once.
    norm1_(x, normed);
    for (std::size_t t = 0; t < tokens; ++t) {
      // Attention stand-in. Think of each row as its own sequence of one token (say, the first
      // token of 64 different requests). Attention over a single position puts softmax weight
      // exactly 1 on that position, so queries and keys drop out and attention is exactly
      // W_o(W_v x): a value projection into one head and the output projection back.
      // (Real attention mixing tokens of one sequence would be a different example.)
      value_.apply(&normed[t * kHidden], head.data());
      output_.apply(head.data(), sub.data());
      for (std::size_t j = 0; j < kHidden; ++j) h[t * kHidden + j] = x[t * kHidden + j] + sub[j];
    }

    // out = h + MLP(Norm2(h)), the MLP being up-projection, GELU, down-projection.
    norm2_(h, normed);
    for (std::size_t t = 0; t < tokens; ++t) {
      up_.apply(&normed[t * kHidden], mlp.data());
      for (float& v : mlp) v = gelu(v);
      down_.apply(mlp.data(), sub.data());
      for (std::size_t j = 0; j < kHidden; ++j) out[t * kHidden + j] = h[t * kHidden + j] + sub[j];
    }
    return out;
  }

 private:
  Rng rng_;  // declared first: the members below draw their weights from it in this order
  Norm norm1_, norm2_;
  Linear value_, output_, up_, down_;
};

// Runs the block on a batch of kBatch tokens, and again on single tokens taken from that batch,
// and compares bit for bit. Returns the number of failed checks.
template <class Norm>
int run(const char* title, const std::vector<float>& batch) {
  const Block<Norm> block(/*seed=*/42);
  const std::vector<float> out = block.forward(batch);

  double max_abs = 0, sum_sq = 0;
  bool finite = true;
  for (float v : out) {
    finite = finite && std::isfinite(v);
    max_abs = std::fmax(max_abs, std::fabs(static_cast<double>(v)));
    sum_sq += static_cast<double>(v) * v;
  }
  std::printf("%s\n", title);
  std::printf("  batch of %zu tokens x %zu: output rms %.4f, max |value| %.4f\n", kBatch, kHidden,
              std::sqrt(sum_sq / static_cast<double>(out.size())), max_abs);
  std::printf("  token 0, first values: %.6f %.6f %.6f %.6f\n", static_cast<double>(out[0]),
              static_cast<double>(out[1]), static_cast<double>(out[2]), static_cast<double>(out[3]));
  int failures = finite ? 0 : 1;
  if (!finite) std::printf("  FAILED: the output has NaN or Inf\n");

  for (std::size_t t : {std::size_t{0}, std::size_t{1}, std::size_t{37}, kBatch - 1}) {
    const std::span<const float> token = std::span<const float>(batch).subspan(t * kHidden, kHidden);
    const std::vector<float> alone = block.forward(token);  // a batch of one
    const bool same = std::memcmp(alone.data(), &out[t * kHidden], kHidden * sizeof(float)) == 0;
    std::printf("  token %2zu alone == row %2zu of the batch of %zu: %s\n", t, t, kBatch,
                same ? "bitwise identical" : "DIFFERENT");
    if (!same) ++failures;
  }
  return failures;
}

}  // namespace

int main() {
  // Token embeddings with the uneven scales real activations have: every token gets its own
  // offset and spread, and a few features are large outliers.
  Rng rng(7);
  std::vector<float> batch(kBatch * kHidden);
  for (std::size_t t = 0; t < kBatch; ++t) {
    const float offset = 0.5f * rng.uniform(), spread = 1.5f + rng.uniform();
    for (std::size_t j = 0; j < kHidden; ++j) {
      const float outlier = (j % 97 == 3) ? 8.0f : 1.0f;
      batch[t * kHidden + j] = offset + spread * outlier * rng.uniform();
    }
  }

  std::printf("pre-norm transformer block, hidden %zu, normkit ISA %s\n\n", kHidden,
              std::string(normkit::to_string(normkit::active_isa())).c_str());
  int failures = 0;
  failures += run<normkit::LayerNorm<float>>("LayerNorm block (GPT-2 style)", batch);
  failures += run<normkit::RMSNorm<float>>("RMSNorm block (LLaMA style)", batch);

  if (failures != 0) {
    std::printf("\n%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("\nall checks passed: a token's result does not depend on the batch it is in\n");
  return 0;
}
