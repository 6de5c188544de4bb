#pragma once
// norm_stability's warm-up study (README.md "Design", sub-claim 4): Pre-LN vs Post-LN as Xiong et
// al. 2020 (arXiv 2002.04745), on next-character language modelling of the cell's corpus with a
// causal Transformer (transformer_decoder). For every depth in `depths` and placement in
// `placements`: the per-layer gradient norms at initialisation (their Fig. 3; table init_grads),
// then one training run per warm-up length in `warmups` and peak learning rate in `lrs` (linear
// warm-up, then `warmup_schedule`), each from the same initial weights and the same batches, with
// the final validation loss, divergence and failure (main table) and its curve (table steps).
#include "seqlab/experiment/experiment.hpp"

namespace norm_stability {

/// The cell's runs, in the order depth, placement, warm-up, learning rate (the last fastest).
void run_warmup_cell(const seqlab::experiment::Cell& cell, seqlab::experiment::CellOutput& out);

}  // namespace norm_stability
