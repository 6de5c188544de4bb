#include "seqlab/models/sequence_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "seqlab/core/threads.hpp"

namespace seqlab {

namespace {

ModelConfig validated(const ModelConfig& cfg) {
  cfg.validate();
  return cfg;
}

// ‖g_t‖_F over [B, C] for each t of g [B, T, C].
Tensor1 step_norms(const Tensor3& g) {
  const std::size_t B = g.shape()[0], T = g.shape()[1], C = g.shape()[2];
  Tensor1 out = xt::zeros<float>({T});
  float* po = out.data();
  // steps over the thread budget (each step's sum in the same order: the same bits)
  constexpr std::size_t kGrain = std::size_t{1} << 16;  // elements per thread
  parallel_for(T, std::max<std::size_t>(1, kGrain / std::max<std::size_t>(1, B * C)),
               [&](std::size_t t0, std::size_t t1, std::size_t) {
    for (std::size_t t = t0; t < t1; ++t) {
      double s = 0.0;
      for (std::size_t b = 0; b < B; ++b) {
        const float* row = g.data() + (b * T + t) * C;
        for (std::size_t c = 0; c < C; ++c) s += double(row[c]) * row[c];
      }
      po[t] = static_cast<float>(std::sqrt(s));
    }
  });
  return out;
}

}  // namespace

SequenceModel::SequenceModel(const ModelConfig& cfg) : cfg_(validated(cfg)) {}

InputBodyHeadModel::InputBodyHeadModel(const ModelConfig& cfg, Rng& rng) : SequenceModel(cfg) {
  if (cfg_.input == "embedding") {
    embedding.emplace(cfg_.vocab_size, cfg_.embedding_dim, rng, cfg_.padding_idx);
  } else if (cfg_.embedding_dim > 0) {
    input.emplace(cfg_.input_size, cfg_.embedding_dim, rng);
  }
}

void InputBodyHeadModel::build_head(Rng& rng) {
  head.emplace(cfg_.body_output_size(), cfg_.output_size, rng);
  num_params_ = num_parameters();
}

Tensor3 InputBodyHeadModel::forward(const IndexTensor2& ids) {
  if (!embedding)
    throw std::logic_error(cfg_.model + " model: forward(ids) needs input = embedding; this model "
                           "has input = linear (call forward(x) with x [B, T, " +
                           std::to_string(cfg_.input_size) + "])");
  if (ids.shape()[1] == 0)
    throw ShapeError(cfg_.model + " model: ids has shape " + shape_string(ids.shape()) +
                     "; seq_len must be >= 1");
  return run(embedding->forward(ids));
}

Tensor3 InputBodyHeadModel::forward(const Tensor3& x) {
  if (embedding)
    throw std::logic_error(cfg_.model + " model: forward(x) needs input = linear; this model has "
                           "input = embedding (call forward(ids) with token ids [B, T])");
  check_shape((cfg_.model + " model.forward: x").c_str(), x,
              {-1, -1, static_cast<long>(cfg_.input_size)});
  if (x.shape()[1] == 0)
    throw ShapeError(cfg_.model + " model: x has shape " + shape_string(x.shape()) +
                     "; seq_len must be >= 1");
  return run(input ? input->forward(x) : x);
}

Tensor3 InputBodyHeadModel::body_head_forward(const Tensor3& u) {
  return head->forward(body_forward(u));  // [B, T, O]; the body's output becomes the head's cache
}

Tensor3 InputBodyHeadModel::body_head_backward(const Tensor3& dlogits, Tensor2& step_norms) {
  return body_backward(head->backward(dlogits), step_norms);
}

Tensor3 InputBodyHeadModel::run(const Tensor3& u) {
  if (!cfg_.last_position()) {
    Tensor3 y = body_head_forward(u);  // [B, T, O]
    B_ = y.shape()[0];
    T_ = y.shape()[1];
    has_forward_ = true;
    return y;
  }
  Tensor3 h = body_forward(u);  // [B, T, H]
  B_ = h.shape()[0];
  T_ = h.shape()[1];
  has_forward_ = true;
  // last_position: the head reads h[:, T-1] only.
  const std::size_t H = h.shape()[2];
  Tensor2 last({B_, H});
  for (std::size_t b = 0; b < B_; ++b) {
    const float* src = h.data() + (b * T_ + (T_ - 1)) * H;
    std::copy(src, src + H, last.data() + b * H);
  }
  const Tensor2 y = head->forward(last);  // [B, O]
  Tensor3 out({B_, 1, cfg_.output_size});
  std::copy(y.begin(), y.end(), out.begin());
  return out;
}

void InputBodyHeadModel::backward(const Tensor3& dlogits) {
  if (!has_forward_) throw std::logic_error(cfg_.model + " model.backward: called before forward");
  const std::size_t O = cfg_.output_size, H = cfg_.body_output_size();
  Tensor3 du;  // [B, T, E]
  if (!cfg_.last_position()) {
    check_shape((cfg_.model + " model.backward: dlogits").c_str(), dlogits,
                {static_cast<long>(B_), static_cast<long>(T_), static_cast<long>(O)});
    du = body_head_backward(dlogits, step_norms_);
  } else {
    check_shape((cfg_.model + " model.backward: dlogits").c_str(), dlogits,
                {static_cast<long>(B_), 1, static_cast<long>(O)});
    Tensor2 dy({B_, O});
    std::copy(dlogits.begin(), dlogits.end(), dy.begin());
    const Tensor2 dlast = head->backward(dy);  // [B, H]
    Tensor3 dh = xt::zeros<float>({B_, T_, H});  // no gradient reaches the head at t < T-1
    for (std::size_t b = 0; b < B_; ++b)
      std::copy(dlast.data() + b * H, dlast.data() + (b + 1) * H, dh.data() + (b * T_ + T_ - 1) * H);
    du = body_backward(dh, step_norms_);
  }
  input_norms_ = step_norms(du);
  if (embedding) {
    embedding->backward(du);
    input_grad_ = Tensor3();
  } else if (input) {
    input_grad_ = input->backward(du);
  } else {
    input_grad_ = du;
  }
  has_backward_ = true;
}

const Tensor3& InputBodyHeadModel::input_grad() const {
  if (embedding)
    throw std::logic_error(cfg_.model + " model.input_grad: embedding input has no input gradient");
  if (!has_backward_) throw std::logic_error(cfg_.model + " model.input_grad: no backward has run");
  return input_grad_;
}

const Tensor2& InputBodyHeadModel::step_grad_norms() const {
  if (!has_backward_)
    throw std::logic_error(cfg_.model + " model.step_grad_norms: no backward has run");
  return step_norms_;
}

const Tensor1& InputBodyHeadModel::input_grad_norms() const {
  if (!has_backward_)
    throw std::logic_error(cfg_.model + " model.input_grad_norms: no backward has run");
  return input_norms_;
}

std::string InputBodyHeadModel::describe() const {
  std::string s = cfg_.model + ": input=";
  if (cfg_.input == "embedding") {
    s += "embedding(V=" + std::to_string(cfg_.vocab_size) + ", E=" +
         std::to_string(cfg_.embedding_dim) + ")";
  } else if (cfg_.embedding_dim > 0) {
    s += "linear(D=" + std::to_string(cfg_.input_size) + ", E=" +
         std::to_string(cfg_.embedding_dim) + ")";
  } else {
    s += "linear(D=" + std::to_string(cfg_.input_size) + ", no projection)";
  }
  s += " " + describe_body();
  s += " head=" + cfg_.head + "(O=" + std::to_string(cfg_.output_size) + ")";
  s += " params=" + std::to_string(num_params_);
  return s;
}

void InputBodyHeadModel::collect_parameters(const std::string& prefix,
                                            std::vector<NamedParameter>& out) {
  if (embedding) embedding->collect_parameters(prefix + "embedding.", out);
  if (input) input->collect_parameters(prefix + "input.", out);
  collect_body_parameters(prefix + cfg_.model + ".", out);
  if (head) head->collect_parameters(prefix + "head.", out);
}

void InputBodyHeadModel::set_training(bool training) {
  Module::set_training(training);
  set_body_training(training);
}

void InputBodyHeadModel::collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) {
  if (embedding) embedding->collect_buffers(prefix + "embedding.", out);
  if (input) input->collect_buffers(prefix + "input.", out);
  collect_body_buffers(prefix + cfg_.model + ".", out);
  if (head) head->collect_buffers(prefix + "head.", out);
}

}  // namespace seqlab
