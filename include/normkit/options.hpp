// Construction options of LayerNorm and RMSNorm, with PyTorch's defaults.
#pragma once

namespace normkit {

struct LayerNormOptions {
  double eps = 1e-5;                ///< added to the variance; finite and >= 0
  bool elementwise_affine = true;   ///< learnable γ (and β, see bias)
  bool bias = true;                 ///< learnable β; only with elementwise_affine
};

struct RMSNormOptions {
  double eps = 1e-6;                ///< added to the mean square; finite and >= 0
  bool elementwise_affine = true;   ///< learnable γ
};

}  // namespace normkit
