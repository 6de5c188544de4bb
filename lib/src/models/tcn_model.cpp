#include "seqlab/models/tcn_model.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "seqlab/core/threads.hpp"

namespace seqlab {

namespace {

// Elements per thread of the step-norm loop below (as the layers' element-wise grain).
constexpr std::size_t kNormGrain = std::size_t{1} << 16;

const ModelConfig& require_tcn(const ModelConfig& cfg) {
  if (cfg.model != "tcn")
    throw std::invalid_argument("TCNModel: model = '" + cfg.model +
                                "'; allowed tcn (use make_model for others)");
  return cfg;
}

}  // namespace

TCNModel::TCNModel(const ModelConfig& cfg, Rng& rng)
    : InputBodyHeadModel(require_tcn(cfg), rng),
      tcn(cfg_.body_input_size(), cfg_.tcn_channels(), cfg_.kernel_size, cfg_.dropout, rng,
          cfg_.weight_norm) {
  build_head(rng);
}

std::size_t TCNModel::sequential_steps(std::size_t /*seq_len*/) const {
  std::size_t convs = 0;
  for (std::size_t i = 0; i < tcn.num_levels(); ++i) convs += 2;  // conv1 then conv2 of block i
  return convs;
}

Tensor3 TCNModel::body_forward(const Tensor3& u) { return tcn.forward(u); }

Tensor3 TCNModel::body_backward(const Tensor3& dh, Tensor2& step_norms) {
  // TCN::backward run block by block (the same loop) to record ‖∂L/∂y^l_t‖ at every block output.
  const std::size_t L = tcn.num_levels(), B = dh.shape()[0], T = dh.shape()[1];
  step_norms = xt::zeros<float>({L, T});
  Tensor3 g;
  const Tensor3* cur = &dh;  // ∂L/∂y^l, starting at l = L-1
  for (std::size_t l = L; l-- > 0;) {
    const std::size_t C = cur->shape()[2];
    const float* g_l = cur->data();
    float* norms = step_norms.data() + l * T;
    // steps over the thread budget (each step's sum in the same order: the same bits)
    parallel_for(T, std::max<std::size_t>(1, kNormGrain / std::max<std::size_t>(1, B * C)),
                 [&](std::size_t t0, std::size_t t1, std::size_t) {
      for (std::size_t t = t0; t < t1; ++t) {
        double s = 0.0;
        for (std::size_t b = 0; b < B; ++b) {
          const float* row = g_l + (b * T + t) * C;
          for (std::size_t c = 0; c < C; ++c) s += double(row[c]) * row[c];
        }
        norms[t] = static_cast<float>(std::sqrt(s));
      }
    });
    g = tcn.block(l).backward(*cur);  // ∂L/∂y^{l-1} (∂L/∂u for l = 0)
    cur = &g;
  }
  return g;
}

void TCNModel::collect_body_parameters(const std::string& prefix,
                                       std::vector<NamedParameter>& out) {
  tcn.collect_parameters(prefix, out);
}

void TCNModel::set_body_training(bool training) { tcn.set_training(training); }

std::string TCNModel::describe_body() const {
  std::ostringstream os;
  os << "channels=" << shape_string(cfg_.tcn_channels()) << " kernel=" << cfg_.kernel_size
     << " receptive_field=" << tcn.receptive_field();
  if (cfg_.weight_norm) os << " weight_norm";
  if (cfg_.dropout > 0.0f) os << " dropout=" << cfg_.dropout;
  return os.str();
}

void TCNModel::collect_body_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) {
  tcn.collect_buffers(prefix, out);
}

}  // namespace seqlab
