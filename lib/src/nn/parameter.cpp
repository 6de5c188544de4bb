#include "seqlab/nn/parameter.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
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

std::vector<std::size_t> state_shape(const StateTensor& t) {
  return std::visit(
      [](const auto& a) { return std::vector<std::size_t>(a.shape().begin(), a.shape().end()); }, t);
}

const char* state_dtype(const StateTensor& t) {
  return std::holds_alternative<Array>(t) ? "F32" : "I64";
}

namespace {

// One state_dict entry of a module: where its value lives.
struct StateSlot {
  Parameter* param = nullptr;       // F32, the parameter's shape
  Tensor1* floats = nullptr;        // F32 [n]
  std::int64_t* counter = nullptr;  // I64 []
};

// Every slot by key: parameters, then the float and integer buffers.
std::map<std::string, StateSlot> state_slots(Module& m, const std::string& prefix) {
  std::map<std::string, StateSlot> slots;
  auto add = [&](const std::string& key, StateSlot slot) {
    if (!slots.emplace(key, slot).second)
      throw std::logic_error("state_dict: key \"" + key + "\" is listed twice by the module");
  };
  for (const NamedParameter& np : m.named_parameters(prefix)) add(np.key, StateSlot{np.param, nullptr, nullptr});
  for (const NamedBuffer& nb : m.named_buffers(prefix)) {
    if (auto* const* t = std::get_if<Tensor1*>(&nb.ref)) add(nb.key, StateSlot{nullptr, *t, nullptr});
    if (auto* const* c = std::get_if<std::int64_t*>(&nb.ref)) add(nb.key, StateSlot{nullptr, nullptr, *c});
  }
  return slots;
}

std::vector<std::size_t> slot_shape(const StateSlot& s) {
  if (s.param != nullptr) return {s.param->value.shape().begin(), s.param->value.shape().end()};
  if (s.floats != nullptr) return {s.floats->size()};
  return {};
}

const char* slot_dtype(const StateSlot& s) { return s.counter != nullptr ? "I64" : "F32"; }

std::string quoted_list(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "\"" : ", \"") + k + "\"";
  return out;
}

}  // namespace

StateDict Module::state_dict(const std::string& prefix) {
  StateDict sd;
  for (const auto& [key, slot] : state_slots(*this, prefix)) {
    if (slot.param != nullptr) {
      sd.emplace(key, slot.param->value);
    } else if (slot.floats != nullptr) {
      Array a = Array::from_shape({slot.floats->size()});
      std::copy(slot.floats->begin(), slot.floats->end(), a.begin());
      sd.emplace(key, std::move(a));
    } else {
      ArrayOf<std::int64_t> a = ArrayOf<std::int64_t>::from_shape(std::vector<std::size_t>{});
      a() = *slot.counter;
      sd.emplace(key, std::move(a));
    }
  }
  return sd;
}

LoadStateResult Module::load_state_dict(const StateDict& sd, bool strict) {
  const std::map<std::string, StateSlot> slots = state_slots(*this, "");
  LoadStateResult result;
  std::vector<std::string> mismatches;
  for (const auto& [key, slot] : slots) {
    const auto it = sd.find(key);
    if (it == sd.end()) {
      result.missing_keys.push_back(key);
      continue;
    }
    const char* want = slot_dtype(slot);
    const char* got = state_dtype(it->second);
    if (std::string(want) != got) {
      mismatches.push_back(std::string("dtype mismatch for \"") + key + "\": the state dict has " +
                           got + ", the module " + want);
    } else if (state_shape(it->second) != slot_shape(slot)) {
      mismatches.push_back("size mismatch for \"" + key + "\": the state dict has " +
                           shape_string(state_shape(it->second)) + ", the module " +
                           shape_string(slot_shape(slot)));
    }
  }
  for (const auto& kv : sd)
    if (slots.count(kv.first) == 0) result.unexpected_keys.push_back(kv.first);
  std::vector<std::string> problems;
  if (strict && !result.missing_keys.empty())
    problems.push_back("missing key(s) " + quoted_list(result.missing_keys));
  if (strict && !result.unexpected_keys.empty())
    problems.push_back("unexpected key(s) " + quoted_list(result.unexpected_keys));
  problems.insert(problems.end(), mismatches.begin(), mismatches.end());
  if (!problems.empty()) {
    std::string msg = "load_state_dict: ";
    for (std::size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
    throw std::invalid_argument(msg);
  }
  // All checked: assign.
  for (const auto& [key, slot] : slots) {
    const auto it = sd.find(key);
    if (it == sd.end()) continue;
    if (slot.counter != nullptr) {
      *slot.counter = std::get<ArrayOf<std::int64_t>>(it->second)();
      continue;
    }
    const Array& a = std::get<Array>(it->second);
    float* dst = slot.param != nullptr ? slot.param->value.data() : slot.floats->data();
    std::copy(a.begin(), a.end(), dst);
  }
  return result;
}

}  // namespace seqlab
