#pragma once
// Parameter and Module: the layer contract of DESIGN.md.
//
// A layer owns its Parameters (value and grad, same shape) and names them as PyTorch's
// state_dict does ("weight", "bias", "weight_ih_l0"...). `backward` *adds* into `grad`;
// `zero_grad()` clears it. Values are stored as dynamic-rank arrays (Array) so one list can hold
// matrices and vectors (optimizers, checkpoints and fixtures walk that list); layers read them
// through raw pointers into GEMMs or through fixed-rank views.
//
// Buffers: state of a module that is not a Parameter (optimizers must not touch it) but that a
// checkpoint must save for training to continue bit for bit: BatchNorm's running_mean,
// running_var, num_batches_tracked (PyTorch's buffers) and the generator of every layer that draws
// random numbers while training (Dropout's "rng"). collect_buffers lists them recursively with
// state_dict-style keys ("layers.0.norm1.running_mean", "layers.0.dropout1.rng").
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <xtensor/xarray.hpp>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"

namespace seqlab {

struct Parameter {
  /// `name` is the leaf key ("weight"); `shape` as PyTorch's (e.g. Linear weight [out, in]).
  Parameter(std::string name, std::vector<std::size_t> shape);

  std::string name;
  Array value;
  Array grad;  // same shape as value, starts at 0

  std::size_t size() const { return value.size(); }
  void zero_grad();
};

/// A parameter with its full state_dict key ("layers.0.weight_ih_l0").
struct NamedParameter {
  std::string key;
  Parameter* param;
};

/// A module's non-parameter state entry with its full key: a float vector (Tensor1, e.g.
/// BatchNorm running_mean [d]), a double vector (experiment-defined statistics), an integer counter
/// (num_batches_tracked) or a random generator (Dropout's). The pointer refers into the module and
/// stays valid as long as the module does; checkpoints read and assign through it.
struct NamedBuffer {
  std::string key;
  std::variant<Tensor1*, std::vector<double>*, std::int64_t*, Rng*> ref;
};

/// Base of every layer and model: parameter listing, gradient clearing, train/eval mode.
class Module {
 public:
  virtual ~Module() = default;

  /// Appends this module's parameters to `out`, each key being `prefix` + its own key, in the
  /// order PyTorch's state_dict lists them. Sub-modules are visited with prefix "<prefix><name>.".
  virtual void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) = 0;

  /// Appends this module's buffers (file comment) to `out`, keys as collect_parameters' (prefix +
  /// own key), sub-modules visited with prefix "<prefix><name>.". Default: none. A module that owns
  /// buffers, or children that may own some (a Dropout, a Norm, a layer), must override it, or a
  /// checkpoint misses that state and a resumed run differs from an uninterrupted one.
  virtual void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) {
    (void)prefix;
    (void)out;
  }

  std::vector<NamedParameter> named_parameters(const std::string& prefix = "");
  /// Every buffer, in collect_buffers order (stable for a given architecture).
  std::vector<NamedBuffer> named_buffers(const std::string& prefix = "");
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
