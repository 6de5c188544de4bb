#include "seqlab/nn/positional_encoding.hpp"

#include <cmath>
#include <stdexcept>

#include "seqlab/nn/attention.hpp"
#include "seqlab/nn/positional.hpp"

namespace seqlab {

// --- the interface's neutral defaults ---------------------------------------------------------------

Tensor3 PositionalEncoding::forward(const Tensor3& x, std::size_t /*pos_offset*/) { return x; }

Tensor3 PositionalEncoding::backward(const Tensor3& dy) { return dy; }

void PositionalEncoding::attach(MultiheadAttention& /*self_attn*/) {}

void PositionalEncoding::set_context_length(std::size_t /*len*/) {}

void PositionalEncoding::collect_parameters(const std::string& /*prefix*/,
                                            std::vector<NamedParameter>& /*out*/) {}

// --- RoPE, ALiBi ------------------------------------------------------------------------------------

RotaryPositionalEncoding::RotaryPositionalEncoding(const RopeConfig& cfg) : rope_(cfg) {}

void RotaryPositionalEncoding::attach(MultiheadAttention& self_attn) { self_attn.set_rope(&rope_); }

void RotaryPositionalEncoding::set_context_length(std::size_t len) { rope_.set_context_length(len); }

void AlibiPositionalEncoding::attach(MultiheadAttention& self_attn) { self_attn.set_alibi(true); }

}  // namespace seqlab

namespace seqlab {

// --- T5 bias ----------------------------------------------------------------------------------------

namespace {
float t5_init_std(std::size_t d_model) {
  if (d_model == 0) throw std::invalid_argument("T5RelativeBiasEncoding: d_model = 0; must be >= 1");
  return 1.0f / std::sqrt(static_cast<float>(d_model));
}
}  // namespace

T5RelativeBiasEncoding::T5RelativeBiasEncoding(std::size_t n_heads, std::size_t d_model, std::size_t num_buckets,
                                               std::size_t max_distance, Rng& rng)
    : bias_(n_heads, num_buckets, max_distance, rng, t5_init_std(d_model)) {}

void T5RelativeBiasEncoding::attach(MultiheadAttention& self_attn) { self_attn.set_relative_bias(&bias_); }

void T5RelativeBiasEncoding::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  bias_.collect_parameters(prefix + "relative_attention_bias.", out);
}

}  // namespace seqlab
