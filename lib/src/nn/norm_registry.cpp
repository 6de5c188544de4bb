// The norm registry and its built-ins (nn/norm.hpp). The built-ins are registered here, in the
// file that defines norm_registry(), so the static library always links them (core/registry.hpp).
#include <memory>

#include "seqlab/nn/norm.hpp"

namespace seqlab {

namespace {

// Order = the order of messages ("allowed layer_norm, batch_norm, ...") and of --help choices.
void register_builtin_norms(Registry<NormEntry>& r) {
  r.add("layer_norm", {"LayerNorm (Ba et al. 2016), gamma and beta [D]",
                       [](std::size_t d) { return std::make_unique<LayerNorm>(d); },
                       [](std::size_t d) { return 2 * d; }});
  r.add("batch_norm", {"BatchNorm over all B*T positions, padding included (Ioffe & Szegedy 2015)",
                       [](std::size_t d) { return std::make_unique<BatchNorm>(d, false); },
                       [](std::size_t d) { return 2 * d; }});
  r.add("masked_batch_norm", {"BatchNorm over the non-padded positions only",
                              [](std::size_t d) { return std::make_unique<BatchNorm>(d, true); },
                              [](std::size_t d) { return 2 * d; }});
  r.add("rms_norm", {"RMSNorm (Zhang & Sennrich 2019), gain [D]",
                     [](std::size_t d) { return std::make_unique<RMSNorm>(d); },
                     [](std::size_t d) { return d; }});
  r.add("none", {"identity, no parameters",
                 [](std::size_t d) { return std::make_unique<IdentityNorm>(d); },
                 [](std::size_t) { return std::size_t{0}; }});
  r.add("power_norm", {"PowerNorm (Shen et al. 2020, Algorithm 1): running quadratic mean, padding "
                       "excluded, approximate backward; gamma and beta [D]",
                       [](std::size_t d) { return std::make_unique<PowerNorm>(d); },
                       [](std::size_t d) { return 2 * d; }});
}

}  // namespace

Registry<NormEntry>& norm_registry() {
  static Registry<NormEntry> registry = [] {
    Registry<NormEntry> r("norm");
    register_builtin_norms(r);
    return r;
  }();
  return registry;
}

const std::vector<std::string>& norm_names() { return norm_registry().names(); }

}  // namespace seqlab
