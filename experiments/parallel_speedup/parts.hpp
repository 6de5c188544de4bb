#pragma once
// The timed parts of parallel_speedup (one per cell: unit = part:model; README "Parts") and the
// rows every part writes.
//
//   scaling     the family's stack at the benchmark shape (scaling_batch, d_model, n_heads, d_ff)
//               at every seq_len of scaling_seq_lens, forward and forward+backward, at every thread
//               count of thread_counts; first the machine's SGEMM rate at the same thread counts
//               (the roofline reference)
//   crossover   the stack at 1 thread, forward+backward, batch crossover_batch, at every width d
//               of crossover_d_models (h = max(1, d / crossover_head_dim) heads, d_ff = 4·d) and
//               every seq_len n of crossover_seq_lens with d·crossover_ratio_min <= n <=
//               d·r_max, r_max = crossover_tcn_ratio_max for the TCN and the attention families
//               (which are compared with every other family) and crossover_ratio_max for the
//               others, and whose analytic forward+backward FLOPs are <= crossover_max_gflop
//               (crossover_points)
//   generation  batch 1, 1 thread, width d_model: for every prefix length n of
//               generation_prefixes, one decoding step after a prefix of n positions (LayerStack::
//               decode, then rewind_decode(n): every iteration is the step at prefix n), and the
//               parallel forward over the n positions of the prefix
// Every timed point of scaling and crossover also measures the bytes one forward keeps for
// backward (memory table), for each kernel of memory_kernels (attention families) or once.
//
// Tables (columns: main_columns(), rounds_columns(), memory_columns()):
//   main    one row per case: part, model, kernel, pass, shape, threads, the median / min / max
//           time per iteration over the rounds, throughput, speedup, FLOPs, roofline, steps
//   rounds  one row per case and round (timing.hpp's interleaved rounds): the paired repetitions
//           the plots take intervals from
//   memory  one row per point and kernel: analytic and measured bytes kept for backward
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "seqlab/experiment/experiment.hpp"
#include "stack.hpp"
#include "timing.hpp"

namespace parallel_speedup {

/// What identifies one timed case in the main and rounds tables.
struct PointInfo {
  std::string part, model, kernel = "none", match = "d_model", pass;
  std::size_t batch = 0, d_model = 0, hidden_size = 0, num_layers = 0, n_heads = 0, d_ff = 0,
              kernel_size = 0, n_params = 0, seed = 0, seq_len = 0, sequential_steps = 0;
  int threads = 1;
  double tokens = 0;                     // tokens per iteration (tokens_per_s = tokens / median)
  double flops = NAN;                    // analytic GEMM FLOPs per iteration
  double speedup = NAN;                  // median at 1 thread / this median (same point and pass)
  double sgemm_gflop_per_s = NAN;        // the cell's SGEMM rate at this thread count
};

const std::vector<std::string>& main_columns();
const std::vector<std::string>& rounds_columns();
const std::vector<std::string>& memory_columns();

/// One main-table row and one rounds-table row per round of `t` for the case `p`.
void add_timing_rows(const seqlab::experiment::Cell& cell, seqlab::experiment::CellOutput& out,
                     const PointInfo& p, const Timing& t);

/// The timed stack of `model` at width D, h heads, d_ff F for seq_len T: with match = params the
/// recurrent and TCN widths are the largest whose factory count_parameters is <= the Transformer
/// encoder layers' (hidden_size_for_budget); the attention families keep width D; the TCN has the
/// fewest levels covering T. Throws seqlab::ConfigError / std::invalid_argument for an invalid
/// combination.
StackConfig stack_config(const seqlab::experiment::Cell& cell, const std::string& model, std::size_t D,
                         std::size_t h, std::size_t F, std::size_t T);

/// Heads of the crossover stacks at width d: max(1, d / crossover_head_dim).
std::size_t crossover_heads(const seqlab::experiment::Cell& cell, std::size_t d);
/// The (d, n) points of a crossover cell of `model` (file comment), in order.
std::vector<std::pair<std::size_t, std::size_t>> crossover_points(const seqlab::experiment::Cell& cell,
                                                                  const std::string& model);

void run_scaling(const seqlab::experiment::Cell& cell, const std::string& model, seqlab::experiment::CellOutput& out);
void run_crossover(const seqlab::experiment::Cell& cell, const std::string& model, seqlab::experiment::CellOutput& out);
void run_generation(const seqlab::experiment::Cell& cell, const std::string& model, seqlab::experiment::CellOutput& out);

}  // namespace parallel_speedup
