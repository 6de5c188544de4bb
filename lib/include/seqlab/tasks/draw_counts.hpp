#pragma once
// Statistics of the counts of n independent draws, each uniform over k categories: what a
// predictor knows when it remembers which symbols (or values) a sequence contained, and how often,
// but not where. They give the chance levels of the best predictors that ignore a task's
// dependency while seeing its content: MQAR's key-agnostic predictor
// (MultiQueryAssociativeRecall::key_agnostic_accuracy) and copy memory's most-frequent-symbol
// predictor (CopyMemoryTask::most_frequent_symbol_accuracy).
//
// With (c_1 .. c_k) the counts (multinomial(n; 1/k, .., 1/k)), a draw chosen uniformly from the
// n is category v with probability c_v / n given the counts. So
//   - the best accuracy of a guess from the counts is that of the most frequent category:
//     E[max_v c_v] / n (ties broken in any way: every maximiser scores max_v c_v / n);
//   - the best cross-entropy predicts p(v) = c_v / n, and scores the expected plug-in entropy
//     E[−Σ_v (c_v / n) ln(c_v / n)] nats.
// plots/seqlab_stats.py computes the same two numbers (expected_max_count,
// expected_plugin_entropy) for the report's verdicts.
namespace seqlab {

/// E[max_v c_v] for n >= 0 draws over k >= 1 categories (0 for n = 0). Exact up to rounding:
/// E[max] = Σ_{m=0}^{n-1} (1 − P(max <= m)), each P(max <= m) by a dynamic programme over the
/// categories (category i receives c of the draws still unplaced with probability
/// Binomial(left, 1/(k − i)), c <= m). O(k · n³) operations. Throws std::invalid_argument for
/// n < 0 or k < 1, naming the argument.
double expected_max_count(int n, int k);

/// E[−Σ_v (c_v / n) ln(c_v / n)] in nats for n >= 1 draws over k >= 1 categories:
/// k · Σ_{c=1}^{n} Binomial(n, 1/k)(c) · (c / n) · (−ln(c / n)) by the symmetry of the
/// categories. Throws std::invalid_argument for n < 1 or k < 1, naming the argument.
double expected_plugin_entropy(int n, int k);

}  // namespace seqlab
