#pragma once
// norm_stability's BatchNorm studies (README.md "Design", sub-claims 1-3) on masked-character
// modelling (masked_text.hpp) with a bidirectional Transformer encoder (transformer_encoder) whose
// every norm is the run's:
//   padding  for every norm in `norms` and every training condition in `train_pad_maxes` (padding
//            shares 0, pad_step, ..., max drawn per batch): a learning-rate pilot (choose_lr over
//            lr_grid on a validation set of the training distribution), one run of bn_steps
//            updates at batch bn_batch, then the test loss at every share of test_pads in the
//            four modes of evaluation.hpp (eval, train, precise, recal);
//   batch    for every norm in `batch_norms`: a pilot at batch batch_ref, then one run per batch
//            size in batch_sizes at equal training examples (`examples` sequences: examples / B
//            updates), the learning rate scaled as lr_ref·sqrt(B / batch_ref) (the square-root
//            rule for Adam, Malladi et al. 2022), no padding; test loss at share 0 in eval, train
//            and precise mode.
// Every run records its curve with the probe's batch-statistics deviation (probe.hpp, Shen et al.
// Fig. 2) in table steps, its summary in the main table, its pilot trials in table pilot and its
// test losses in table eval.
#include "seqlab/experiment/experiment.hpp"

namespace norm_stability {

void run_padding_cell(const seqlab::experiment::Cell& cell, seqlab::experiment::CellOutput& out);
void run_batch_cell(const seqlab::experiment::Cell& cell, seqlab::experiment::CellOutput& out);

}  // namespace norm_stability
