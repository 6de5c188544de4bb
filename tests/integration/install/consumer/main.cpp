// Built against the installed package, linking seqlab::nn alone: builds an LSTM through the public
// factory, trains it two updates with gradient accumulation over two micro-batches, saves its
// weights as safetensors (argv[1]), loads them into a fresh model and checks that it computes the
// same logits; prints the version and parameter count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "seqlab/core/rng.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/nn/safetensors.hpp"
#include "seqlab/train/loop.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/version.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer WEIGHTS_FILE\n");
    return 2;
  }
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

  seqlab::Adam adam(model->parameters(), 1e-3f);
  seqlab::CrossEntropyLoss ce(-100, seqlab::Reduction::sum);
  seqlab::TrainOptions opt;
  opt.steps = 2;
  opt.micro_batches = 2;
  opt.quiet = true;
  const seqlab::TrainResult tr = seqlab::train_loop_accumulate(
      opt, model->parameters(), adam, seqlab::LrSchedule{"constant", 1e-3f}, [&](int, int) {
        const seqlab::Tensor3 logits = model->forward(ids);  // [2, 5, 10]
        seqlab::Tensor2 rows = seqlab::Tensor2::from_shape({10, 10});
        std::copy(logits.begin(), logits.end(), rows.begin());
        seqlab::IndexTensor1 targets = seqlab::IndexTensor1::from_shape({10});
        for (std::size_t i = 0; i < 10; ++i) targets(i) = ids.data()[(i + 1) % 10];
        const float sum = ce.forward(rows, targets);
        const seqlab::Tensor2 d = ce.backward();
        seqlab::Tensor3 dl = seqlab::Tensor3::from_shape({2, 5, 10});
        std::copy(d.begin(), d.end(), dl.begin());
        model->backward(dl);
        return seqlab::LossSum{sum, ce.count()};
      });

  model->eval();
  const seqlab::Tensor3 logits = model->forward(ids);
  seqlab::save_safetensors(argv[1], model->state_dict(), {{"model", cfg.model}});
  seqlab::Rng other(2);
  auto loaded = seqlab::make_model(cfg, other);
  loaded->load_state_dict(seqlab::load_safetensors(argv[1]).tensors);
  loaded->eval();
  const seqlab::Tensor3 again = loaded->forward(ids);

  const bool ok = !tr.diverged && tr.steps_done == 2 && logits.shape()[2] == 10 &&
                  std::isfinite(logits(0, 0, 0)) &&
                  std::memcmp(logits.data(), again.data(), logits.size() * sizeof(float)) == 0 &&
                  model->num_parameters() == seqlab::count_parameters(cfg);
  std::printf("seqlab %s params=%zu %s\n", seqlab::kVersion, model->num_parameters(),
              ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
