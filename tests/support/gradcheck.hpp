#pragma once
// Finite-difference gradient check harness (the "fake loss" of llm.c's doc/layernorm, mlpack's
// JacobianTest): L = Σ w ⊙ y with random fixed w, so even a normalising layer (whose Σ y is
// constant) has a non-trivial gradient.
//
// Layers compute in float32, so the numeric derivative is a central difference in float with the
// loss accumulated in double. Its error is about eps²·|f'''|/6 (truncation) plus
// ~1e-7·|L|/eps (float rounding of y), which for eps = 1e-2 and the O(1) activations of these tests
// stays below ~1e-3; a wrong backward is off by O(1). Hence defaults rtol 1e-2, atol 2e-3 on
// |numeric - analytic| <= atol + rtol·|numeric|.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace seqlab::test {

/// One tensor to perturb: `value` points at its data (an input or a parameter), `grad` at where
/// the analytic gradient of the same shape is after `backward` ran. `n` elements.
struct Probe {
  std::string name;
  float* value;
  const float* grad;
  std::size_t n;
};

struct GradCheckOptions {
  double eps = 1e-2;
  double rtol = 1e-2;
  double atol = 2e-3;
  unsigned long long seed = 1234;  // for w
  std::size_t max_elements_per_probe = 0;  // 0: all; else a deterministic subset (large layers)
};

struct GradCheckResult {
  bool ok = true;
  std::size_t checked = 0;
  double max_abs_err = 0.0;
  std::string worst;   // "probe[index]: numeric=…, analytic=…"
  std::string report;  // every failing element (first 20)
};

/// `forward()` runs the layer from the current inputs and parameters and returns y flattened.
/// `backward(dy)` must: zero the parameter grads, run forward again, run backward with dy, and
/// leave the analytic gradients where the probes' `grad` pointers look (input gradients in buffers
/// the caller owns). Probes' `value` data is perturbed in place and restored.
GradCheckResult check_gradients(const std::function<std::vector<float>()>& forward,
                                const std::function<void(const std::vector<float>& dy)>& backward,
                                const std::vector<Probe>& probes, const GradCheckOptions& opt = {});

}  // namespace seqlab::test
