// train_affine: learning LayerNorm's γ and β by gradient descent, with normkit's backward pass.
//
// The toy problem: a "teacher" LayerNorm with known parameters γ*, β* produces targets
// t = γ* ⊙ x̂ + β*, where x̂ is the normalized input. A "student" LayerNorm starts at γ = 1,
// β = 0 and learns from (x, t) pairs alone by minimizing the squared error. Since the model can
// represent the target exactly, the loss should fall towards 0 and γ, β towards γ*, β*.
//
// The training loop is the one you would write around normkit in your own code:
//   1. training forward: y = norm(x), also saving each row's mean and rstd for backward
//   2. the loss and its gradient dy = ∂loss/∂y (here by hand; an autograd system does this)
//   3. backward: normkit ADDS ∂loss/∂γ and ∂loss/∂β into grad_gamma() and grad_beta()
//   4. the optimizer step on gamma()/beta(), then zero_grad() for the next step
// Step 3 adding (not overwriting) is what lets us split a batch into micro-batches and call
// backward once per micro-batch: the gradients accumulate, as in PyTorch.
//
// Exits non-zero if training does not converge.

#include <normkit/normkit.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace {

// Deterministic pseudo-random numbers (splitmix64), uniform in [-1, 1).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
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

}  // namespace

int main() {
  constexpr std::size_t features = 16;
  constexpr std::size_t rows = 512;              // training examples
  constexpr std::size_t micro_batches = 4;       // backward is called once per micro-batch
  constexpr std::size_t micro_rows = rows / micro_batches;
  constexpr int steps = 40;
  constexpr float learning_rate = 0.5f;

  Rng rng(2024);

  // Inputs: rows with different offsets and spreads; LayerNorm removes both.
  std::vector<float> x(rows * features);
  for (std::size_t r = 0; r < rows; ++r) {
    const float offset = 5.0f * rng.uniform(), spread = 2.0f + rng.uniform();
    for (std::size_t j = 0; j < features; ++j) x[r * features + j] = offset + spread * rng.uniform();
  }

  // The teacher: γ*, β* written straight into its parameter spans (this is also how you would
  // load trained weights). Its output is the regression target.
  normkit::LayerNorm<float> teacher(features);
  for (float& g : teacher.gamma()) g = 1.0f + 1.5f * rng.uniform();
  for (float& b : teacher.beta()) b = rng.uniform();
  std::vector<float> target(x.size());
  teacher(x, target);

  // The student starts from the defaults, γ = 1 and β = 0.
  normkit::LayerNorm<float> student(features);

  // Buffers for one micro-batch: the output, dy, and the per-row mean and rstd that training
  // forward saves for backward (one value per row, in accum_type, float here).
  std::vector<float> y(micro_rows * features), dy(micro_rows * features);
  std::vector<float> mean(micro_rows), rstd(micro_rows);

  std::printf("learning gamma and beta of LayerNorm<float>(%zu) from %zu examples, ISA %s\n\n", features,
              rows, std::string(normkit::to_string(normkit::active_isa())).c_str());
  std::printf("step          loss   max|gamma - gamma*|   max|beta - beta*|\n");

  auto max_distance = [](std::span<const float> a, std::span<const float> b) {
    double d = 0;
    for (std::size_t j = 0; j < a.size(); ++j) d = std::fmax(d, std::fabs(static_cast<double>(a[j] - b[j])));
    return d;
  };

  double first_loss = 0, loss = 0;
  for (int step = 0; step <= steps; ++step) {
    student.zero_grad();  // backward adds into the gradients, so clear them once per step
    loss = 0;
    for (std::size_t m = 0; m < micro_batches; ++m) {
      const std::size_t first = m * micro_rows * features;
      const std::span<const float> xm = std::span<const float>(x).subspan(first, y.size());
      const std::span<const float> tm = std::span<const float>(target).subspan(first, y.size());

      // 1. Training forward: the 4-argument overload also fills mean and rstd.
      student.forward(xm, y, mean, rstd);

      // 2. loss = ½ Σ_features (y − t)², averaged over the examples of the whole batch, so
      //    ∂loss/∂y = (y − t) / rows. Dividing by the whole batch's rows (not the
      //    micro-batch's) makes the accumulated gradient equal to the full batch's gradient.
      const double n = static_cast<double>(rows);
      for (std::size_t i = 0; i < y.size(); ++i) {
        const float diff = y[i] - tm[i];
        loss += 0.5 * static_cast<double>(diff) * diff / n;
        dy[i] = static_cast<float>(diff / n);
      }

      // 3. Backward, with the same x and the mean/rstd forward saved. The last argument is dx,
      //    the gradient for the layer below; our x is data, not a learned value, so we pass an
      //    empty span and normkit skips computing it. (In a network you would pass a buffer and
      //    hand dx to the previous layer's backward.)
      student.backward(dy, xm, mean, rstd, {});
    }
    if (step == 0) first_loss = loss;
    if (step % 5 == 0) {
      const double gamma_distance = max_distance(student.gamma(), teacher.gamma());
      const double beta_distance = max_distance(student.beta(), teacher.beta());
      std::printf("%4d  %12.4e   %18.3e   %17.3e\n", step, loss, gamma_distance, beta_distance);
    }
    if (step == steps) break;  // report the final loss; no further update

    // 4. Plain gradient descent on the parameter spans.
    for (std::size_t j = 0; j < features; ++j) {
      student.gamma()[j] -= learning_rate * student.grad_gamma()[j];
      student.beta()[j] -= learning_rate * student.grad_beta()[j];
    }
  }

  // The problem is a linear least-squares fit per feature, so gradient descent converges
  // geometrically: by the end γ and β match the teacher's to float precision. The bounds
  // below leave a wide margin.
  const double gamma_error = max_distance(student.gamma(), teacher.gamma());
  const double beta_error = max_distance(student.beta(), teacher.beta());
  int failures = 0;
  if (!(loss < 1e-6 * first_loss)) {
    std::printf("FAILED: the loss fell only from %.4e to %.4e\n", first_loss, loss);
    ++failures;
  }
  if (!(gamma_error < 1e-3 && beta_error < 1e-3)) {
    std::printf("FAILED: gamma/beta are %.3e / %.3e from gamma*/beta*\n", gamma_error, beta_error);
    ++failures;
  }
  std::printf("\nfeature  gamma*  learned   beta*  learned\n");
  for (std::size_t j = 0; j < 4; ++j) {
    std::printf("%7zu  %6.3f  %7.3f  %6.3f  %7.3f\n", j, static_cast<double>(teacher.gamma()[j]),
                static_cast<double>(student.gamma()[j]), static_cast<double>(teacher.beta()[j]),
                static_cast<double>(student.beta()[j]));
  }
  if (failures != 0) return 1;
  std::printf("\nconverged: loss %.3e -> %.3e\n", first_loss, loss);
  return 0;
}
