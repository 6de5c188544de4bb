#include "seqlab/train/checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <set>
#include <utility>
#include <variant>

#include "seqlab/core/file_io.hpp"
#include "seqlab/core/hash.hpp"

namespace fs = std::filesystem;

namespace seqlab {

namespace {

constexpr char kMagic[8] = {'S', 'E', 'Q', 'L', 'A', 'B', 'C', 'K'};
constexpr std::uint32_t kVersion = 1;
constexpr std::uint32_t kByteOrder = 0x01020304u;
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8;
// Largest checkpoint file read (bytes): far above any model seqlab trains on a CPU.
constexpr std::size_t kMaxCheckpointBytes = std::size_t(1) << 36;

std::string shape_text(const std::vector<std::size_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// (key, parameter) of everything a checkpoint saves, in a fixed order.
std::vector<std::pair<std::string, Parameter*>> saved_parameters(
    const CheckpointOptions& opts, const std::vector<Parameter*>& params, const Optimizer& optim) {
  std::vector<std::pair<std::string, Parameter*>> out;
  std::set<const Parameter*> seen;
  if (opts.model != nullptr) {
    for (const auto& np : opts.model->named_parameters()) {
      if (seen.insert(np.param).second) out.emplace_back(np.key, np.param);
    }
  }
  for (std::size_t k = 0; k < params.size(); ++k) {
    if (params[k] != nullptr && seen.insert(params[k]).second)
      out.emplace_back("params." + std::to_string(k), params[k]);
  }
  const auto& op = optim.params();
  for (std::size_t k = 0; k < op.size(); ++k) {
    if (op[k] != nullptr && seen.insert(op[k]).second)
      out.emplace_back("optim." + std::to_string(k), op[k]);
  }
  return out;
}

Checkpoint::BufferKind kind_of(const NamedBuffer& b) {
  return static_cast<Checkpoint::BufferKind>(b.ref.index());
}

const char* kind_name(Checkpoint::BufferKind k) {
  switch (k) {
    case Checkpoint::BufferKind::Floats: return "float vector";
    case Checkpoint::BufferKind::Doubles: return "double vector";
    case Checkpoint::BufferKind::Integer: return "integer";
    case Checkpoint::BufferKind::Generator: return "random generator";
  }
  return "?";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ByteReader

void ByteReader::need(std::size_t n) const {
  if (n > data_.size() - pos_)
    throw CheckpointError(what_ + ": truncated at byte " + std::to_string(pos_) + " (needs " +
                          std::to_string(n) + " more, " + std::to_string(data_.size() - pos_) +
                          " left)");
}

std::size_t ByteReader::length(std::size_t elem) {
  const std::uint64_t n = u64();
  const std::size_t left = data_.size() - pos_;
  if (n > left / elem)
    throw CheckpointError(what_ + ": truncated at byte " + std::to_string(pos_) + " (a field of " +
                          std::to_string(n) + " elements, " + std::to_string(left) +
                          " bytes left)");
  return static_cast<std::size_t>(n);
}

void ByteReader::expect_done() const {
  if (!done())
    throw CheckpointError(what_ + ": " + std::to_string(data_.size() - pos_) +
                          " unexpected trailing bytes");
}

// ---------------------------------------------------------------------------------------------
// CheckpointState

void CheckpointState::add_custom(const std::string& name, std::function<std::string()> save,
                                 std::function<std::function<void()>(const std::string&)> parse) {
  if (!save || !parse)
    throw std::invalid_argument("CheckpointState::add_custom('" + name +
                                "'): save and parse must both be set");
  for (const auto& e : entries_)
    if (e.name == name)
      throw std::invalid_argument("CheckpointState: the name '" + name +
                                  "' is already used; every entry needs its own name");
  entries_.push_back({name, std::move(save), std::move(parse)});
}

namespace {
template <class T>
std::function<std::function<void()>(const std::string&)> pod_parser(T& v, const std::string& name) {
  return [&v, name](const std::string& bytes) -> std::function<void()> {
    if (bytes.size() != sizeof(T))
      throw CheckpointError("caller state '" + name + "': " + std::to_string(bytes.size()) +
                            " bytes, expected " + std::to_string(sizeof(T)));
    T tmp;
    std::memcpy(&tmp, bytes.data(), sizeof(T));
    return [&v, tmp] { v = tmp; };
  };
}
template <class T>
std::function<std::string()> pod_saver(T& v) {
  return [&v] { return std::string(reinterpret_cast<const char*>(&v), sizeof(T)); };
}
}  // namespace

void CheckpointState::add(const std::string& name, Rng& rng) {
  add_custom(
      name,
      [&rng] {
        ByteWriter w;
        w.rng(rng.state());
        return w.take();
      },
      [&rng, name](const std::string& bytes) -> std::function<void()> {
        ByteReader r(bytes, "caller state '" + name + "'");
        const Rng::State s = r.rng();
        r.expect_done();
        return [&rng, s] { rng.set_state(s); };
      });
}
void CheckpointState::add(const std::string& name, double& v) {
  add_custom(name, pod_saver(v), pod_parser(v, name));
}
void CheckpointState::add(const std::string& name, std::int64_t& v) {
  add_custom(name, pod_saver(v), pod_parser(v, name));
}
void CheckpointState::add(const std::string& name, int& v) {
  add_custom(name, pod_saver(v), pod_parser(v, name));
}
void CheckpointState::add(const std::string& name, bool& v) {
  add_custom(
      name, [&v] { return std::string(1, v ? '\1' : '\0'); },
      [&v, name](const std::string& bytes) -> std::function<void()> {
        if (bytes.size() != 1 || (bytes[0] != '\0' && bytes[0] != '\1'))
          throw CheckpointError("caller state '" + name + "': not a boolean");
        const bool tmp = bytes[0] == '\1';
        return [&v, tmp] { v = tmp; };
      });
}
void CheckpointState::add(const std::string& name, std::vector<double>& v) {
  add_trivial_vector(name, v);
}
void CheckpointState::add(const std::string& name, std::deque<double>& v) {
  add_custom(
      name,
      [&v] {
        ByteWriter w;
        w.doubles(std::vector<double>(v.begin(), v.end()));
        return w.take();
      },
      [&v, name](const std::string& bytes) -> std::function<void()> {
        ByteReader r(bytes, "caller state '" + name + "'");
        std::vector<double> tmp = r.doubles();
        r.expect_done();
        return [&v, tmp = std::move(tmp)] { v.assign(tmp.begin(), tmp.end()); };
      });
}

std::string CheckpointState::save() const {
  ByteWriter w;
  w.u64(entries_.size());
  for (const auto& e : entries_) {
    w.str(e.name);
    w.str(e.save());
  }
  return w.take();
}

std::function<void()> CheckpointState::prepare_load(const std::string& blob) const {
  ByteReader r(blob, "caller state");
  const std::uint64_t n = r.u64();
  std::map<std::string, std::string> values;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string name = r.str();
    std::string bytes = r.str();
    if (!values.emplace(std::move(name), std::move(bytes)).second)
      throw CheckpointError("caller state: an entry name occurs twice");
  }
  r.expect_done();
  std::vector<std::function<void()>> commits;
  for (const auto& e : entries_) {
    const auto it = values.find(e.name);
    if (it == values.end())
      throw CheckpointError("caller state: no entry '" + e.name + "' (written by other code?)");
    try {
      commits.push_back(e.parse(it->second));
    } catch (const CheckpointError&) {
      throw;
    } catch (const std::exception& ex) {
      throw CheckpointError("caller state '" + e.name + "': " + ex.what());
    }
    values.erase(it);
  }
  if (!values.empty())
    throw CheckpointError("caller state: unknown entry '" + values.begin()->first +
                          "' (written by other code?)");
  return [commits = std::move(commits)] {
    for (const auto& c : commits) c();
  };
}

// ---------------------------------------------------------------------------------------------
// Encoding

std::string encode_checkpoint(const Checkpoint& c) {
  ByteWriter p;
  p.str(c.identity);
  p.i64(c.step);
  p.i64(c.total_steps);
  p.f64(c.last_loss);
  p.u64(c.parameters.size());
  for (const auto& t : c.parameters) {
    p.str(t.key);
    p.u64(t.shape.size());
    for (std::size_t d : t.shape) p.u64(d);
    p.floats(t.values.data(), t.values.size());
  }
  p.u64(c.buffers.size());
  for (const auto& b : c.buffers) {
    p.str(b.key);
    p.u8(static_cast<std::uint8_t>(b.kind));
    switch (b.kind) {
      case Checkpoint::BufferKind::Floats: p.floats(b.floats.data(), b.floats.size()); break;
      case Checkpoint::BufferKind::Doubles: p.doubles(b.doubles); break;
      case Checkpoint::BufferKind::Integer: p.i64(b.integer); break;
      case Checkpoint::BufferKind::Generator: p.rng(b.rng); break;
    }
  }
  p.str(c.optimizer.kind);
  p.i64(c.optimizer.step);
  p.u64(c.optimizer.buffers.size());
  for (const auto& [key, v] : c.optimizer.buffers) {
    p.str(key);
    p.floats(v.data(), v.size());
  }
  p.str(c.extra);
  const std::string payload = p.take();

  ByteWriter f;
  f.raw(kMagic, sizeof kMagic);
  f.u32(kVersion);
  f.u32(kByteOrder);
  f.u64(payload.size());
  f.raw(payload.data(), payload.size());
  f.u64(fnv1a64(payload.data(), payload.size()));
  return f.take();
}

Checkpoint decode_checkpoint(const std::string& bytes) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw CheckpointError("not a seqlab checkpoint (no SEQLABCK header)");
  ByteReader h(bytes, "checkpoint header");
  for (std::size_t i = 0; i < sizeof kMagic; ++i) (void)h.u8();
  std::uint32_t version = 0, order = 0;
  std::uint64_t size = 0;
  try {
    version = h.u32();
    order = h.u32();
    size = h.u64();
  } catch (const CheckpointError&) {
    throw CheckpointError("truncated (" + std::to_string(bytes.size()) + " bytes, the header alone has " +
                          std::to_string(kHeaderBytes) + ")");
  }
  if (order != kByteOrder) throw CheckpointError("written with another byte order");
  if (version != kVersion)
    throw CheckpointError("format version " + std::to_string(version) + " (this build reads " +
                          std::to_string(kVersion) + ")");
  const std::uint64_t want = kHeaderBytes + size + 8;
  if (size > bytes.size() || bytes.size() != want) {
    if (bytes.size() < want || size > bytes.size())
      throw CheckpointError("truncated (" + std::to_string(bytes.size()) + " of " +
                            std::to_string(want) + " bytes)");
    throw CheckpointError("malformed: " + std::to_string(bytes.size() - want) +
                          " bytes after the end");
  }
  const std::string payload = bytes.substr(kHeaderBytes, size);
  std::uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + kHeaderBytes + size, 8);
  if (stored != fnv1a64(payload.data(), payload.size()))
    throw CheckpointError("checksum mismatch (damaged file)");

  Checkpoint c;
  try {
    ByteReader p(payload, "malformed");
    c.identity = p.str();
    c.step = p.i64();
    c.total_steps = p.i64();
    c.last_loss = p.f64();
    const std::uint64_t np = p.u64();
    for (std::uint64_t i = 0; i < np; ++i) {
      Checkpoint::NamedTensor t;
      t.key = p.str();
      const std::uint64_t rank = p.u64();
      if (rank > 8) throw CheckpointError("malformed: parameter '" + t.key + "' has rank " + std::to_string(rank));
      std::size_t count = 1;
      for (std::uint64_t d = 0; d < rank; ++d) {
        t.shape.push_back(static_cast<std::size_t>(p.u64()));
        count *= t.shape.back();
      }
      t.values = p.floats();
      if (t.values.size() != count)
        throw CheckpointError("malformed: parameter '" + t.key + "' has " +
                              std::to_string(t.values.size()) + " values for shape " +
                              shape_text(t.shape));
      c.parameters.push_back(std::move(t));
    }
    const std::uint64_t nb = p.u64();
    for (std::uint64_t i = 0; i < nb; ++i) {
      Checkpoint::Buffer b;
      b.key = p.str();
      const std::uint8_t k = p.u8();
      if (k > 3) throw CheckpointError("malformed: buffer '" + b.key + "' of unknown kind " + std::to_string(k));
      b.kind = static_cast<Checkpoint::BufferKind>(k);
      switch (b.kind) {
        case Checkpoint::BufferKind::Floats: b.floats = p.floats(); break;
        case Checkpoint::BufferKind::Doubles: b.doubles = p.doubles(); break;
        case Checkpoint::BufferKind::Integer: b.integer = p.i64(); break;
        case Checkpoint::BufferKind::Generator: b.rng = p.rng(); break;
      }
      c.buffers.push_back(std::move(b));
    }
    c.optimizer.kind = p.str();
    c.optimizer.step = p.i64();
    const std::uint64_t no = p.u64();
    for (std::uint64_t i = 0; i < no; ++i) {
      std::string key = p.str();
      c.optimizer.buffers[key] = p.floats();
    }
    c.extra = p.str();
    p.expect_done();
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    throw CheckpointError(m.rfind("malformed", 0) == 0 ? m : "malformed: " + m);
  }
  return c;
}

void write_checkpoint(const std::string& path, const Checkpoint& c) {
  write_file_atomic(path, encode_checkpoint(c));
}

std::optional<Checkpoint> read_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
  std::string bytes;
  try {
    bytes = read_file(path, kMaxCheckpointBytes);
  } catch (const std::runtime_error& e) {
    throw CheckpointError(e.what());
  }
  try {
    return decode_checkpoint(bytes);
  } catch (const CheckpointError& e) {
    throw CheckpointError("'" + path + "': " + e.what());
  }
}

// ---------------------------------------------------------------------------------------------
// Capture and restore

Checkpoint capture_checkpoint(const CheckpointOptions& opts, const std::vector<Parameter*>& params,
                              const Optimizer& optim, std::int64_t step, std::int64_t total_steps,
                              double last_loss) {
  Checkpoint c;
  c.identity = opts.identity;
  c.step = step;
  c.total_steps = total_steps;
  c.last_loss = last_loss;
  for (const auto& [key, p] : saved_parameters(opts, params, optim)) {
    Checkpoint::NamedTensor t;
    t.key = key;
    t.shape.assign(p->value.shape().begin(), p->value.shape().end());
    t.values.assign(p->value.begin(), p->value.end());
    c.parameters.push_back(std::move(t));
  }
  if (opts.model != nullptr) {
    for (const auto& nb : opts.model->named_buffers()) {
      Checkpoint::Buffer b;
      b.key = nb.key;
      b.kind = kind_of(nb);
      if (auto* const* f = std::get_if<Tensor1*>(&nb.ref)) {
        b.floats.assign((*f)->begin(), (*f)->end());
      } else if (auto* const* d = std::get_if<std::vector<double>*>(&nb.ref)) {
        b.doubles = **d;
      } else if (auto* const* i = std::get_if<std::int64_t*>(&nb.ref)) {
        b.integer = **i;
      } else {
        b.rng = std::get<Rng*>(nb.ref)->state();
      }
      c.buffers.push_back(std::move(b));
    }
  }
  c.optimizer = optim.state();
  c.extra = opts.state.save();
  return c;
}

namespace {
// The value of " <name>=" in an identity up to the next space; nullopt when absent.
std::optional<std::string> identity_token(const std::string& identity, const std::string& name) {
  const std::string key = " " + name + "=";
  const auto at = identity.rfind(key);
  if (at == std::string::npos) return std::nullopt;
  const auto begin = at + key.size();
  return identity.substr(begin, identity.find(' ', begin) - begin);
}
}  // namespace

std::string identity_mismatch(const std::string& stored, const std::string& here) {
  const auto ts = identity_token(stored, "threads"), th = identity_token(here, "threads");
  if (ts && th) {
    const auto flush = [](const std::string& id) {
      return id.find(" flush_denormals") != std::string::npos ? "on" : "off";
    };
    if (std::string(flush(stored)) != flush(here))
      return std::string("it was written with --flush-denormals ") + flush(stored) + ", this run has it " +
             flush(here);
    if (*ts != *th) return "it was written at --threads " + *ts + ", this run has --threads " + *th;
    const auto cs = identity_token(stored, "commit"), ch = identity_token(here, "commit");
    if (cs && ch && *cs != *ch)
      return "it was written by the build of commit " + (cs->empty() ? std::string("(unknown)") : *cs) +
             ", this run's is " + (ch->empty() ? std::string("(unknown)") : *ch);
  }
  return "it belongs to another run (identity differs)";
}

void restore_checkpoint(const Checkpoint& c, const CheckpointOptions& opts,
                        const std::vector<Parameter*>& params, Optimizer& optim) {
  if (c.identity != opts.identity) throw CheckpointError(identity_mismatch(c.identity, opts.identity));
  // 1. Check everything; change nothing.
  const auto targets = saved_parameters(opts, params, optim);
  if (targets.size() != c.parameters.size())
    throw CheckpointError("it has " + std::to_string(c.parameters.size()) +
                          " parameter tensors, this run " + std::to_string(targets.size()));
  std::vector<std::pair<Parameter*, const Checkpoint::NamedTensor*>> param_plan;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto& t = c.parameters[i];
    const auto& [key, p] = targets[i];
    if (t.key != key)
      throw CheckpointError("parameter " + std::to_string(i) + " is '" + t.key +
                            "', this run has '" + key + "'");
    const std::vector<std::size_t> shape(p->value.shape().begin(), p->value.shape().end());
    if (t.shape != shape)
      throw CheckpointError("parameter '" + key + "' has shape " + shape_text(t.shape) +
                            ", this run " + shape_text(shape));
    param_plan.emplace_back(p, &t);
  }
  std::vector<NamedBuffer> buffers;
  if (opts.model != nullptr) buffers = opts.model->named_buffers();
  if (buffers.size() != c.buffers.size())
    throw CheckpointError("it has " + std::to_string(c.buffers.size()) + " buffers, this run " +
                          std::to_string(buffers.size()));
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const auto& b = c.buffers[i];
    const auto& nb = buffers[i];
    if (b.key != nb.key || b.kind != kind_of(nb))
      throw CheckpointError("buffer " + std::to_string(i) + " is '" + b.key + "' (" +
                            kind_name(b.kind) + "), this run has '" + nb.key + "' (" +
                            kind_name(kind_of(nb)) + ")");
    std::size_t have = 0, want = 0;
    if (auto* const* f = std::get_if<Tensor1*>(&nb.ref)) {
      have = b.floats.size();
      want = (*f)->size();
    } else if (auto* const* d = std::get_if<std::vector<double>*>(&nb.ref)) {
      have = b.doubles.size();
      want = (*d)->size();
    }
    if (have != want)
      throw CheckpointError("buffer '" + b.key + "' has " + std::to_string(have) +
                            " values, this run " + std::to_string(want));
  }
  std::function<void()> commit_extra;
  commit_extra = opts.state.prepare_load(c.extra);
  // 2. The optimizer checks and restores itself, or throws having changed nothing.
  try {
    optim.load_state(c.optimizer);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(std::string("optimizer state: ") + e.what());
  }
  // 3. Assign (nothing can fail from here on).
  for (auto& [p, t] : param_plan) std::copy(t->values.begin(), t->values.end(), p->value.begin());
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const auto& b = c.buffers[i];
    const auto& nb = buffers[i];
    if (auto* const* f = std::get_if<Tensor1*>(&nb.ref)) {
      std::copy(b.floats.begin(), b.floats.end(), (*f)->begin());
    } else if (auto* const* d = std::get_if<std::vector<double>*>(&nb.ref)) {
      **d = b.doubles;
    } else if (auto* const* n = std::get_if<std::int64_t*>(&nb.ref)) {
      **n = b.integer;
    } else {
      std::get<Rng*>(nb.ref)->set_state(b.rng);
    }
  }
  commit_extra();
}

}  // namespace seqlab
