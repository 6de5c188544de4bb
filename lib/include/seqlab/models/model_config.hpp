#pragma once
// ModelConfig: the hyperparameters from which models/factory.hpp builds any sequence model, and
// ConfigError, the typed error its validate() throws so experiment binaries can report the key.
//
// Legend: B batch, T seq_len, V vocab_size, D input_size, E embedding_dim (the width the body
// sees), H hidden_size, L num_layers, O output_size, C_i channels of TCN level i, k kernel_size.
//
// A model is  input layer -> body -> head:
//   input  "embedding": Embedding(V, E) on token ids [B, T]                 key "embedding.weight"
//          "linear"   : Linear(D, E) on features [B, T, D]                  keys "input.weight", "input.bias"
//                       or, with embedding_dim = 0, no input layer: the body reads x itself (E = D),
//                       as Bai et al. 2018 feed their copy-memory / adding inputs to the TCN/LSTM
//   body   "rnn" | "lstm" | "gru": L stacked layers of width H            keys "rnn." / "lstm." / "gru." + PyTorch's
//          "tcn": TCN with channels C_0..C_{L-1} (default H × L), kernel k   keys "tcn.network.{i}.conv1.weight" ...
//   head   Linear(H or C_{L-1}, O)                                          keys "head.weight", "head.bias"
//          "per_position": logits [B, T, O];  "last_position": logits [B, 1, O] from step T-1 only.
//   body   "transformer_encoder" | "transformer_decoder" (models/transformer_model.hpp):
//          d_model = hidden_size (the body input width E must equal it), n_layers = num_layers,
//          positional encoding, L TransformerEncoderLayers (decoder: causal mask, GPT block),
//          final norm for pre-norm                                         keys "<model>.layers.{l}.*" ...
//   "transformer_encoder_decoder" (models/encoder_decoder_model.hpp): torch.nn.Transformer with L
//          encoder and L decoder layers, source and target sharing the embedding; embedding input
//          and per_position head only; forward(src, tgt_in) and greedy_decode instead of
//          forward(ids)                                                   keys "transformer.encoder.layers.{l}.*" ...
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace seqlab {

/// A bad configuration value. what() = "<key> = <value>: allowed <allowed>", e.g.
/// "model = 'mamba': allowed one of rnn, lstm, gru, tcn" or "hidden_size = 0: allowed >= 1";
/// key() is the ModelConfig field name, value() the value as in the message (strings in single
/// quotes, numbers plain, lists as [a, b]), allowed() what would be accepted. An experiment binary
/// prints what() (prefixing its own section if it has one) and exits 2.
class ConfigError : public std::invalid_argument {
 public:
  ConfigError(std::string key, std::string value, std::string allowed);
  const std::string& key() const noexcept { return key_; }
  const std::string& value() const noexcept { return value_; }
  const std::string& allowed() const noexcept { return allowed_; }

 private:
  std::string key_, value_, allowed_;
};

/// Model families the factory builds: the names of model_registry() (models/model_registry.hpp),
/// the built-ins in this order: "rnn", "lstm", "gru", "tcn", "transformer_encoder",
/// "transformer_decoder", "transformer_encoder_decoder", then families the program registered.
const std::vector<std::string>& model_names();
/// "rnn, lstm, gru, tcn, transformer_encoder, transformer_decoder, transformer_encoder_decoder"
/// (for messages).
std::string model_names_string();

struct ModelConfig {
  std::string model;                    // one of model_names(); no default (validate() names it)
  std::string input = "embedding";      // "embedding" (token ids) | "linear" (float features)
  std::size_t vocab_size = 0;           // V, embedding input only (>= 1)
  std::size_t input_size = 0;           // D, linear input only (>= 1)
  std::size_t embedding_dim = 0;        // E: embedding width (>= 1) or linear projection width
                                        // (0 = no projection, the body reads x directly)
  std::size_t hidden_size = 0;          // H (>= 1); for tcn the width of every level unless
                                        // `channels` is given
  std::size_t num_layers = 1;           // L (>= 1): stacked recurrent layers or TCN levels
  std::string nonlinearity = "tanh";    // rnn only: "tanh" | "relu" (torch.nn.RNN's argument)
  float forget_bias = 0.0f;             // lstm only: added at initialisation to the forget-gate
                                        // rows [H, 2H) of bias_hh_l{k} of every layer k, after
                                        // PyTorch's U(-1/sqrt(H), 1/sqrt(H)) draw (0 = PyTorch's
                                        // init exactly; 1 = Gers, Schmidhuber & Cummins 2000 and
                                        // Jozefowicz, Zaremba & Sutskever 2015 §2.2, "a forget
                                        // gate bias of 1"). Draws no random numbers, so every
                                        // other parameter equals the forget_bias = 0 model's.
  std::size_t kernel_size = 2;          // tcn only, k >= 1 (Bai et al.'s default 2)
  float dropout = 0.0f;                 // in [0, 1). rnn/lstm/gru: on the body's input and output
                                        // (Zaremba et al. 2014 §3.1, non-recurrent connections);
                                        // tcn: inside every TemporalBlock (Bai et al.'s code)
  std::vector<std::size_t> channels;    // tcn only: C_0..C_{L-1}; empty = H repeated L times
  bool weight_norm = false;             // tcn only: weight-normalised conv1/conv2 (Bai et al.)
  std::size_t output_size = 0;          // O (>= 1): classes or regression outputs
  std::string head = "per_position";    // "per_position" | "last_position"
  std::optional<std::int32_t> padding_idx;  // embedding input only, in [-V, V) (nn.Embedding's)

  // Transformer families only (d_model = hidden_size, n_layers = num_layers; the body input width
  // body_input_size() must equal hidden_size; dropout is every dropout of the layers and the one
  // on embedding + positions):
  std::size_t n_heads = 0;              // h >= 1, hidden_size % n_heads == 0
  std::size_t d_ff = 0;                 // F >= 1, feed-forward inner size
  std::string activation = "relu";      // relu | gelu (feed-forward)
  std::string norm = "layer_norm";      // a registered norm (nn/norm.hpp norm_registry()): layer_norm
                                        // | batch_norm | masked_batch_norm | rms_norm | none
                                        // | power_norm
  std::string norm_placement = "post";  // post (Vaswani et al.) | pre (Xiong et al. 2020; GPT-2)
  std::string positional_encoding = "sinusoidal";  // a registered encoding
                                        // (models/positional_registry.hpp): sinusoidal | learned |
                                        // rope | rope_pi | rope_ntk | alibi | t5_bias | none
  bool shared_qk = false;               // self-attention with W_Q = W_K
  std::size_t max_len = 0;              // learned only: table rows (>= 1); longer inputs throw
  std::size_t train_len = 0;            // rope_pi / rope_ntk only: L_train (>= 1)
  std::string rope_pairing = "interleaved";  // rope*: interleaved (RoFormer) | halves (GPT-NeoX)
  std::size_t relative_buckets = 32;    // t5_bias only: T5's num_buckets (even, >= 4)
  std::size_t relative_max_distance = 128;  // t5_bias only: distances >= it share the last bucket
                                        // (> relative_buckets / 2)
  std::string attention_kernel = "auto";  // auto | fused | materialised: the per-head kernel of
                                        // every MultiheadAttention (nn/attention.hpp
                                        // AttentionKernel; auto: fused from a seq_len threshold,
                                        // kFusedAttentionMinSeqLen[Causal]); the same function
                                        // either way

  /// The checks follow the family's registry entry (models/model_registry.hpp): model (a
  /// registered name), input, [entry.validate_input], the input fields, [entry.validate_body],
  /// dropout, output_size, head, [entry.validate_head]. For the built-in families:
  /// Throws ConfigError for the first bad field, in the order model, input, vocab_size /
  /// input_size, embedding_dim, padding_idx, hidden_size, num_layers (tcn: at most 30 levels,
  /// dilation 2^i), channels, kernel_size, nonlinearity, forget_bias (finite; non-zero only for
  /// lstm, the one family with a forget gate), dropout, output_size, head. Fields a
  /// family does not use are not checked (kernel_size for lstm, nonlinearity for tcn, hidden_size
  /// and num_layers for a tcn with explicit channels), except padding_idx, which is rejected with
  /// linear input because it would silently do nothing.
  /// Transformer families, after num_layers: embedding_dim (body_input_size() must equal
  /// hidden_size; for linear input without projection input_size is named), n_heads (>= 1 and
  /// dividing hidden_size; with rope* also an even head size hidden_size / n_heads), d_ff,
  /// activation, norm (a registered name), norm_placement, positional_encoding (a registered
  /// name, then its entry's validate: sinusoidal needs an even hidden_size; rope*: n_heads giving
  /// an even head size, rope_pairing; learned: max_len >= 1; rope_pi/ntk: train_len >= 1; t5_bias:
  /// relative_buckets even and >= 4, relative_max_distance > relative_buckets / 2),
  /// attention_kernel (auto, fused, materialised), then dropout, output_size, head as for every
  /// family.
  /// transformer_encoder_decoder additionally: input must be "embedding" (checked right after
  /// input) and head "per_position" (checked last).
  void validate() const;

  /// A registered family of ModelFamily::recurrent (rnn, lstm, gru, ...); false for an unknown name.
  bool is_recurrent() const;
  /// A registered family of ModelFamily::transformer: transformer_encoder, transformer_decoder,
  /// transformer_encoder_decoder (all validated with the transformer fields), ...; false for an
  /// unknown name.
  bool is_transformer() const;
  bool last_position() const { return head == "last_position"; }
  /// E: the feature width entering the body (embedding_dim, or input_size when a linear input
  /// has no projection).
  std::size_t body_input_size() const;
  /// TCN level widths: `channels`, or hidden_size repeated num_layers times.
  std::vector<std::size_t> tcn_channels() const;
  /// Width of the body's output, which the head reads: H, or the last TCN channel count.
  std::size_t body_output_size() const;
};

// --- checks for registry entries (their validate hooks; all throw ConfigError) ---------------------

/// key = "0": allowed ">= 1" if v == 0.
void require_positive(const std::string& key, std::size_t v);
/// key = "'v'": allowed "one of a, b, ..." unless v is one of `allowed`.
void require_one_of(const std::string& key, const std::string& v,
                    const std::vector<std::string>& allowed);
/// The built-in families' validate_body, in ModelConfig::validate's order (see there):
/// rnn/lstm/gru: hidden_size, num_layers (rnn's entry adds nonlinearity);
/// tcn: hidden_size and num_layers (unless channels are given; at most 30 levels), channels,
/// kernel_size;
/// transformers: hidden_size, num_layers, embedding_dim = hidden_size, n_heads, d_ff, activation,
/// norm, norm_placement, positional_encoding and its entry's validate, attention_kernel.
void validate_recurrent_fields(const ModelConfig& cfg);
void validate_tcn_fields(const ModelConfig& cfg);
void validate_transformer_fields(const ModelConfig& cfg);

}  // namespace seqlab
