#pragma once
// Learning-rate schedules: constant, linear warm-up + cosine decay, linear warm-up + inverse-sqrt.
//
// Step convention: `step` is the 0-based index of the optimizer update about to be made (the
// training loop calls lr_at(0) for its first update). Write t = step + 1 (the number of updates
// made once this one is done), W = warmup_steps, N = total_steps, η = base_lr, η_min = min_lr.
//
//   warm-up (every kind, when W > 0 and t <= W):   lr = η · t / W
//       (step 0 gets η/W, step W−1 gets η: linear from η/W to η over W updates)
//   after warm-up (t > W, or W = 0):
//     constant:      lr = η
//     cosine:        lr = η_min + ½(η − η_min)(1 + cos(π·(t − W)/(N − W + 1)))  for t <= N,
//                    lr = η_min for t > N (updates beyond the planned N).
//                    This is the closed form of torch.optim.lr_scheduler.CosineAnnealingLR
//                    (PyTorch 1.13 docs; Loshchilov & Hutter 2017, SGDR eq. 5, one cycle) with
//                    T_cur = t − W updates since the end of warm-up and T_max = N − W + 1:
//                    T_cur = 0 is the warm-up's last update (at η; with W = 0, a virtual update
//                    before the first), and T_cur = T_max, where the rate reaches η_min, would be
//                    the update after the last. So every update of the phase moves the
//                    parameters, the last one (t = N) with η_min + ½(η − η_min)(1 − cos(π/T_max))
//                    > η_min, also when η_min = 0 (with T_max = N − W the last update would use
//                    η_min: a no-op for η_min = 0).
//     inverse_sqrt:  lr = η · sqrt(W / t). With the warm-up this is η·min(t/W, sqrt(W/t)), the form
//                    of Vaswani et al. 2017 eq. 3 (there η = d_model^-0.5 · W^-0.5, steps from 1).
// Both cosine and inverse_sqrt equal η at t = W, so the curve is continuous.
// Example: cosine, η = 1, η_min = 0, W = 0, N = 4: steps 0..3 get ½(1 + cos(kπ/5)), k = 1..4:
// 0.905, 0.655, 0.345, 0.095.
#include <string>

namespace seqlab {

struct LrSchedule {
  std::string kind = "constant";  // constant | cosine | inverse_sqrt
  float base_lr = 1e-3f;          // η: peak learning rate, > 0
  int warmup_steps = 0;           // W >= 0 (>= 1 for inverse_sqrt)
  int total_steps = 0;            // N: cosine only, N >= W and N >= 1; ignored otherwise
  float min_lr = 0;               // η_min: cosine only, 0 <= η_min <= η

  /// Learning rate for the update with 0-based index `step` (formulas above). Throws
  /// std::invalid_argument for step < 0 or an invalid schedule (see validate()).
  float lr_at(int step) const;

  /// Throws std::invalid_argument naming the field, its value and what is allowed:
  /// kind not one of constant|cosine|inverse_sqrt; base_lr not finite or <= 0; warmup_steps < 0;
  /// inverse_sqrt with warmup_steps < 1; cosine with total_steps < 1 or total_steps < warmup_steps;
  /// cosine with min_lr not finite, < 0 or > base_lr.
  void validate() const;
};

}  // namespace seqlab
