#include "seqlab/nn/parameter.hpp"

#include <utility>

namespace seqlab {

Parameter::Parameter(std::string name_, std::vector<std::size_t> shape)
    : name(std::move(name_)), value(xt::zeros<float>(shape)), grad(xt::zeros<float>(shape)) {}

void Parameter::zero_grad() { std::fill(grad.begin(), grad.end(), 0.0f); }

std::vector<NamedParameter> Module::named_parameters(const std::string& prefix) {
  std::vector<NamedParameter> out;
  collect_parameters(prefix, out);
  return out;
}

std::vector<NamedBuffer> Module::named_buffers(const std::string& prefix) {
  std::vector<NamedBuffer> out;
  collect_buffers(prefix, out);
  return out;
}

std::vector<Parameter*> Module::parameters() {
  std::vector<Parameter*> out;
  for (auto& np : named_parameters()) out.push_back(np.param);
  return out;
}

std::size_t Module::num_parameters() {
  std::size_t n = 0;
  for (auto* p : parameters()) n += p->size();
  return n;
}

void Module::zero_grad() {
  for (auto* p : parameters()) p->zero_grad();
}

}  // namespace seqlab
