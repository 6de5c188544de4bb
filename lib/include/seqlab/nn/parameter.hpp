#pragma once
// Parameter and Module: the layer contract of DESIGN.md.
//
// A layer owns its Parameters (value and grad, same shape) and names them as PyTorch's
// state_dict does ("weight", "bias", "weight_ih_l0"...). `backward` *adds* into `grad`;
// `zero_grad()` clears it. Values are stored as dynamic-rank xt::xarray<float> so one list can hold
// matrices and vectors (optimizers, checkpoints and fixtures walk that list); layers read them
// through raw pointers into GEMMs or through fixed-rank views.
#include <cstddef>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

namespace seqlab {

struct Parameter {
  /// `name` is the leaf key ("weight"); `shape` as PyTorch's (e.g. Linear weight [out, in]).
  Parameter(std::string name, std::vector<std::size_t> shape);

  std::string name;
  xt::xarray<float> value;
  xt::xarray<float> grad;  // same shape as value, starts at 0

  std::size_t size() const { return value.size(); }
  void zero_grad();
};

/// A parameter with its full state_dict key ("layers.0.weight_ih_l0").
struct NamedParameter {
  std::string key;
  Parameter* param;
};

/// Base of every layer and model: parameter listing, gradient clearing, train/eval mode.
class Module {
 public:
  virtual ~Module() = default;

  /// Appends this module's parameters to `out`, each key being `prefix` + its own key, in the
  /// order PyTorch's state_dict lists them. Sub-modules are visited with prefix "<prefix><name>.".
  virtual void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) = 0;

  std::vector<NamedParameter> named_parameters(const std::string& prefix = "");
  std::vector<Parameter*> parameters();
  /// Total number of scalar parameters.
  std::size_t num_parameters();
  void zero_grad();

  /// train() / eval() switch BatchNorm statistics and dropout; a module with children overrides
  /// set_training to forward the mode.
  virtual void set_training(bool training) { training_ = training; }
  void train() { set_training(true); }
  void eval() { set_training(false); }
  bool training() const { return training_; }

 private:
  bool training_ = true;
};

}  // namespace seqlab
