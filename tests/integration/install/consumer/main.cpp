// Built against the installed package: builds an LSTM through the public factory, runs a forward
// and backward pass and one Adam step, and prints the version and parameter count.
#include <cmath>
#include <cstdio>

#include "seqlab/core/rng.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/version.hpp"

int main() {
  seqlab::ModelConfig cfg;
  cfg.model = "lstm";
  cfg.vocab_size = 10;
  cfg.embedding_dim = 4;
  cfg.hidden_size = 8;
  cfg.output_size = 10;
  seqlab::Rng rng(1);
  auto model = seqlab::make_model(cfg, rng);
  seqlab::IndexTensor2 ids = seqlab::IndexTensor2::from_shape({2, 5});
  for (std::size_t i = 0; i < ids.size(); ++i) ids.data()[i] = static_cast<std::int32_t>(i % 10);
  const seqlab::Tensor3 logits = model->forward(ids);
  model->backward(seqlab::Tensor3(xt::ones_like(logits)));
  seqlab::Adam adam(model->parameters(), 1e-3f);
  adam.step();
  const bool ok = logits.shape()[2] == 10 && std::isfinite(logits(0, 0, 0)) &&
                  model->num_parameters() == seqlab::count_parameters(cfg);
  std::printf("seqlab %s params=%zu %s\n", seqlab::kVersion, model->num_parameters(),
              ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
