#include "seqlab/tasks/adding_problem.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace seqlab {

AddingProblem::AddingProblem(int seq_len) : seq_len_(seq_len) {
  if (seq_len < 2)
    throw std::invalid_argument("AddingProblem: seq_len must be >= 2 (two distinct marked positions), got " +
                                std::to_string(seq_len));
}

AddingBatch AddingProblem::sample(std::size_t batch, Rng& rng) const {
  if (batch == 0) throw std::invalid_argument("AddingProblem::sample: batch must be >= 1, got 0");
  const std::size_t T = static_cast<std::size_t>(seq_len_);
  AddingBatch out{Tensor3::from_shape({batch, T, std::size_t{2}}), Tensor2::from_shape({batch, std::size_t{1}}),
                  std::vector<std::array<int, 2>>(batch)};
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < T; ++t) {
      out.inputs(b, t, 0) = rng.uniform();
      out.inputs(b, t, 1) = 0.0f;
    }
    const auto p1 = static_cast<std::size_t>(rng.uniform_int(static_cast<std::uint64_t>(T)));
    auto p2 = static_cast<std::size_t>(rng.uniform_int(static_cast<std::uint64_t>(T - 1)));
    if (p2 >= p1) ++p2;
    out.inputs(b, p1, 1) = 1.0f;
    out.inputs(b, p2, 1) = 1.0f;
    out.targets(b, 0) = out.inputs(b, p1, 0) + out.inputs(b, p2, 0);
    out.positions[b] = {static_cast<int>(p1), static_cast<int>(p2)};
  }
  return out;
}

int AddingProblem::dependency_distance(const std::array<int, 2>& positions) const {
  return (seq_len_ - 1) - std::min(positions[0], positions[1]);
}

}  // namespace seqlab
