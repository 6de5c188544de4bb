#pragma once
// Registry<Entry>: names -> entries, the one place where a kind of component (positional encodings,
// norms, model families, tasks) is looked up by name. A new component is added by defining it and
// registering it; nothing that looks it up (factories, ModelConfig::validate, experiment --help)
// has to change.
//
// The registries of seqlab (each a function returning one process-wide Registry, built on first
// use with the library's built-ins in a fixed order, so messages list them in that order):
//   nn/norm.hpp                        norm_registry()                 "norm"
//   models/positional_registry.hpp     positional_encoding_registry()  "positional_encoding"
//   models/model_registry.hpp          model_registry()                "model"
//   tasks/task.hpp                     task_registry()                 "task"
//
// Registering. Two ways, both one line:
//   1. Inside the library (lib/src/...): add the entry to the built-in list of the registry
//      (e.g. register_builtin_positional_encodings in lib/src/models/positional_registry.cpp).
//      seqlab is a static library: the linker only pulls in an archive member that something
//      references, so a self-registering object in an otherwise unreferenced lib/src file would be
//      silently dropped. The built-in lists are in the same file as the registry function, which
//      every lookup references, so they are always linked.
//   2. In your own executable (an experiment's folder, a project linking seqlab::seqlab): a static
//      registration object in any of its .cpp files,
//        SEQLAB_REGISTER(seqlab::positional_encoding_registry(), "ramp", make_ramp_entry());
//      Object files given to the linker directly are always linked, so the object is constructed
//      before main() and the name is known to every lookup made from main() on
//      (experiments/custom_example/ramp_encoding.cpp does this).
//
// Thread safety: registration is meant for static initialisation or the start of main(), before
// other threads look names up; concurrent lookups are safe, a lookup concurrent with add() is not.
// Entries live in a std::deque: references returned by get() stay valid when more are added.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace seqlab {

/// A name that is not registered. what() = "<kind> = '<name>': allowed <a>, <b>, ..." (the
/// registered names in registration order), e.g. "norm = 'group_norm': allowed layer_norm, ...".
class UnknownNameError : public std::invalid_argument {
 public:
  UnknownNameError(std::string kind, std::string name, std::string allowed)
      : std::invalid_argument(kind + " = '" + name + "': allowed " + allowed),
        kind_(std::move(kind)),
        name_(std::move(name)),
        allowed_(std::move(allowed)) {}
  /// The registry's kind (the config key: "norm", "positional_encoding", "model", "task").
  const std::string& kind() const noexcept { return kind_; }
  const std::string& name() const noexcept { return name_; }
  /// The registered names joined by ", ".
  const std::string& allowed() const noexcept { return allowed_; }

 private:
  std::string kind_, name_, allowed_;
};

template <class Entry>
class Registry {
 public:
  using entry_type = Entry;
  /// `kind` names what the registry holds, as the config key its names are values of.
  explicit Registry(std::string kind) : kind_(std::move(kind)) {}
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  Registry(Registry&&) = default;
  Registry& operator=(Registry&&) = default;

  /// Registers `entry` under `name` and returns it. Names are non-empty and made of lower-case
  /// letters, digits and '_' (they appear in CSVs, file names and --key=value). Throws
  /// std::invalid_argument naming the kind for a malformed name, std::logic_error "<kind> '<name>'
  /// is already registered" for a duplicate (two components must not silently share a name).
  const Entry& add(const std::string& name, Entry entry) {
    if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
      throw std::invalid_argument(kind_ + " name '" + name +
                                  "': must be non-empty, of a-z, 0-9 and '_'");
    if (index_.count(name)) throw std::logic_error(kind_ + " '" + name + "' is already registered");
    entries_.push_back(std::move(entry));
    names_.push_back(name);
    index_.emplace(name, entries_.size() - 1);
    return entries_.back();
  }

  bool contains(const std::string& name) const { return index_.count(name) != 0; }

  /// The entry of `name`, or nullptr.
  const Entry* find(const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &entries_[it->second];
  }

  /// The entry of `name`. Throws UnknownNameError listing the registered names.
  const Entry& get(const std::string& name) const {
    if (const Entry* e = find(name)) return *e;
    throw UnknownNameError(kind_, name, names_string());
  }

  /// Registered names in registration order (built-ins first, in their documented order).
  const std::vector<std::string>& names() const { return names_; }
  /// names() joined by `sep` (", " for messages, "|" for --help choices).
  std::string names_string(const std::string& sep = ", ") const {
    std::string s;
    for (const auto& n : names_) s += (s.empty() ? "" : sep) + n;
    return s;
  }
  std::size_t size() const { return names_.size(); }
  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
  std::vector<std::string> names_;
  std::deque<Entry> entries_;
  std::unordered_map<std::string, std::size_t> index_;
};

/// Registers an entry when constructed: a namespace-scope `static const Registration` in a .cpp
/// file of an executable registers before main() (see the file comment for static libraries).
/// A name add() refuses (a duplicate or a malformed name) is a defect of the build, not of any
/// input: the program prints "seqlab: cannot register: <add()'s message>" and one line of advice
/// on stderr and exits with status 1 before main() runs (an exception cannot leave a static
/// initialiser without std::terminate's abort).
struct Registration {
  template <class Entry>
  Registration(Registry<Entry>& registry, const std::string& name,
               typename Registry<Entry>::entry_type entry) {  // not deduced: {..} entries work
    try {
      registry.add(name, std::move(entry));
    } catch (const std::exception& e) {
      std::fprintf(stderr,
                   "seqlab: cannot register: %s\n"
                   "seqlab: every SEQLAB_REGISTER name must be new and of a-z, 0-9 and '_'; rename "
                   "yours (the registered names are listed by --help)\n",
                   e.what());
      std::exit(1);
    }
  }
};

}  // namespace seqlab

#define SEQLAB_REGISTRY_CONCAT_(a, b) a##b
#define SEQLAB_REGISTRY_CONCAT(a, b) SEQLAB_REGISTRY_CONCAT_(a, b)
/// SEQLAB_REGISTER(registry, "name", entry);  at namespace scope of a .cpp file of an executable:
/// registers `entry` under "name" in `registry` (an expression giving a Registry<Entry>&) before
/// main(). The entry may contain commas (Entry{"...", [](...) {...}}): it is the variadic rest.
/// Not for lib/src files (the static library may drop them; add to the built-in list instead).
#define SEQLAB_REGISTER(registry, name, ...)                                                       \
  static const ::seqlab::Registration SEQLAB_REGISTRY_CONCAT(seqlab_registration_, __COUNTER__)( \
      registry, name, __VA_ARGS__)
