// One forward + backward of bench_layers' EncoderLayer case (B 32, T 128, d_model 256, n_heads 8,
// d_ff 1024, pre-norm LayerNorm, relu, dropout 0) at the thread budget argv[1] (default: cores),
// run under gemm_log_shim.so to record the GEMMs the layer issues (gemm_ceiling.sh).
#include <cstdio>
#include <cstdlib>

#include "seqlab/core/threads.hpp"
#include "seqlab/nn/transformer_layer.hpp"

int main(int argc, char** argv) {
  using namespace seqlab;
  set_num_threads(argc > 1 ? std::atoi(argv[1]) : hardware_threads());
  Rng rng(1);
  TransformerLayerConfig cfg;
  cfg.d_model = 256;
  cfg.n_heads = 8;
  cfg.d_ff = 1024;
  cfg.norm_placement = "pre";
  TransformerEncoderLayer layer(cfg, rng);
  Tensor3 x({32, 128, 256}), dy({32, 128, 256});
  rng.fill_normal(x, 0.0f, 1.0f);
  rng.fill_normal(dy, 0.0f, 1.0f);
  layer.forward(x, AttentionMask{});
  const Tensor3 dx = layer.backward(dy);
  std::printf("dx[0,0,0] = %g\n", static_cast<double>(dx(0, 0, 0)));
  return 0;
}
