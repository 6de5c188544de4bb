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
//
// state_dict() / load_state_dict(): PyTorch's Module.state_dict and load_state_dict
// (https://pytorch.org/docs/1.13/generated/torch.nn.Module.html): the parameters and the tensor
// buffers (running statistics, counters) by key, so weights move between seqlab and torch.nn
// one to one (nn/safetensors.hpp writes them to a file Python reads with numpy alone). The
// generators and experiment statistics among the buffers are training state, not a model's
// weights: checkpoints (train/checkpoint.hpp) save them, state_dict does not, as torch.
#include <cstddef>
#include <cstdint>
#include <map>
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

/// One state_dict entry, row-major: float32 (parameters, BatchNorm's running_mean and
/// running_var; safetensors dtype F32) or int64 (counters such as BatchNorm's
/// num_batches_tracked, shape [] as torch's; dtype I64).
using StateTensor = std::variant<Array, ArrayOf<std::int64_t>>;
/// State dict: full key ("layers.0.self_attn.in_proj_weight") -> tensor, as torch's state_dict.
/// Sorted by key (torch's is ordered by registration; loading is by key in both).
using StateDict = std::map<std::string, StateTensor>;

/// The shape of a state_dict entry ("[]" for a scalar counter).
std::vector<std::size_t> state_shape(const StateTensor& t);
/// "F32" or "I64" (the safetensors dtype names).
const char* state_dtype(const StateTensor& t);

/// What load_state_dict(strict = false) skipped, as torch's (missing_keys, unexpected_keys):
/// keys of the module absent from the state dict, keys of the state dict the module does not have.
struct LoadStateResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
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

  /// Copies of every parameter (Array, its PyTorch shape) and of every float or integer buffer
  /// (Tensor1 buffers as Array [n], counters as ArrayOf<int64> of shape []), keyed as
  /// named_parameters / named_buffers with `prefix` prepended. Generator and double-vector
  /// buffers are not included (file comment). Throws std::logic_error if two entries have the
  /// same key (a module listing something twice).
  StateDict state_dict(const std::string& prefix = "");
  /// Assigns the values of `sd` to the parameters and buffers of the same keys (torch's
  /// load_state_dict). Every entry of `sd` whose key the module has must have that entry's
  /// dtype (F32 for parameters and float buffers, I64 for counters) and exactly its shape;
  /// strict = true also requires every key of the module to be in `sd` and no other key.
  /// All checks run before anything is assigned, so a failed load changes nothing. Throws
  /// std::invalid_argument listing every problem with its key, as torch's message does:
  ///   load_state_dict: missing key(s) "head.bias"; unexpected key(s) "fc.weight";
  ///   size mismatch for "head.weight": the state dict has [4, 8], the module [10, 8];
  ///   dtype mismatch for "norm.num_batches_tracked": the state dict has F32, the module I64.
  /// Returns the keys that strict = false let through (always empty lists when strict).
  LoadStateResult load_state_dict(const StateDict& sd, bool strict = true);

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
