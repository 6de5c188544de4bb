#pragma once
// The unit parallel_speedup times: a stack of seqlab nn/ layers of one family, reading x [B, T, D]
// and returning y [B, T, H_out], with its analytic FLOP count, the bytes its forward keeps for
// backward (from the layers' documented caches) and its parameter matching.
//
// Legend: B batch, T seq_len, D d_model (the input width of every family; the width of every
// Transformer layer), H hidden_size (recurrent hidden size, TCN channels of every level; = D at
// matched d_model), L num_layers, h n_heads, F d_ff, k kernel_size, Lv TCN levels, G = gates·H
// (RNN 1, GRU 3, LSTM 4 gate blocks). A float is 4 bytes.
//
// Families (the models of DESIGN.md claim 1; Vaswani et al. 2017, arXiv 1706.03762, Table 1):
//   self_attention       L MultiheadAttention(D, h) self-attention sub-layers alone (projections
//                        included; no residual, norm or feed-forward): the "self-attention layer"
//                        of Table 1, whose O(n²·d) is compared there with the recurrent O(n·d²)
//   transformer_encoder  L TransformerEncoderLayer(D, h, F, relu, dropout 0, layer_norm,
//                        norm_placement), bidirectional self-attention (no mask)
//   transformer_decoder  L TransformerEncoderLayer(...) with the causal mask: the decoder-only /
//                        GPT block of TransformerModel's transformer_decoder (the same computation
//                        and parameters as TransformerDecoderLayer(cross_attention = false)). The
//                        materialised kernel computes the full T×T score matrix and masks it, as
//                        PyTorch's non-fused path: the same FLOPs as the encoder (counted so).
//   rnn | lstm | gru     one seqlab::RNN (tanh) / LSTM / GRU (D, H, L)
//   tcn                  TCN(D, {H × Lv}, k, dropout 0) (Bai et al. 2018), Lv = the fewest levels
//                        whose receptive field 1 + 2(k−1)(2^Lv − 1) covers T, so that every family
//                        lets the last output see the whole sequence
//
// Analytic FLOPs of one forward (GEMM work only, a multiply-add = 2 FLOP, as
// experiments/bench/bench_layers.cpp; element-wise work, softmax, norms, im2col are not counted):
//   self-attention       8·B·T·D² + 4·B·T²·D per sub-layer
//   Transformer layer    8·B·T·D² (Q/K/V and output projections) + 4·B·T²·D (scores Q Kᵀ and
//                        context P V of all heads) + 4·B·T·D·F (feed-forward)
//   recurrent layer k    2·B·T·G·(in_k + H), in_0 = D, in_k = H (input projection + recurrence)
//   TCN level i          2·B·T·C_i·k·(C_{i−1} + C_i) (+ 2·B·T·C_i·C_{i−1} for the 1×1 downsample
//                        when C_{i−1} != C_i), C_{−1} = D, C_i = H
//   backward = 2 × forward (two GEMMs per forward GEMM: the input and the weight gradient, or for
//   attention dP, dV and dQ, dK), so forward+backward = 3 × forward.
//
// Attention kernel (attention_kernel: materialised | fused | auto, the library's per-head kernel
// switch MultiheadAttention::set_kernel): the
// materialised kernel keeps the probabilities P [B, h, T, T] for backward, the fused one
// (FlashAttention, Dao et al. 2022) only the log-sum-exp L [B, h, T]; auto picks by seq_len
// (uses_fused). The same function and FLOPs either way (the fused backward recomputes the scores,
// work the GEMM count above leaves out).
//
// Bytes kept for backward (what the first forward leaves allocated in the layers; every cache is
// listed in the layer headers nn/attention.hpp, transformer_layer.hpp, feed_forward.hpp, norm.hpp,
// linear.hpp, recurrent_base.hpp, rnn.hpp, lstm.hpp, gru.hpp, conv1d.hpp, tcn.hpp), in floats:
//   self-attention       5·B·T·D + S per sub-layer, S = B·h·T² (materialised: the probabilities
//                        [B, h, T, T]) or B·h·T (fused: the log-sum-exp) (MultiheadAttention
//                        without RoPE: the x copy, the q|k|v projection [B·T, 3D] whose heads the
//                        scores read in place, S, the merged context, which out_proj reads in
//                        place: Linear::forward_borrowed)
//   Transformer layer    8·B·T·D + B·T·F + S + 2·B·T
//                        = MultiheadAttention (5·B·T·D + S); two LayerNorms: x̂ and 1/σ
//                          (2·(B·T·D + B·T)); FeedForward with relu: linear1's input copy and
//                          relu(a), made in place in linear1's output, which linear2 reads in
//                          place (B·T·D + B·T·F; gelu would keep a as well). Dropout p = 0 keeps
//                          no mask.
//   recurrent            T·B·D (time-major x) + L·(T+1)·B·H (h_0..h_T of every layer) + H·G
//                        (W_hhᵀ for the forward steps, one buffer shared by the layers;
//                        nn/recurrent_base.hpp) + per type, with G = gates·H:
//                        RNN  G (b_ih + b_hh) + L·B·H (h_n)
//                        LSTM G + L·((T+1)·B·H + 4·T·B·H + T·B·H) (c_0..c_T, gates, tanh c_t)
//                             + 2·L·B·H (h_n, c_n)
//                        GRU  L·(3·T·B·H + T·B·H) (gates, W_hn h + b_hn) + B·3H (scratch)
//                             + L·B·H (h_n)
//   TCN level i          conv1: input copy B·T·C_{i−1} + weight packed twice 2·C_i·k·C_{i−1};
//                        a1, a2, s: 3·B·T·C_i; conv2: input copy B·T·C_i + 2·C_i·k·C_i;
//                        downsample (C_{i−1} != C_i): input copy B·T·C_{i−1} + 2·C_i·C_{i−1}
//                        (nn/conv1d.hpp: W̃ for the forward, W̃q for the backward)
// The memory the backward itself allocates (gradient buffers, reused between calls) is not
// counted. The experiment also measures the heap growth of the first forward (glibc mallinfo2)
// and checks it against these formulas (tests/integration/test_parallel_speedup_cli.cpp).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/models/model_config.hpp"
#include "seqlab/nn/attention.hpp"
#include "seqlab/nn/gru.hpp"
#include "seqlab/nn/kv_cache.hpp"
#include "seqlab/nn/lstm.hpp"
#include "seqlab/nn/rnn.hpp"
#include "seqlab/nn/tcn.hpp"
#include "seqlab/nn/transformer_layer.hpp"

namespace parallel_speedup {

/// The seven families, in the order of the experiment's `model` key.
const std::vector<std::string>& family_names();

struct StackConfig {
  std::string model;            // one of family_names()
  std::size_t d_model = 0;      // D >= 1
  std::size_t hidden_size = 0;  // H >= 1 (ignored by the Transformer families: their width is D)
  std::size_t num_layers = 1;   // L >= 1 (Transformer layers, recurrent layers; not the TCN)
  std::size_t tcn_levels = 0;   // Lv >= 1 (TCN only)
  std::size_t n_heads = 0;      // h, divides D (Transformers)
  std::size_t d_ff = 0;         // F >= 1 (Transformers)
  std::size_t kernel_size = 0;  // k >= 2 (TCN)
  std::string norm_placement = "pre";  // pre | post (Transformers)
  std::string attention_kernel = "materialised";  // materialised | fused | auto (attention families)

  bool is_transformer() const;  // transformer_encoder | transformer_decoder
  bool is_attention() const;    // a Transformer family or self_attention (width D, h heads)
  bool is_recurrent() const;
  /// Gate blocks: RNN 1, GRU 3, LSTM 4 (0 otherwise).
  std::size_t gates() const;
  /// Width of the output: D for the attention families, H otherwise.
  std::size_t output_size() const;
};

/// The seqlab::ModelConfig of the factory model with this body (models/factory.hpp): linear input
/// of width D without projection (embedding_dim = 0, so the body reads x itself), a per-position
/// head of one output. Used to match parameter counts (count_parameters, hidden_size_for_budget)
/// and to ask the implementation its sequential_steps. The factory has no self_attention family:
/// throws std::invalid_argument for it.
seqlab::ModelConfig model_config(const StackConfig& cfg);

/// Fewest TCN levels whose receptive field 1 + 2·(k−1)·(2^Lv − 1) (nn/tcn.hpp) is >= seq_len.
/// Requires k >= 2.
std::size_t tcn_levels_for(std::size_t seq_len, std::size_t kernel_size);

/// Analytic GEMM FLOPs of one forward on x [B, T, D] (file comment). Double: no overflow.
double forward_flops(const StackConfig& cfg, double B, double T);

/// Analytic GEMM FLOPs of one decoding step at batch 1 after a prefix of n positions (LayerStack::
/// decode): Transformer layer 8·D² + 4·D·F + 4·(n+1)·D (projections, feed-forward, scores and
/// context over the n+1 cached keys); recurrent layer k 2·G·(in_k + H). Throws std::invalid_argument
/// for a family that does not decode (decodes()).
double decode_step_flops(const StackConfig& cfg, double n);

/// Bytes the first forward on x [B, T, D] keeps for backward (file comment), with the attention's
/// softmax state of the fused kernel (`fused`) or of the materialised one. Double: no overflow.
double activation_bytes(const StackConfig& cfg, double B, double T, bool fused = false);

/// Whether `kernel` is an attention_kernel value: materialised, fused or auto.
bool kernel_available(const std::string& kernel);
/// The families LayerStack::decode supports: transformer_decoder, rnn, lstm, gru.
bool decodes(const std::string& model);

/// The layers of one family (file comment), parameters drawn from `rng` in construction order.
/// Throws std::invalid_argument (from the layers) for invalid sizes.
class LayerStack {
 public:
  LayerStack(const StackConfig& cfg, seqlab::Rng& rng);
  LayerStack(const LayerStack&) = delete;
  LayerStack& operator=(const LayerStack&) = delete;

  /// x [B, T, D] -> y [B, T, output_size()]. Throws seqlab::ShapeError for a wrong x.
  seqlab::Tensor3 forward(const seqlab::Tensor3& x);
  /// dy [B, T, output_size()] -> dx [B, T, D]; adds into the parameter grads. Throws
  /// std::logic_error before a forward.
  seqlab::Tensor3 backward(const seqlab::Tensor3& dy);

  /// Incremental (autoregressive) decoding, inference only: the next t positions x [B, t, D] of
  /// the running decode -> y [B, t, output_size()], the rows forward gives for them on the whole
  /// sequence. transformer_decoder: encoder_layer_step on a key/value cache per layer
  /// (nn/kv_cache.hpp); recurrent: forward from the state the last call ended in. Throws
  /// std::logic_error for a family that does not decode (decodes()).
  seqlab::Tensor3 decode(const seqlab::Tensor3& x);
  /// Positions decoded so far.
  std::size_t decode_length() const { return decoded_; }
  /// Back to prefix length n <= decode_length(), so that the next decode step is at prefix n
  /// again: the Transformer's caches forget the positions from n on; a recurrent layer's state is
  /// one vector whatever the prefix and stays as it is (its next step costs the same). Throws
  /// std::out_of_range if n > decode_length().
  void rewind_decode(std::size_t n);
  /// Starts a new decode (empty caches, zero recurrent state).
  void reset_decode();
  /// Sets the kernel of every attention (attention_kernel values: materialised, fused, auto).
  /// Throws std::invalid_argument for any other name.
  void set_attention_kernel(const std::string& kernel);
  /// True if a forward at seq_len T runs the fused kernel (false for non-attention families).
  bool uses_fused(std::size_t T) const;

  /// Scalar parameters of the layers (sum of every listed Parameter's size).
  std::size_t num_parameters();
  /// Operations on the critical path of one forward, counted from the built layers: the
  /// Transformer layers or attention sub-layers one after another (L); recurrent layers × the steps each runs through
  /// (L·T, as RecurrentModel::sequential_steps); the TCN's convolutions (2·Lv).
  std::size_t sequential_steps(std::size_t seq_len) const;

  const StackConfig& config() const { return cfg_; }

 private:
  StackConfig cfg_;
  std::vector<std::unique_ptr<seqlab::TransformerEncoderLayer>> encoders_;
  std::vector<seqlab::KVCache> caches_;   // decode: one per Transformer layer
  seqlab::Tensor3 h_state_;               // decode: recurrent state [L, B, H] (LSTM: h)
  seqlab::LSTMState lstm_state_;          // decode: LSTM (h, c)
  std::size_t decoded_ = 0;
  std::vector<std::unique_ptr<seqlab::MultiheadAttention>> attentions_;
  std::unique_ptr<seqlab::RNN> rnn_;
  std::unique_ptr<seqlab::LSTM> lstm_;
  std::unique_ptr<seqlab::GRU> gru_;
  std::unique_ptr<seqlab::TCN> tcn_;
};

}  // namespace parallel_speedup
