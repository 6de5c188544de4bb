#pragma once
// Positional encodings of the Transformer family (DESIGN.md claim 3):
//   sinusoidal   Vaswani et al. 2017 "Attention Is All You Need" §3.5 (added to the embeddings)
//   learned      a trained [max_len, D] table added to the embeddings (GPT-2, BERT; nn.Embedding init)
//   rope         Su et al. 2021 "RoFormer" eq. 34 (rotates queries and keys of each head)
//   rope_pi      RoPE with position interpolation, Chen et al. 2023 (arXiv 2306.15595) §2.2
//   rope_ntk     RoPE with NTK-aware base scaling, bloc97 2023 / Peng et al. 2023 "YaRN" §3.1
//   alibi        Press et al. 2021 "Train Short, Test Long" (ALiBi) §3: a linear bias on the scores
//   t5_bias      Raffel et al. 2020 (T5) §2.1: a learned bias per head and log-spaced distance bucket
//   none         no position information (a causal decoder can still infer some)
//
// Legend: B batch, T seq_len, D d_model, hd head_dim (per-head size, even for RoPE), n_heads number
// of attention heads, rows = B·n_heads, T_q / T_k query / key lengths. Positions are 0-based.
// Angles are in radians and computed in double (position × inverse frequency, never accumulated),
// then rounded to float once.
//
// The models use every encoding through the PositionalEncoding interface (nn/positional_encoding.hpp)
// and build it by name from the registry (models/positional_registry.hpp): SinusoidalEncoding and
// LearnedPositionalEmbedding are added to the input; RotaryPositionalEncoding (rope, rope_pi,
// rope_ntk), AlibiPositionalEncoding and NoPositionalEncoding act inside attention or not at all.
// PositionalEncodingKind and parse_positional_encoding name the built-in kinds only (analyses of
// the built-in formulas use them); the list of what a model accepts is the registry's.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/parameter.hpp"
#include "seqlab/nn/positional_encoding.hpp"

namespace seqlab {

enum class PositionalEncodingKind { sinusoidal, learned, rope, rope_pi, rope_ntk, alibi, none };

/// "sinusoidal" | "learned" | "rope" | "rope_pi" | "rope_ntk" | "alibi" | "none" (exact, lower case).
/// Throws std::invalid_argument("positional_encoding = 'x': allowed sinusoidal, learned, rope,
/// rope_pi, rope_ntk, alibi, none").
PositionalEncodingKind parse_positional_encoding(const std::string& name);
/// The name parse_positional_encoding accepts for `kind`.
std::string to_string(PositionalEncodingKind kind);
/// True for rope, rope_pi, rope_ntk: the encoding rotates q and k inside attention.
bool acts_on_qk(PositionalEncodingKind kind);
/// True for sinusoidal, learned: the encoding is added to the token embeddings [B, T, D].
bool adds_to_embedding(PositionalEncodingKind kind);
/// True for alibi: the encoding is a bias added to the attention scores.
bool biases_scores(PositionalEncodingKind kind);

// --- sinusoidal -----------------------------------------------------------------------------------

/// Table [len, D] of Vaswani et al. 2017 §3.5 for positions pos = pos_offset .. pos_offset+len-1:
///   PE(pos, 2i) = sin(pos / 10000^(2i/D)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/D)),  i = 0..D/2-1.
/// interleaved = true is the paper's layout (column 2i sin, 2i+1 cos, i.e. column j uses the
/// exponent 2⌊j/2⌋/D); interleaved = false is the concatenated layout [sin_0..sin_{D/2-1},
/// cos_0..cos_{D/2-1}] (tensor2tensor's get_timing_signal_1d ordering, same frequencies).
/// Angles in double, rounded to float once. Throws std::invalid_argument if D is 0 or odd.
Tensor2 sinusoidal_table(std::size_t len, std::size_t d_model, bool interleaved = true,
                         std::size_t pos_offset = 0);

/// y = x + PE[pos_offset + t] (no parameters; the √D scaling of the embeddings, §3.4, and dropout
/// are the model's business).
class SinusoidalEncoding : public PositionalEncoding {
 public:
  /// Throws std::invalid_argument if d_model is 0 or odd.
  explicit SinusoidalEncoding(std::size_t d_model, bool interleaved = true);

  /// x [B, T, D] -> y [B, T, D] = x + sinusoidal_table(T, D, interleaved, pos_offset) broadcast over B.
  /// Throws ShapeError if x is not [*, *, D]. Caches the table for the last (T, pos_offset).
  Tensor3 forward(const Tensor3& x, std::size_t pos_offset = 0) override;
  /// dy [B, T, D] -> dx = dy (the encoding is a constant). Throws ShapeError if dy is not the shape
  /// of the last forward's x, std::logic_error if forward has not run.
  Tensor3 backward(const Tensor3& dy) override;

  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

  std::size_t d_model() const { return d_model_; }
  bool interleaved() const { return interleaved_; }

 private:
  std::size_t d_model_;
  bool interleaved_;
  Tensor2 table_;  // cache: [T, D] for (table_offset_, T)
  std::size_t table_offset_ = 0;
  bool has_table_ = false;
  std::vector<std::size_t> x_shape_;  // shape of the last forward's x
};

// --- learned --------------------------------------------------------------------------------------

/// Learned absolute positions: y = x + weight[pos_offset + t].
class LearnedPositionalEmbedding : public PositionalEncoding {
 public:
  /// "weight" [max_len, D] drawn from N(0, 1) row-major (torch.nn.Embedding's default init).
  /// Throws std::invalid_argument if max_len or d_model is 0.
  LearnedPositionalEmbedding(std::size_t max_len, std::size_t d_model, Rng& rng);

  /// x [B, T, D] -> y [B, T, D] = x + weight[pos_offset + t] broadcast over B. Throws
  /// std::out_of_range naming max_len and the needed length when pos_offset + T > max_len (no silent
  /// clamp); ShapeError if x is not [*, *, D] or `weight` was given a shape other than [max_len, D].
  Tensor3 forward(const Tensor3& x, std::size_t pos_offset = 0) override;
  /// dy [B, T, D]: weight.grad[pos_offset + t] += Σ_b dy[b, t]; returns dx = dy. Throws ShapeError if
  /// dy is not the shape of the last forward's x, std::logic_error if forward has not run.
  Tensor3 backward(const Tensor3& dy) override;

  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

  /// max_len: the models reject longer sequences (ShapeError naming max_len) before forward.
  std::size_t max_positions() const override { return max_len_; }
  std::size_t max_len() const { return max_len_; }
  std::size_t d_model() const { return d_model_; }

  Parameter weight;  // "weight" [max_len, D]

 private:
  void check_weight() const;

  std::size_t max_len_, d_model_;
  std::size_t pos_offset_ = 0;        // cache: pos_offset of the last forward
  std::vector<std::size_t> x_shape_;  // cache: shape of the last forward's x
  bool cached_ = false;
};

// --- RoPE -----------------------------------------------------------------------------------------

enum class RopePairing {
  interleaved,  // RoFormer eq. 34: pairs (2i, 2i+1)
  halves        // GPT-NeoX / HF "rotate_half": pairs (i, i + hd/2)
};
enum class RopeScaling {
  none,
  position_interpolation,  // Chen et al. 2023 §2.2: positions m -> m / s
  ntk                      // NTK-aware: base' = base · s^(hd/(hd-2)) (bloc97 2023; Peng et al. YaRN §3.1)
};
struct RopeConfig {
  std::size_t head_dim = 0;  // hd, even, >= 2
  double base = 10000.0;     // θ_i = base^(-2i/hd)
  RopePairing pairing = RopePairing::interleaved;
  RopeScaling scaling = RopeScaling::none;
  std::size_t train_len = 0;  // L_train, the context length trained on; required (> 0) for pi/ntk
};
/// The RopeScaling of rope (none), rope_pi (position_interpolation), rope_ntk (ntk). Throws
/// std::invalid_argument naming the kind for a kind that is not RoPE.
RopeScaling rope_scaling_for(PositionalEncodingKind kind);

/// Rotary position embedding, Su et al. 2021 (RoFormer) eq. 34: each pair (a, b) of a head vector at
/// position p is rotated by the angle p·θ_i, θ_i = base^(-2i/hd), i = 0..hd/2-1:
///   a' = a cos(pθ_i) − b sin(pθ_i),   b' = a sin(pθ_i) + b cos(pθ_i).
/// Applied to q and k, q_mᵀk_n depends on positions only through m − n (§3.2). The rotation is
/// orthogonal, so its backward is the inverse rotation Rᵀ = R(−pθ).
/// Scaling for a context length L longer than L_train, s = L / L_train:
///   position_interpolation: angle (p / s)·θ_i;  ntk: θ_i computed with base' = base · s^(hd/(hd-2))
///   (for hd = 2 the only frequency is θ_0 = 1, so ntk changes nothing). L <= L_train: s = 1.
/// rotate() is const and may be called from several threads: its cos/sin table cache is guarded by
/// a mutex and shared by pointer.
class RotaryEmbedding {
 public:
  /// Throws std::invalid_argument naming head_dim if it is 0 or odd, naming base if base <= 1 or
  /// not finite, naming train_len if scaling is pi/ntk and train_len is 0.
  explicit RotaryEmbedding(const RopeConfig& cfg);
  RotaryEmbedding(const RotaryEmbedding& other);
  RotaryEmbedding& operator=(const RotaryEmbedding& other);

  /// Sets the context length L being evaluated; for pi/ntk with L > train_len the scale
  /// s = L / train_len applies; L <= train_len (or 0): s = 1. Ignored (s = 1) for scaling none.
  void set_context_length(std::size_t len);
  std::size_t context_length() const { return context_len_; }
  /// The current scale s (>= 1; 1 when no scaling applies).
  double scale() const;

  /// In place on x laid out [rows, T, hd] contiguous (rows = B·n_heads): x[r, t] <- R(pos_offset + t)
  /// x[r, t], or Rᵀ x[r, t] (the inverse rotation, used for backward) when inverse = true.
  /// Angles are position × inverse frequency in double; the cos/sin table is cached per
  /// (T, pos_offset, scale). x must not be null unless rows·T == 0.
  void rotate(float* x, std::size_t rows, std::size_t T, std::size_t pos_offset, bool inverse) const;
  /// Tensor form: x [rows, T, hd] or [B, n_heads, T, hd] rotated in place, positions along axis -2.
  /// Throws ShapeError if the last extent is not hd.
  void rotate(Tensor3& x, std::size_t pos_offset, bool inverse = false) const;
  void rotate(Tensor4& x, std::size_t pos_offset, bool inverse = false) const;

  /// The hd/2 inverse frequencies θ_i (radians per position) in effect now, scaling included
  /// (pi: θ_i / s, the same angles as dividing positions by s).
  std::vector<double> inverse_frequencies() const;

  const RopeConfig& config() const;

 private:
  struct Table {
    std::size_t T = 0, pos_offset = 0;
    double scale = 1.0;
    std::vector<float> cos, sin;  // [T, hd/2]
  };
  std::shared_ptr<const Table> table(std::size_t T, std::size_t pos_offset) const;

  RopeConfig cfg_;
  std::size_t context_len_ = 0;
  double scale_ = 1.0;
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const Table> cache_;
};

// --- ALiBi ----------------------------------------------------------------------------------------

/// ALiBi head slopes [n_heads] (Press et al. 2021 §3 and their code's get_slopes): for n a power of
/// two, slope_i = 2^(-8i/n), i = 1..n; otherwise the n' = 2^⌊log2 n⌋ slopes of n', followed by the
/// slopes 1, 3, 5, ... (every other, starting with the first) of 2n', the first n − n' of them.
/// Computed in double. Throws std::invalid_argument if n_heads is 0.
Tensor1 alibi_slopes(std::size_t n_heads);

/// ALiBi bias for one head [T_q, T_k], query i at position q_offset + i, key j at position j:
///   causal:        bias(i, j) = −slope · (q_offset + i − j). Entries with j > q_offset + i (the future)
///                  come out positive (+slope·(j − i − q_offset)): the caller must mask them.
///   bidirectional: bias(i, j) = −slope · |q_offset + i − j| (a symmetric extension for encoders,
///                  not in the paper, which only treats causal language models).
/// Press et al.'s code adds slope·j instead; per causal row that differs by a constant, which softmax
/// ignores. Distances computed in double.
Tensor2 alibi_bias(double slope, std::size_t T_q, std::size_t T_k, bool causal,
                   std::size_t q_offset = 0);

/// scores [B, n_heads, T_q, T_k] += alibi_bias(slopes[h], T_q, T_k, causal, q_offset) for each head h.
/// Throws ShapeError if slopes is not [n_heads].
void add_alibi_bias(Tensor4& scores, const Tensor1& slopes, bool causal, std::size_t q_offset = 0);

// --- T5 relative position bias ------------------------------------------------------------------

/// T5's bucket of a relative position (Raffel et al. 2020, "Exploring the Limits of Transfer
/// Learning with a Unified Text-to-Text Transformer", §2.1; the formula of Hugging Face's
/// T5Attention._relative_position_bucket and of mesh-tensorflow). relative_position = pos_k − pos_q.
///   bidirectional (encoders): nb = num_buckets / 2; keys after the query (relative_position > 0)
///     use buckets nb..2nb−1, the others 0..nb−1; n = |relative_position|;
///   unidirectional (causal decoders): nb = num_buckets; n = max(−relative_position, 0) (a later
///     key, masked anyway, shares bucket 0 with distance 0);
///   then, with max_exact = nb / 2: n < max_exact -> bucket n (one bucket per distance);
///   else max_exact + ⌊ln(n / max_exact) / ln(max_distance / max_exact) · (nb − max_exact)⌋,
///   at most nb − 1 (logarithmically wider buckets; every n >= max_distance shares the last one).
/// Computed in double (PyTorch computes the logarithm in float32: the two may differ only where the
/// product is within float rounding of an integer). Throws std::invalid_argument unless num_buckets
/// is even and >= 4 and max_distance > num_buckets / 2.
std::size_t t5_relative_bucket(long long relative_position, bool bidirectional, std::size_t num_buckets,
                               std::size_t max_distance);

/// T5's learned relative position bias (Raffel et al. 2020 §2.1): a scalar per head and bucket,
/// added to the attention scores, bias(i, j) = weight[t5_relative_bucket(pos_k(j) − pos_q(i)), head].
/// As in T5, one table serves every layer of a stack (MultiheadAttention::set_relative_bias on each
/// self-attention); bidirectional buckets without the causal mask, unidirectional with it (T5's
/// encoder and decoder). The attention adds the bias to the scaled scores row by row (add_row)
/// and, in backward, sums dL/dscores per bucket (accumulate_row into per-head slots, then
/// add_head_grad in a fixed order, so the gradient does not depend on how heads are split between
/// threads). Bucket lookups come from distance tables that prepare() extends (the attention calls it
/// before its heads run); add_row and accumulate_row only read them and may run concurrently.
class RelativePositionBias : public Module {
 public:
  /// "weight" [num_buckets, n_heads] drawn from N(0, init_std²) row-major (Hugging Face's
  /// T5PreTrainedModel._init_weights: std = d_model^-1/2 with factor 1). Throws
  /// std::invalid_argument for n_heads = 0, a bad num_buckets / max_distance (t5_relative_bucket) or
  /// init_std < 0.
  RelativePositionBias(std::size_t n_heads, std::size_t num_buckets, std::size_t max_distance, Rng& rng,
                       float init_std);

  /// Makes the distance tables cover |pos_q − pos_k| < span. Not thread-safe (call before the
  /// heads run).
  void prepare(std::size_t span);
  /// row[j] += weight[bucket(pos_k0 + j − pos_q), head] for j < n; bidirectional buckets unless
  /// causal. Every distance must be < the prepared span (std::logic_error otherwise).
  void add_row(std::size_t head, std::size_t pos_q, std::size_t pos_k0, std::size_t n, bool causal,
               float* row) const;
  /// slots[bucket(pos_k0 + j − pos_q)] += drow[j] for j < n (the gradient of one score row;
  /// slots has num_buckets() entries). Same span rule as add_row.
  void accumulate_row(std::size_t pos_q, std::size_t pos_k0, std::size_t n, bool causal, const float* drow,
                      float* slots) const;
  /// weight.grad[b, head] += slots[b] for every bucket b.
  void add_head_grad(std::size_t head, const float* slots);

  std::size_t n_heads() const { return n_heads_; }
  std::size_t num_buckets() const { return num_buckets_; }
  std::size_t max_distance() const { return max_distance_; }

  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

  Parameter weight;  // "weight" [num_buckets, n_heads]

 private:
  std::size_t bucket(long long rel, bool causal) const;  // |rel| < prepared span (unchecked)
  void check_span(std::size_t pos_q, std::size_t pos_k0, std::size_t n) const;  // std::logic_error
  void check_weight() const;

  std::size_t n_heads_, num_buckets_, max_distance_;
  // Buckets by distance d < span: causal (unidirectional) of k − q = −d; bidirectional of −d and +d.
  std::vector<std::uint32_t> causal_, before_, after_;
};

// --- the attention-side encodings as PositionalEncodings (lib/src/nn/positional_encoding.cpp) -----

/// RoPE as a model's positional encoding ("rope", "rope_pi", "rope_ntk"): owns one RotaryEmbedding
/// that attach() hands to every self-attention (MultiheadAttention::set_rope, which rotates q and k
/// of every head after the projection, and dq, dk back in backward); set_context_length(T) sets its
/// context length for the pi / ntk scaling. Adds nothing to the input (forward: y = x); no
/// parameters. Throws as RotaryEmbedding's constructor; attach throws std::invalid_argument if the
/// attention's head_dim is not cfg.head_dim.
class RotaryPositionalEncoding : public PositionalEncoding {
 public:
  explicit RotaryPositionalEncoding(const RopeConfig& cfg);
  void attach(MultiheadAttention& self_attn) override;
  void set_context_length(std::size_t len) override;
  const RotaryEmbedding& rotary() const { return rope_; }

 private:
  RotaryEmbedding rope_;
};

/// ALiBi as a model's positional encoding ("alibi"): attach() switches on MultiheadAttention's
/// ALiBi bias (slopes alibi_slopes(n_heads); causal −m·(i − j) under a causal mask, −m·|i − j|
/// otherwise). Adds nothing to the input; no parameters.
class AlibiPositionalEncoding : public PositionalEncoding {
 public:
  AlibiPositionalEncoding() = default;
  void attach(MultiheadAttention& self_attn) override;
};

/// T5's bucketed relative bias as a model's positional encoding ("t5_bias"): owns one
/// RelativePositionBias that attach() hands to every self-attention (one table per stack, as T5
/// shares it across layers). Adds nothing to the input. Parameters: "relative_attention_bias.weight"
/// [num_buckets, n_heads].
class T5RelativeBiasEncoding : public PositionalEncoding {
 public:
  /// Throws as RelativePositionBias (init_std = 1/√d_model; d_model >= 1 else std::invalid_argument).
  T5RelativeBiasEncoding(std::size_t n_heads, std::size_t d_model, std::size_t num_buckets,
                         std::size_t max_distance, Rng& rng);
  /// MultiheadAttention::set_relative_bias(&bias). Throws std::invalid_argument if the attention's
  /// n_heads differs from the table's.
  void attach(MultiheadAttention& self_attn) override;
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  RelativePositionBias& bias() { return bias_; }

 private:
  RelativePositionBias bias_;
};

/// No position information ("none"): every hook is the neutral default.
class NoPositionalEncoding : public PositionalEncoding {
 public:
  NoPositionalEncoding() = default;
};

}  // namespace seqlab
