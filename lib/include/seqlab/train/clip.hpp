#pragma once
// Gradient norm and clipping by the global norm, as torch.nn.utils.clip_grad_norm_ (PyTorch 1.13,
// norm_type = 2, error_if_nonfinite = False): one norm over all parameters together, not per
// tensor.
#include <vector>

#include "seqlab/nn/parameter.hpp"

namespace seqlab {

/// sqrt(Σ_p Σ_i grad_p[i]²) over all parameters, accumulated in double. 0 for an empty list.
/// NaN if any gradient is NaN; +Inf if any is ±Inf (and none is NaN) or the sum overflows double.
/// Throws std::invalid_argument for a null pointer in `params`.
double global_grad_norm(const std::vector<Parameter*>& params);

/// torch.nn.utils.clip_grad_norm_(params, max_norm): computes n = global_grad_norm(params); if
/// c = max_norm / (n + 1e-6) < 1, multiplies every gradient by c (so the new norm is just below
/// max_norm); otherwise leaves the gradients unchanged. Returns n, the norm BEFORE clipping.
/// If n is NaN or Inf it is returned and nothing is changed (the caller treats it as divergence;
/// PyTorch would multiply the gradients by NaN). `max_norm` must be >= 0 and not NaN
/// (std::invalid_argument naming the value); max_norm = 0 zeroes the gradients as PyTorch does.
double clip_grad_norm(const std::vector<Parameter*>& params, double max_norm);

}  // namespace seqlab
