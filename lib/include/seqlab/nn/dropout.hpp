#pragma once
// Inverted dropout, as torch.nn.Dropout (https://pytorch.org/docs/1.13/generated/torch.nn.Dropout.html).
// Srivastava et al. 2014 (JMLR 15, §4) keep a unit with probability 1−p (p here is the drop
// probability, as PyTorch's) and scale the weights at test time; PyTorch, and seqlab, scale the
// kept units by 1/(1−p) at training time instead, so evaluation is the identity.
//
// train mode: y = x ⊙ m, m_i = 1/(1−p) with probability 1−p, else 0 (drawn independently per
//             element from this layer's own seqlab::Rng, in row-major order: element i is dropped
//             iff the i-th uniform() draw is < p).
// eval mode (or p = 0): y = x, no numbers are drawn.
// Successive train-mode forwards draw fresh masks from the same stream, so a run is deterministic
// given the seed. freeze_mask(true) makes forwards reuse the last mask (gradient checks).
// Works on any rank 1..4 (explicitly instantiated); shapes are unchanged.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/parameter.hpp"

namespace seqlab {

class Dropout : public Module {
 public:
  /// p: probability of zeroing an element, in [0, 1). seed: seeds this layer's Rng (e.g. from
  /// derive_seed(run_seed, ...) or a parent's rng.next_u64()). Throws std::invalid_argument naming
  /// p if p is outside [0, 1) or NaN (p = 1 would make the 1/(1−p) scale infinite).
  Dropout(float p, std::uint64_t seed);

  /// x (any shape) -> y, same shape (see the file comment). Stores the mask (train) or the fact
  /// that it was the identity (eval / p = 0) for backward.
  /// Throws ShapeError if the mask is frozen and x's shape differs from the frozen mask's.
  template <std::size_t N>
  TensorN<N> forward(const TensorN<N>& x);
  /// As forward(const&), on a tensor the caller gives up: the mask is applied in place and x's
  /// buffer is returned (in eval / p = 0, x itself, with no copy).
  template <std::size_t N>
  TensorN<N> forward(TensorN<N>&& x);

  /// dy (shape of the last forward) -> dx = dy ⊙ m with the last forward's mask (dy in eval).
  /// Throws std::logic_error before any forward, ShapeError if dy's shape differs from the last
  /// forward's input shape.
  template <std::size_t N>
  TensorN<N> backward(const TensorN<N>& dy) const;

  /// frozen = true: train-mode forwards reuse the last mask instead of drawing (the first one
  /// draws if there is none yet). frozen = false: back to drawing a fresh mask per forward.
  void freeze_mask(bool frozen) { frozen_ = frozen; }
  bool mask_frozen() const { return frozen_; }

  /// Mask factors of the last train-mode forward, row-major (0 or 1/(1−p)); empty before one.
  const std::vector<float>& mask() const { return mask_; }
  /// Whether the last forward was the identity (eval mode or p = 0).
  bool last_was_identity() const { return identity_; }

  float p() const { return p_; }
  /// The layer's generator (state()/set_state() for checkpoints).
  Rng& rng() { return rng_; }

  /// Dropout has no parameters.
  void collect_parameters(const std::string&, std::vector<NamedParameter>&) override {}
  /// One buffer, "<prefix>rng": the generator (its state is what a checkpoint must keep).
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override {
    out.push_back({prefix + "rng", &rng_});
  }

 private:
  // Records a forward on `shape` (n elements); in train mode with p > 0 draws the mask (or checks
  // the frozen one). Returns whether this forward is the identity.
  bool prepare_forward(const std::vector<std::size_t>& shape, std::size_t n);
  // out[i] = in[i] · mask_[i], i < n (out may be in).
  void apply_mask(const float* in, std::size_t n, float* out) const;

  float p_;
  Rng rng_;
  bool frozen_ = false;
  bool has_forward_ = false;
  bool identity_ = true;
  std::vector<std::size_t> shape_;       // input shape of the last forward
  std::vector<std::size_t> mask_shape_;  // shape the mask was drawn for
  std::vector<float> mask_;
};

#define SEQLAB_DECLARE_DROPOUT(N)                                           \
  extern template TensorN<N> Dropout::forward<N>(const TensorN<N>&);        \
  extern template TensorN<N> Dropout::forward<N>(TensorN<N>&&);             \
  extern template TensorN<N> Dropout::backward<N>(const TensorN<N>&) const;
SEQLAB_DECLARE_DROPOUT(1)
SEQLAB_DECLARE_DROPOUT(2)
SEQLAB_DECLARE_DROPOUT(3)
SEQLAB_DECLARE_DROPOUT(4)
#undef SEQLAB_DECLARE_DROPOUT

}  // namespace seqlab
