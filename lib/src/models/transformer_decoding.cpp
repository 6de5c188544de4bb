// Incremental decoding of the decoder-only TransformerModel (seqlab/models/transformer_decoding.hpp).
#include "seqlab/models/transformer_decoding.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace seqlab {

namespace {

void require_decoder(const TransformerModel& model) {
  if (!model.causal())
    throw std::invalid_argument("decode_step: model = '" + model.config().model +
                                "'; incremental decoding needs transformer_decoder (causal)");
  if (model.padding())
    throw std::invalid_argument("decode_step: the model has a padding mask set; decoding takes "
                                "sequences of one length (set_padding(nullptr))");
}

// u [B, t, D] (the input layer's output) -> logits (file comment of the header).
Tensor3 decode_body_head(TransformerModel& model, const Tensor3& u, DecodingState& state) {
  const std::size_t B = u.shape()[0], t = u.shape()[1], n = state.length();
  if (t == 0) throw ShapeError("decode_step: no new position (t = 0); t must be >= 1");
  if (n > 0 && state.layers.front().batch() != B)
    throw ShapeError("decode_step: batch " + std::to_string(B) + ", the running decode has " +
                     std::to_string(state.layers.front().batch()) + " sequences");
  const std::size_t max_positions = model.positional->max_positions();
  if (max_positions > 0 && n + t > max_positions)
    throw ShapeError(model.config().model + " model: position " + std::to_string(n + t - 1) +
                     " exceeds max_len = " + std::to_string(max_positions) + " of the " +
                     model.config().positional_encoding + " positional embedding");
  state.layers.resize(model.num_layers());
  model.positional->set_context_length(n + t);
  Tensor3 z = model.positional->forward(u, n);
  for (std::size_t l = 0; l < model.num_layers(); ++l)
    z = encoder_layer_step(*model.layers[l], z, state.layers[l]);
  if (model.final_norm) z = model.final_norm->forward(z);
  if (!model.config().last_position()) return model.head->forward(z);  // [B, t, O]
  const std::size_t H = z.shape()[2], O = model.config().output_size;
  Tensor2 last = Tensor2::from_shape({B, H});
  for (std::size_t b = 0; b < B; ++b)
    std::copy_n(z.data() + (b * t + t - 1) * H, H, last.data() + b * H);
  const Tensor2 y = model.head->forward(last);  // [B, O]
  Tensor3 out = Tensor3::from_shape({B, 1, O});
  std::copy(y.begin(), y.end(), out.begin());
  return out;
}

}  // namespace

Tensor3 decode_step(TransformerModel& model, const IndexTensor2& ids, DecodingState& state) {
  require_decoder(model);
  if (!model.embedding)
    throw std::logic_error("decode_step: the model has input = linear (pass x [B, t, " +
                           std::to_string(model.config().input_size) + "])");
  return decode_body_head(model, model.embedding->forward(ids), state);
}

Tensor3 decode_step(TransformerModel& model, const Tensor3& x, DecodingState& state) {
  require_decoder(model);
  if (model.embedding)
    throw std::logic_error("decode_step: the model has input = embedding (pass token ids [B, t])");
  check_shape("decode_step x [B, t, input_size]", x, {-1, -1, static_cast<long>(model.config().input_size)});
  return decode_body_head(model, model.input ? model.input->forward(x) : x, state);
}

}  // namespace seqlab
