// Writes model weights in the safetensors layout for tests/integration/safetensors_torch.py, which
// reads them with numpy alone and, when torch is installed, loads them into the torch.nn modules
// of the same structure and compares their outputs with seqlab's. Uses seqlab::nn only.
//
// usage: seqlab_export_weights OUT_DIR
// For each case (lstm, transformer_encoder, transformer_decoder, batch_norm) it writes
//   OUT_DIR/<case>.safetensors     the module's state_dict, metadata: case and the configuration
//   OUT_DIR/<case>.io.safetensors  "input" (token ids as I64 [B, T], or features F32 [B, T, D])
//                                  and "output" (eval-mode forward, F32); metadata: for every
//                                  weight key "<sum>;<first>;<last>" (sum of its values in
//                                  double, first and last value, %.9g), so the numpy reader can
//                                  be checked without torch.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "seqlab/core/rng.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/nn/norm.hpp"
#include "seqlab/nn/safetensors.hpp"

using namespace seqlab;

namespace {

constexpr std::size_t kB = 2, kT = 5;

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// "<sum>;<first>;<last>" of every weight, as the io file's metadata.
std::map<std::string, std::string> checks(const StateDict& sd) {
  std::map<std::string, std::string> out;
  for (const auto& [key, t] : sd) {
    std::visit(
        [&, k = key](const auto& a) {
          double sum = 0;
          for (const auto v : a) sum += static_cast<double>(v);
          const double first = a.size() ? static_cast<double>(a.data()[0]) : 0.0;
          const double last = a.size() ? static_cast<double>(a.data()[a.size() - 1]) : 0.0;
          out[k] = num(sum) + ";" + num(first) + ";" + num(last);
        },
        t);
  }
  return out;
}

void write_case(const std::string& dir, const std::string& name, Module& module,
                std::map<std::string, std::string> meta, StateDict io) {
  const StateDict sd = module.state_dict();
  meta["case"] = name;
  save_safetensors(dir + "/" + name + ".safetensors", sd, meta);
  save_safetensors(dir + "/" + name + ".io.safetensors", io, checks(sd));
}

void export_model(const std::string& dir, const std::string& name, const ModelConfig& cfg) {
  Rng rng(20240611);
  auto model = make_model(cfg, rng);
  // Non-default values for the norm parameters (gains 1, shifts 0 at init would hide a swap).
  Rng fill(7);
  for (auto& np : model->named_parameters())
    if (np.key.find("norm") != std::string::npos) fill.fill_uniform(np.param->value, 0.5f, 1.5f);
  model->eval();
  IndexTensor2 ids = IndexTensor2::from_shape({kB, kT});
  for (auto& v : ids) v = static_cast<std::int32_t>(fill.uniform_int(cfg.vocab_size));
  const Tensor3 logits = model->forward(ids);
  ArrayOf<std::int64_t> input = ArrayOf<std::int64_t>::from_shape({kB, kT});
  std::copy(ids.begin(), ids.end(), input.begin());
  std::map<std::string, std::string> meta = {{"model", cfg.model},
                                             {"vocab_size", std::to_string(cfg.vocab_size)},
                                             {"hidden_size", std::to_string(cfg.hidden_size)},
                                             {"num_layers", std::to_string(cfg.num_layers)},
                                             {"output_size", std::to_string(cfg.output_size)}};
  if (cfg.is_recurrent()) {
    meta["embedding_dim"] = std::to_string(cfg.embedding_dim);
  } else {
    meta["n_heads"] = std::to_string(cfg.n_heads);
    meta["d_ff"] = std::to_string(cfg.d_ff);
    meta["activation"] = cfg.activation;
    meta["norm_placement"] = cfg.norm_placement;
    meta["max_len"] = std::to_string(cfg.max_len);
  }
  write_case(dir, name, *model, meta, {{"input", input}, {"output", Array(logits)}});
}

void export_batch_norm(const std::string& dir) {
  const std::size_t D = 4;
  BatchNorm bn(D, false);
  Rng rng(3);
  rng.fill_uniform(bn.weight.value, 0.5f, 1.5f);
  rng.fill_uniform(bn.bias.value, -0.5f, 0.5f);
  bn.train();
  for (int k = 0; k < 3; ++k) {  // running statistics move, num_batches_tracked = 3
    Tensor3 x = Tensor3::from_shape({kB, kT, D});
    rng.fill_uniform(x, -2.0f, 3.0f);
    bn.forward(x);
  }
  bn.eval();
  Tensor3 x = Tensor3::from_shape({kB, kT, D});
  rng.fill_uniform(x, -2.0f, 3.0f);
  const Tensor3 y = bn.forward(x);
  write_case(dir, "batch_norm", bn, {{"num_features", std::to_string(D)}},
             {{"input", Array(x)}, {"output", Array(y)}});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  try {
    ModelConfig lstm;
    lstm.model = "lstm";
    lstm.vocab_size = 11;
    lstm.embedding_dim = 6;
    lstm.hidden_size = 8;
    lstm.num_layers = 2;
    lstm.output_size = 11;
    export_model(dir, "lstm", lstm);

    ModelConfig enc;
    enc.model = "transformer_encoder";
    enc.vocab_size = 11;
    enc.embedding_dim = 8;
    enc.hidden_size = 8;
    enc.num_layers = 2;
    enc.n_heads = 2;
    enc.d_ff = 16;
    enc.output_size = 5;
    enc.positional_encoding = "learned";
    enc.max_len = 8;
    export_model(dir, "transformer_encoder", enc);

    ModelConfig dec = enc;
    dec.model = "transformer_decoder";
    dec.norm_placement = "pre";
    dec.activation = "gelu";
    export_model(dir, "transformer_decoder", dec);

    export_batch_norm(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seqlab_export_weights: %s\n", e.what());
    return 1;
  }
  return 0;
}
