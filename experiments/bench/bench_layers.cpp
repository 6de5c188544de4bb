// bench_layers: Google Benchmark micro-benchmarks of seqlab's recurrent, convolutional and
// attention layers (RNN, LSTM, GRU, TCN over a (batch, seq_len, hidden) grid; MultiheadAttention
// and a Transformer encoder layer over a (batch, seq_len, d_model, n_heads) grid), forward and
// forward+backward, plus SGEMM reference cases of the same shapes, so that a layer's FLOP rate can be read against the
// machine's GEMM rate from the same run. What each case measures, the counters and their formulas,
// and how to read the ratios: README.md beside this file.
//
// Legend: B batch, T seq_len, H hidden_size (= input_size D of the recurrent layers = channels C
// of the TCN), G gate blocks (RNN 1, GRU 3, LSTM 4), L recurrent layers (1 here), k kernel_size
// (3), Lv TCN levels (residual blocks, two convolutions each), M, N, K GEMM extents; for the
// attention cases D d_model, h n_heads, d_k = D / h, F d_ff (= 4·D).
//
// Analytic FLOP counts (GEMM work only; a multiply-add is 2 FLOP; element-wise gate and activation
// work, im2col copies and bias additions are not counted):
//   recurrent forward   2·B·T·G·H·(D + H) per layer   (input projection + recurrent product)
//   recurrent backward  2 × forward                    (dW_ih, dW_hh, dx, dh_{t-1})
//   TCN forward         Lv · 2 convs · 2·B·T·C·(k·C)   (im2col GEMM [B·T, k·C] × W̃ᵀ [k·C, C])
//   TCN backward        2 × forward                    (dW̃ and dcols)
//   MHA forward         2·B·T·D·3D + 2·B·T·D·D         (Q/K/V projection + output projection)
//                       + 2·2·B·T²·D                   (scores Q_i K_iᵀ and context P_i V_i, all heads)
//   encoder forward     MHA forward + 2·2·B·T·D·F      (feed-forward linear1 and linear2)
//   MHA/encoder backward 2 × forward
//   SGEMM               2·M·N·K
// forward+backward cases count forward + backward = 3 × forward.
// The attention-kernel cases (AttnKernel_*) count the GEMM work each kernel executes instead:
//   forward   8·B·T·D² (projections) + 2 products · 2·d_k · E   (scores and context)
//   backward  16·B·T·D² + n_b · 2·d_k · E   (n_b = 4 materialised: dP, dV, dQ, dK; 5 fused: the
//             scores recomputed too)
// with E = MultiheadAttention::score_entries() (B·h·T² materialised; fused: the entries of the
// tiles it does not skip, about half under the causal mask).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "seqlab/core/gemm.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/nn/gru.hpp"
#include "seqlab/nn/lstm.hpp"
#include "seqlab/nn/attention.hpp"
#include "seqlab/nn/rnn.hpp"
#include "seqlab/nn/tcn.hpp"
#include "seqlab/nn/transformer_layer.hpp"
#include "seqlab/version.hpp"

namespace {

using seqlab::Rng;
using seqlab::Tensor2;
using seqlab::Tensor3;

constexpr std::uint64_t kSeed = 20240601;  // inputs and weights; timings do not depend on it
constexpr std::size_t kTcnKernel = 3;
constexpr std::size_t kRecurrentLayers = 1;
// Used when the command line gives no --benchmark_min_time (Google Benchmark's own default is
// 0.5 s per case, about 10× longer for this grid). A later command-line value wins.
constexpr const char* kDefaultMinTime = "--benchmark_min_time=0.05";

// Grid (README "Cases"): batch, seq_len, hidden.
const std::vector<std::int64_t> kBatches = {8, 32};
const std::vector<std::int64_t> kSeqLens = {32, 128};
const std::vector<std::int64_t> kHiddens = {64, 256};

// Attention grid: batch, seq_len, d_model, n_heads (nthreads as above). seq_len 512 runs only
// with the small batch (register_attention_cases) so the whole binary stays near a minute and a
// half at the default min time.
const std::vector<std::int64_t> kAttnBatches = {8, 32};
const std::vector<std::int64_t> kAttnSeqLens = {32, 128};
constexpr std::int64_t kAttnLongSeqLen = 512;
constexpr std::int64_t kAttnLongBatch = 8;
const std::vector<std::int64_t> kAttnDModels = {64, 256};
const std::vector<std::int64_t> kAttnHeads = {4, 8};
constexpr std::size_t kFfMultiplier = 4;  // d_ff = 4·d_model (Vaswani et al. 2017 §3.3)

// Attention kernels (AttnKernel_*): long_range_recall's paper cell (copy memory T = 1000 ->
// seq_len 1020, the 2-layer decoder's d_model 28, 2 heads, batch 32, causal) always; the seq_len
// sweep for the `auto` threshold only with --attention_sweep (288 cases, several minutes):
// seq_len x d_model x n_heads x causal, batch kSweepTokens / seq_len (a fixed token count per
// iteration, so that the cases differ in the T² term only).
constexpr std::int64_t kPaperBatch = 32, kPaperSeqLen = 1020, kPaperDModel = 28, kPaperHeads = 2;
const std::vector<std::int64_t> kSweepSeqLens = {64, 128, 256, 512, 1024, 2048};
const std::vector<std::int64_t> kSweepDModels = {32, 64};
const std::vector<std::int64_t> kSweepHeads = {2, 4, 8};
constexpr std::int64_t kSweepTokens = 8192;
constexpr const char* kAttentionSweepFlag = "--attention_sweep";

enum class Pass { forward, forward_backward };

/// Times `forward()` (and `backward()` after it for Pass::forward_backward) of a layer already
/// built: one untimed warm-up call first (layers allocate their caches on the first call with a
/// new shape), then the benchmark loop. `forward`/`backward` return the output / input gradient.
template <class Forward, class Backward>
void time_passes(benchmark::State& state, Pass pass, Forward forward, Backward backward) {
  {
    Tensor3 y = forward();
    if (pass == Pass::forward_backward) y = backward();
  }
  for (auto _ : state) {
    Tensor3 y = forward();
    benchmark::DoNotOptimize(y.data());
    if (pass == Pass::forward_backward) {
      Tensor3 dx = backward();
      benchmark::DoNotOptimize(dx.data());
    }
    benchmark::ClobberMemory();
  }
}

/// Thread budgets benchmarked: 1 and the machine's cores (just 1 on a one-core machine).
std::vector<std::int64_t> thread_counts() {
  const int hw = seqlab::hardware_threads();
  if (hw <= 1) return {1};
  return {1, hw};
}

/// FLOPs of one forward of a one-directional recurrent layer stack with G gate blocks
/// (formula in the file comment): layer 0 has input D, layers k > 0 input H.
double recurrent_forward_flops(double G, double B, double T, double D, double H, double L) {
  double flops = 0.0;
  for (double k = 0; k < L; ++k) flops += 2.0 * B * T * G * H * ((k == 0 ? D : H) + H);
  return flops;
}

/// FLOPs of one forward of a TCN with `levels` blocks of C -> C channels (no downsample).
double tcn_forward_flops(double B, double T, double C, double k, double levels) {
  return levels * 2.0 * (2.0 * B * T * C * (k * C));
}

/// FLOPs of one self-attention forward (formula in the file comment): Q/K/V and output
/// projections plus the score and context products of all heads (independent of h).
double mha_forward_flops(double B, double T, double D) {
  return 2.0 * B * T * D * (3.0 * D) + 2.0 * B * T * D * D + 2.0 * 2.0 * B * T * T * D;
}

/// FLOPs of one encoder-layer forward: self-attention plus the feed-forward's two linears.
double encoder_forward_flops(double B, double T, double D, double F) {
  return mha_forward_flops(B, T, D) + 2.0 * 2.0 * B * T * D * F;
}

/// Smallest number of TCN levels whose receptive field 1 + 2·(k−1)·(2^Lv − 1) (tcn.hpp) is >= T.
std::size_t tcn_levels_for(std::size_t T, std::size_t k) {
  std::size_t levels = 1;
  while (1 + 2 * (k - 1) * ((std::size_t{1} << levels) - 1) < T) ++levels;
  return levels;
}

/// x [d0, d1, d2] filled with U(-1, 1).
Tensor3 random_tensor3(std::size_t d0, std::size_t d1, std::size_t d2, Rng& rng) {
  Tensor3 x = Tensor3::from_shape({d0, d1, d2});
  rng.fill_uniform(x, -1.0f, 1.0f);
  return x;
}

/// The counters every layer case reports (README.md, "Counters").
void set_layer_counters(benchmark::State& state, double tokens, double flops, double seq_steps) {
  using benchmark::Counter;
  state.counters["tokens_per_s"] = Counter(tokens, Counter::kIsIterationInvariantRate);
  state.counters["flop_per_s"] = Counter(flops, Counter::kIsIterationInvariantRate);
  state.counters["seq_steps"] = Counter(seq_steps);
}

// Gate blocks per layer type (rows of weight_ih in units of H).
template <class Layer> constexpr double kGates = 0;
template <> constexpr double kGates<seqlab::RNN> = 1;
template <> constexpr double kGates<seqlab::GRU> = 3;
template <> constexpr double kGates<seqlab::LSTM> = 4;

/// Args: batch, seq_len, hidden, nthreads. One Layer(H, H, 1) on x [B, T, H]; forward, or forward
/// then backward with a fixed dy [B, T, H]. Gradients accumulate across iterations (no zero_grad:
/// it is not layer work).
template <class Layer>
void bm_recurrent(benchmark::State& state, Pass pass) {
  const auto B = static_cast<std::size_t>(state.range(0));
  const auto T = static_cast<std::size_t>(state.range(1));
  const auto H = static_cast<std::size_t>(state.range(2));
  try {
    seqlab::set_num_threads(static_cast<int>(state.range(3)));
    Rng rng(seqlab::derive_seed(kSeed, B, T, H));
    Layer layer(H, H, kRecurrentLayers, rng);
    const Tensor3 x = random_tensor3(B, T, H, rng);
    const Tensor3 dy = random_tensor3(B, T, H, rng);
    time_passes(state, pass, [&] { return layer.forward(x); }, [&] { return layer.backward(dy); });
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double fwd = recurrent_forward_flops(kGates<Layer>, B, T, H, H, kRecurrentLayers);
  set_layer_counters(state, static_cast<double>(B * T),
                     pass == Pass::forward ? fwd : 3.0 * fwd,
                     static_cast<double>(T * kRecurrentLayers));
}

/// Args: batch, seq_len, hidden (= channels), nthreads. TCN(H, {H × Lv}, k = 3, dropout 0) with the
/// fewest levels Lv whose receptive field covers T.
void bm_tcn(benchmark::State& state, Pass pass) {
  const auto B = static_cast<std::size_t>(state.range(0));
  const auto T = static_cast<std::size_t>(state.range(1));
  const auto C = static_cast<std::size_t>(state.range(2));
  const std::size_t levels = tcn_levels_for(T, kTcnKernel);
  std::size_t receptive_field = 0;
  try {
    seqlab::set_num_threads(static_cast<int>(state.range(3)));
    Rng rng(seqlab::derive_seed(kSeed, B, T, C));
    seqlab::TCN tcn(C, std::vector<std::size_t>(levels, C), kTcnKernel, 0.0f, rng);
    receptive_field = tcn.receptive_field();
    const Tensor3 x = random_tensor3(B, T, C, rng);
    const Tensor3 dy = random_tensor3(B, T, C, rng);
    time_passes(state, pass, [&] { return tcn.forward(x); }, [&] { return tcn.backward(dy); });
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double fwd = tcn_forward_flops(B, T, C, kTcnKernel, levels);
  set_layer_counters(state, static_cast<double>(B * T), pass == Pass::forward ? fwd : 3.0 * fwd,
                     static_cast<double>(2 * levels));
  state.SetLabel("levels=" + std::to_string(levels) + " rf=" + std::to_string(receptive_field));
}

/// Args: batch, seq_len, d_model, n_heads, nthreads. MultiheadAttention(D, h) self-attention on
/// x [B, T, D] (no mask, causal off); forward, or forward then backward with a fixed dy.
void bm_mha(benchmark::State& state, Pass pass) {
  const auto B = static_cast<std::size_t>(state.range(0));
  const auto T = static_cast<std::size_t>(state.range(1));
  const auto D = static_cast<std::size_t>(state.range(2));
  const auto h = static_cast<std::size_t>(state.range(3));
  try {
    seqlab::set_num_threads(static_cast<int>(state.range(4)));
    Rng rng(seqlab::derive_seed(kSeed, B * T, D, h));
    seqlab::MultiheadAttention attn(D, h, rng);
    const seqlab::AttentionMask mask{};  // causal off, no padding
    const Tensor3 x = random_tensor3(B, T, D, rng);
    const Tensor3 dy = random_tensor3(B, T, D, rng);
    time_passes(state, pass, [&] { return attn.forward(x, mask); }, [&] { return attn.backward(dy); });
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double fwd = mha_forward_flops(B, T, D);
  set_layer_counters(state, static_cast<double>(B * T), pass == Pass::forward ? fwd : 3.0 * fwd,
                     1.0);
}

/// Args: batch, seq_len, d_model, n_heads, causal (0/1), nthreads. MultiheadAttention(D, h)
/// self-attention with the given kernel (AttentionKernel::fused or materialised) on x [B, T, D],
/// causal mask or none, no padding; forward, or forward then backward with a fixed dy. Counters
/// (README.md, "Choosing the attention kernel"): flop_per_s (the GEMM work this kernel executes,
/// file comment), score_entries (E per forward) and activation_bytes (what the forward keeps for
/// backward, MultiheadAttention::activation_bytes).
void bm_mha_kernel(benchmark::State& state, Pass pass, seqlab::AttentionKernel kernel) {
  const auto B = static_cast<std::size_t>(state.range(0));
  const auto T = static_cast<std::size_t>(state.range(1));
  const auto D = static_cast<std::size_t>(state.range(2));
  const auto h = static_cast<std::size_t>(state.range(3));
  const bool causal = state.range(4) != 0;
  std::size_t entries = 0, bytes = 0;
  try {
    seqlab::set_num_threads(static_cast<int>(state.range(5)));
    Rng rng(seqlab::derive_seed(kSeed, B * T, D, h));
    seqlab::MultiheadAttention attn(D, h, rng);
    attn.set_kernel(kernel);
    const seqlab::AttentionMask mask{causal, nullptr};
    const Tensor3 x = random_tensor3(B, T, D, rng);
    const Tensor3 dy = random_tensor3(B, T, D, rng);
    time_passes(state, pass, [&] { return attn.forward(x, mask); }, [&] { return attn.backward(dy); });
    entries = attn.score_entries();
    bytes = attn.activation_bytes();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double proj = 8.0 * B * T * D * D, per_entry = 2.0 * static_cast<double>(D / h);
  const double bwd_products = kernel == seqlab::AttentionKernel::fused ? 5.0 : 4.0;
  double flops = proj + 2.0 * per_entry * static_cast<double>(entries);
  if (pass == Pass::forward_backward) flops += 2.0 * proj + bwd_products * per_entry * static_cast<double>(entries);
  set_layer_counters(state, static_cast<double>(B * T), flops, 1.0);
  state.counters["score_entries"] = benchmark::Counter(static_cast<double>(entries));
  state.counters["activation_bytes"] = benchmark::Counter(static_cast<double>(bytes));
}

/// Args: batch, seq_len, d_model, n_heads, nthreads. TransformerEncoderLayer with pre-norm
/// LayerNorm, d_ff = 4·D, relu, dropout 0 (train mode; dropout 0 draws nothing), no mask.
void bm_encoder_layer(benchmark::State& state, Pass pass) {
  const auto B = static_cast<std::size_t>(state.range(0));
  const auto T = static_cast<std::size_t>(state.range(1));
  const auto D = static_cast<std::size_t>(state.range(2));
  const auto h = static_cast<std::size_t>(state.range(3));
  const std::size_t F = kFfMultiplier * D;
  try {
    seqlab::set_num_threads(static_cast<int>(state.range(4)));
    Rng rng(seqlab::derive_seed(kSeed, B * T, D, h));
    seqlab::TransformerLayerConfig cfg;
    cfg.d_model = D;
    cfg.n_heads = h;
    cfg.d_ff = F;
    cfg.activation = "relu";
    cfg.dropout = 0.0f;
    cfg.norm = "layer_norm";
    cfg.norm_placement = "pre";
    cfg.seed = kSeed;
    seqlab::TransformerEncoderLayer layer(cfg, rng);
    const seqlab::AttentionMask mask{};
    const Tensor3 x = random_tensor3(B, T, D, rng);
    const Tensor3 dy = random_tensor3(B, T, D, rng);
    time_passes(state, pass, [&] { return layer.forward(x, mask); }, [&] { return layer.backward(dy); });
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double fwd = encoder_forward_flops(B, T, D, static_cast<double>(F));
  set_layer_counters(state, static_cast<double>(B * T), pass == Pass::forward ? fwd : 3.0 * fwd,
                     1.0);
}

/// Args: M, N, K, nthreads. C [M, N] = A [M, K] · Wᵀ (W stored [N, K]), beta = 0: the layout of
/// every layer product x·Wᵀ in seqlab.
void bm_sgemm(benchmark::State& state) {
  const auto M = static_cast<std::size_t>(state.range(0));
  const auto N = static_cast<std::size_t>(state.range(1));
  const auto K = static_cast<std::size_t>(state.range(2));
  try {
    seqlab::set_num_threads(static_cast<int>(state.range(3)));
    Rng rng(seqlab::derive_seed(kSeed, M, N, K));
    Tensor2 A = Tensor2::from_shape({M, K});
    Tensor2 W = Tensor2::from_shape({N, K});
    Tensor2 C = Tensor2::from_shape({M, N});
    rng.fill_uniform(A, -1.0f, 1.0f);
    rng.fill_uniform(W, -1.0f, 1.0f);
    seqlab::gemm(false, true, M, N, K, 1.0f, A.data(), K, W.data(), K, 0.0f, C.data(), N);
    for (auto _ : state) {
      seqlab::gemm(false, true, M, N, K, 1.0f, A.data(), K, W.data(), K, 0.0f, C.data(), N);
      benchmark::DoNotOptimize(C.data());
      benchmark::ClobberMemory();
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.counters["flop_per_s"] = benchmark::Counter(2.0 * M * N * K,
                                                    benchmark::Counter::kIsIterationInvariantRate);
}

void register_layer_cases() {
  const std::vector<std::int64_t> threads = thread_counts();
  struct Case {
    const char* name;
    void (*fn)(benchmark::State&, Pass);
  };
  const Case cases[] = {
      {"RNN", bm_recurrent<seqlab::RNN>},
      {"LSTM", bm_recurrent<seqlab::LSTM>},
      {"GRU", bm_recurrent<seqlab::GRU>},
      {"TCN", bm_tcn},
  };
  for (const Case& c : cases) {
    for (Pass pass : {Pass::forward, Pass::forward_backward}) {
      const std::string name =
          std::string(c.name) + (pass == Pass::forward ? "_fwd" : "_fwdbwd");
      benchmark::RegisterBenchmark(name.c_str(), c.fn, pass)
          ->ArgNames({"batch", "seq_len", "hidden", "nthreads"})
          ->ArgsProduct({kBatches, kSeqLens, kHiddens, threads})
          ->UseRealTime()  // OpenBLAS runs its own threads: CPU time of the main thread undercounts
          ->Unit(benchmark::kMillisecond);
    }
  }
}

/// Args: heads (= B·h), M, N, K, nthreads. The attention score product of every head at once,
/// S_b [M, N] = Q_b [M, K] · K_bᵀ (K_b stored [N, K]), b < heads, contiguous per head, through
/// seqlab::gemm_strided_batched (the products MultiheadAttention makes head by head; M = N = T, K = d_k).
void bm_sgemm_batched(benchmark::State& state) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  const auto M = static_cast<std::size_t>(state.range(1));
  const auto N = static_cast<std::size_t>(state.range(2));
  const auto K = static_cast<std::size_t>(state.range(3));
  try {
    seqlab::set_num_threads(static_cast<int>(state.range(4)));
    Rng rng(seqlab::derive_seed(kSeed, batch * M, N, K));
    Tensor2 A = Tensor2::from_shape({batch * M, K});
    Tensor2 W = Tensor2::from_shape({batch * N, K});
    Tensor2 C = Tensor2::from_shape({batch * M, N});
    rng.fill_uniform(A, -1.0f, 1.0f);
    rng.fill_uniform(W, -1.0f, 1.0f);
    auto run = [&] {
      seqlab::gemm_strided_batched(false, true, M, N, K, 1.0f, A.data(), K, M * K, W.data(), K,
                                   N * K, 0.0f, C.data(), N, M * N, batch);
    };
    run();
    for (auto _ : state) {
      run();
      benchmark::DoNotOptimize(C.data());
      benchmark::ClobberMemory();
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.counters["flop_per_s"] = benchmark::Counter(
      2.0 * batch * M * N * K, benchmark::Counter::kIsIterationInvariantRate);
}

void register_attention_cases() {
  const std::vector<std::int64_t> threads = thread_counts();
  struct Case {
    const char* name;
    void (*fn)(benchmark::State&, Pass);
  };
  const Case cases[] = {
      {"MHA", bm_mha},
      {"EncoderLayer", bm_encoder_layer},
  };
  for (const Case& c : cases) {
    for (Pass pass : {Pass::forward, Pass::forward_backward}) {
      const std::string name =
          std::string(c.name) + (pass == Pass::forward ? "_fwd" : "_fwdbwd");
      benchmark::RegisterBenchmark(name.c_str(), c.fn, pass)
          ->ArgNames({"batch", "seq_len", "d_model", "n_heads", "nthreads"})
          ->ArgsProduct({kAttnBatches, kAttnSeqLens, kAttnDModels, kAttnHeads, threads})
          ->ArgsProduct({{kAttnLongBatch}, {kAttnLongSeqLen}, kAttnDModels, kAttnHeads, threads})
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

/// AttnKernel_{fused,materialised}_{fwd,fwdbwd}: the paper cell, and with `sweep` the seq_len sweep
/// (fwdbwd only, causal and not).
void register_attention_kernel_cases(bool sweep) {
  const std::vector<std::int64_t> threads = thread_counts();
  struct Kernel {
    const char* name;
    seqlab::AttentionKernel kernel;
  };
  for (const Kernel k : {Kernel{"fused", seqlab::AttentionKernel::fused},
                         Kernel{"materialised", seqlab::AttentionKernel::materialised}}) {
    for (Pass pass : {Pass::forward, Pass::forward_backward}) {
      const std::string name =
          std::string("AttnKernel_") + k.name + (pass == Pass::forward ? "_fwd" : "_fwdbwd");
      const auto reg = [&](const std::vector<std::vector<std::int64_t>>& args) {
        benchmark::RegisterBenchmark(name.c_str(), bm_mha_kernel, pass, k.kernel)
            ->ArgNames({"batch", "seq_len", "d_model", "n_heads", "causal", "nthreads"})
            ->ArgsProduct(args)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      };
      reg({{kPaperBatch}, {kPaperSeqLen}, {kPaperDModel}, {kPaperHeads}, {1}, threads});
      if (!sweep || pass == Pass::forward) continue;
      for (std::int64_t T : kSweepSeqLens)  // one family per seq_len (24 cases each)
        reg({{std::max<std::int64_t>(1, kSweepTokens / T)}, {T}, kSweepDModels, kSweepHeads, {0, 1}, threads});
    }
  }
}

void register_sgemm_cases() {
  const std::vector<std::int64_t> threads = thread_counts();
  auto reg = [&](const char* name, const std::vector<std::vector<std::int64_t>>& shapes) {
    auto* b = benchmark::RegisterBenchmark(name, bm_sgemm)
                  ->ArgNames({"M", "N", "K", "nthreads"})
                  ->UseRealTime()
                  ->Unit(benchmark::kMicrosecond);
    for (const auto& s : shapes)
      for (std::int64_t n : threads) b->Args({s[0], s[1], s[2], n});
  };
  // One recurrent step: h_{t-1} [B, H] × W_hhᵀ [H, G·H] (G = 1 RNN, 3 GRU, 4 LSTM).
  std::vector<std::vector<std::int64_t>> step, proj, conv;
  for (std::int64_t B : kBatches)
    for (std::int64_t H : kHiddens)
      for (std::int64_t G : {1, 3, 4}) step.push_back({B, G * H, H});
  // All T steps' input projections at once, LSTM-shaped: [B·T, H] × W_ihᵀ [H, 4H]; and the TCN's
  // im2col convolution [B·T, 3C] × W̃ᵀ [3C, C]. B·T takes the grid's distinct values.
  std::vector<std::int64_t> rows;
  for (std::int64_t B : kBatches)
    for (std::int64_t T : kSeqLens) {
      bool seen = false;
      for (std::int64_t r : rows) seen = seen || r == B * T;
      if (!seen) rows.push_back(B * T);
    }
  for (std::int64_t r : rows)
    for (std::int64_t H : kHiddens) {
      proj.push_back({r, 4 * H, H});
      conv.push_back({r, H, static_cast<std::int64_t>(kTcnKernel) * H});
    }
  reg("SGEMM_step", step);
  reg("SGEMM_proj", proj);
  reg("SGEMM_conv", conv);
  reg("SGEMM_square", {{1024, 1024, 1024}});  // the machine's large-GEMM rate

  // Attention scores of all heads: B·h blocks of Q_i [T, d_k] · K_iᵀ, for B = 8, h = 8 (64 heads)
  // and every seq_len and d_model of the attention grid (d_k = D / 8).
  auto* attn = benchmark::RegisterBenchmark("SGEMM_attn", bm_sgemm_batched)
                   ->ArgNames({"heads", "M", "N", "K", "nthreads"})
                   ->UseRealTime()
                   ->Unit(benchmark::kMicrosecond);
  std::vector<std::int64_t> attn_lens = kAttnSeqLens;
  attn_lens.push_back(kAttnLongSeqLen);
  constexpr std::int64_t kRefHeads = 8;
  for (std::int64_t T : attn_lens)
    for (std::int64_t D : kAttnDModels)
      for (std::int64_t n : threads) attn->Args({kAttnLongBatch * kRefHeads, T, T, D / kRefHeads, n});
}

}  // namespace

int main(int argc, char** argv) {
  seqlab::ensure_blas_kernels(argv);  // OpenBLAS's generic fallback kernels on a CPU it does not know
  // argv with the default min time first, so that a --benchmark_min_time given later wins;
  // --attention_sweep is ours (not passed on).
  std::vector<char*> args;
  std::string default_min_time = kDefaultMinTime;
  bool attention_sweep = false;
  args.push_back(argv[0]);
  args.push_back(default_min_time.data());
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == kAttentionSweepFlag) {
      attention_sweep = true;
      continue;
    }
    args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);

  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  register_layer_cases();
  register_attention_cases();
  register_attention_kernel_cases(attention_sweep);
  register_sgemm_cases();
  benchmark::AddCustomContext("seqlab_version", seqlab::kVersion);
  benchmark::AddCustomContext("blas_config", seqlab::blas_config());
  benchmark::AddCustomContext("hardware_threads", std::to_string(seqlab::hardware_threads()));
  benchmark::AddCustomContext("flop_count",
                              "analytic GEMM FLOPs (experiments/bench/README.md); fwdbwd = 3x fwd");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
