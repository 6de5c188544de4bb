// core/registry.hpp: Registry<Entry> keeps names in registration order, finds and gets entries,
// rejects malformed and duplicate names, lists the registered names in its UnknownNameError
// ("<kind> = '<name>': allowed a, b"), keeps references stable as entries are added, and
// SEQLAB_REGISTER registers before main() (entries with commas included).
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "seqlab/core/registry.hpp"

using namespace seqlab;

namespace {

struct Entry {
  std::string description;
  std::function<int(int)> f;
};

Registry<Entry>& test_registry() {
  static Registry<Entry> r("widget");
  return r;
}

// Static registration, as in an executable's .cpp file: an entry with commas and a lambda.
SEQLAB_REGISTER(test_registry(), "doubler", Entry{"twice, not thrice", [](int x) { return 2 * x; }});
SEQLAB_REGISTER(test_registry(), "negator", Entry{"minus", [](int x) { return -x; }});

}  // namespace

TEST_CASE("Registry keeps registration order and finds entries", "[core][registry]") {
  Registry<Entry> r("norm");
  CHECK(r.kind() == "norm");
  CHECK(r.size() == 0);
  CHECK(r.names_string().empty());
  const Entry& a = r.add("layer_norm", {"a", [](int x) { return x + 1; }});
  r.add("rms_norm", {"b", [](int x) { return x + 2; }});
  r.add("none", {"c", {}});
  CHECK(r.names() == std::vector<std::string>{"layer_norm", "rms_norm", "none"});
  CHECK(r.names_string() == "layer_norm, rms_norm, none");
  CHECK(r.names_string("|") == "layer_norm|rms_norm|none");
  CHECK(r.contains("rms_norm"));
  CHECK_FALSE(r.contains("RMS_norm"));
  CHECK(r.find("group_norm") == nullptr);
  CHECK(r.get("rms_norm").f(1) == 3);
  CHECK(r.find("layer_norm") == &a);
  // References stay valid while more entries are added (std::deque).
  for (int i = 0; i < 100; ++i) r.add("extra_" + std::to_string(i), {"", {}});
  CHECK(&r.get("layer_norm") == &a);
  CHECK(a.f(1) == 2);
  CHECK(r.size() == 103);
}

TEST_CASE("Registry errors name the kind the name and what is allowed", "[core][registry][errors]") {
  Registry<Entry> r("norm");
  r.add("layer_norm", {"", {}});
  r.add("none", {"", {}});
  try {
    r.get("group_norm");
    FAIL("unknown name must throw");
  } catch (const UnknownNameError& e) {
    CHECK(std::string(e.what()) == "norm = 'group_norm': allowed layer_norm, none");
    CHECK(e.kind() == "norm");
    CHECK(e.name() == "group_norm");
    CHECK(e.allowed() == "layer_norm, none");
  }
  CHECK_THROWS_AS(r.get("x"), std::invalid_argument);  // an UnknownNameError is one
  CHECK_THROWS_WITH(r.add("none", {"", {}}), "norm 'none' is already registered");
  CHECK_THROWS_AS(r.add("none", {"", {}}), std::logic_error);
  for (const std::string bad : {"", "Layer", "a-b", "a b", "é"}) {
    INFO(bad);
    CHECK_THROWS_AS(r.add(bad, {"", {}}), std::invalid_argument);
  }
  CHECK(r.names() == std::vector<std::string>{"layer_norm", "none"});  // failed adds add nothing
}

TEST_CASE("SEQLAB_REGISTER registers before main", "[core][registry]") {
  const Registry<Entry>& r = test_registry();
  CHECK(r.names() == std::vector<std::string>{"doubler", "negator"});
  CHECK(r.get("doubler").description == "twice, not thrice");
  CHECK(r.get("doubler").f(21) == 42);
  CHECK(r.get("negator").f(3) == -3);
}
