#include "seqlab/nn/positional_encoding.hpp"

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
