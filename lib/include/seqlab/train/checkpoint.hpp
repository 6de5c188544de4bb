#pragma once
// Training checkpoints: what train_loop (loop.hpp, TrainOptions::checkpoint) saves every N updates
// so that a killed run resumes and ends with the same numbers, bit for bit, as an uninterrupted one.
//
// A checkpoint holds
//   - an identity string given by the caller (the experiment framework uses the cell fingerprint,
//     the thread count, the build's git commit and the training phase); a checkpoint with another
//     identity is never used;
//   - the number of completed updates (`step`), the planned number (`total_steps`) and the loss of
//     the last update;
//   - every parameter's values by key (the model's state_dict keys, Module::named_parameters;
//     parameters trained but not in the model as "params.<index>", an optimizer's others as
//     "optim.<index>"), with shapes;
//   - the model's buffers (Module::named_buffers: BatchNorm running statistics, dropout
//     generators...);
//   - the optimizer state (Optimizer::state(): step count, exp_avg, exp_avg_sq, momentum_buffer);
//   - an opaque caller blob (CheckpointState: the generators of the data streams, the history that
//     the step callback accumulated, rows already added to output tables...).
//
// File format (version 1), native byte order with a marker (little-endian on every platform
// seqlab builds on; a file from the other order is rejected as another format):
//   "SEQLABCK" (8 bytes) | u32 version = 1 | u32 0x01020304 | u64 payload bytes | payload |
//   u64 FNV-1a 64 of the payload.
// The payload is a sequence of fields: strings and arrays are a u64 length then the bytes /
// elements; floats are IEEE binary32, doubles binary64, written bit for bit.
// Files are written atomically (core/file_io.hpp: temporary file, fsync, rename), so a process
// killed while saving leaves the previous checkpoint whole. A truncated, damaged or foreign file
// fails decode_checkpoint with CheckpointError; train_loop then reports it on stderr and starts
// from step 0: a checkpoint can make a run faster, never wrong or failed.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/nn/parameter.hpp"
#include "seqlab/train/optimizer.hpp"

namespace seqlab {

/// A checkpoint that cannot be used: unreadable, truncated, damaged (checksum), another format or
/// version, or not matching the run (identity, parameter keys or shapes, buffers, caller state).
/// The message says which.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Appends binary fields to a byte string (the checkpoint encoding above).
class ByteWriter {
 public:
  void u8(std::uint8_t v) { raw(&v, 1); }
  void u32(std::uint32_t v) { raw(&v, sizeof v); }
  void u64(std::uint64_t v) { raw(&v, sizeof v); }
  void i64(std::int64_t v) { raw(&v, sizeof v); }
  void f64(double v) { raw(&v, sizeof v); }
  /// u64 length, then the bytes.
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  /// u64 count n, then n floats.
  void floats(const float* p, std::size_t n) {
    u64(n);
    raw(p, n * sizeof(float));
  }
  /// u64 count n, then n doubles.
  void doubles(const std::vector<double>& v) {
    u64(v.size());
    raw(v.data(), v.size() * sizeof(double));
  }
  /// The four engine words, the has-spare flag (u8) and the cached normal (double).
  void rng(const Rng::State& s) {
    for (std::uint64_t w : s.s) u64(w);
    u8(s.has_spare ? 1 : 0);
    f64(s.spare);
  }
  void raw(const void* p, std::size_t n) { bytes_.append(static_cast<const char*>(p), n); }
  const std::string& bytes() const { return bytes_; }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

/// Reads what ByteWriter wrote. Every read throws CheckpointError "<what>: truncated at byte N"
/// when the data ends early; a length larger than the bytes left is also rejected that way (so a
/// damaged length never allocates).
class ByteReader {
 public:
  ByteReader(const std::string& data, std::string what) : data_(data), what_(std::move(what)) {}
  std::uint8_t u8() { return pod<std::uint8_t>(); }
  std::uint32_t u32() { return pod<std::uint32_t>(); }
  std::uint64_t u64() { return pod<std::uint64_t>(); }
  std::int64_t i64() { return pod<std::int64_t>(); }
  double f64() { return pod<double>(); }
  std::string str() {
    const std::size_t n = length(1);
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::vector<float> floats() {
    const std::size_t n = length(sizeof(float));
    std::vector<float> v(n);
    if (n) std::memcpy(v.data(), data_.data() + pos_, n * sizeof(float));
    pos_ += n * sizeof(float);
    return v;
  }
  std::vector<double> doubles() {
    const std::size_t n = length(sizeof(double));
    std::vector<double> v(n);
    if (n) std::memcpy(v.data(), data_.data() + pos_, n * sizeof(double));
    pos_ += n * sizeof(double);
    return v;
  }
  Rng::State rng() {
    Rng::State s{};
    for (auto& w : s.s) w = u64();
    s.has_spare = u8() != 0;
    s.spare = f64();
    return s;
  }
  /// True when every byte has been read.
  bool done() const { return pos_ == data_.size(); }
  /// Throws CheckpointError unless done() ("<what>: N unexpected trailing bytes").
  void expect_done() const;

 private:
  template <class T>
  T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::size_t length(std::size_t elem);  // reads a u64 count and checks count·elem bytes remain
  void need(std::size_t n) const;
  const std::string& data_;
  std::string what_;
  std::size_t pos_ = 0;
};

/// The caller's part of a checkpoint: named references to values that change while training and
/// live outside the model and the optimizer (data generators, counters, history vectors, output
/// rows). save() encodes their current values; load() decodes a blob and assigns them, all or
/// nothing: if the blob does not hold exactly these names with well-formed values, it throws
/// CheckpointError and changes nothing. The referenced objects must outlive the state.
/// Names must be unique (std::invalid_argument otherwise).
class CheckpointState {
 public:
  void add(const std::string& name, Rng& rng);
  void add(const std::string& name, double& v);
  void add(const std::string& name, std::int64_t& v);
  void add(const std::string& name, int& v);
  void add(const std::string& name, bool& v);
  void add(const std::string& name, std::vector<double>& v);
  void add(const std::string& name, std::deque<double>& v);
  /// A vector of a trivially copyable type (e.g. a struct of doubles), stored as raw bytes.
  template <class T>
  void add_trivial_vector(const std::string& name, std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>, "add_trivial_vector needs a trivially copyable T");
    add_custom(
        name,
        [&v] { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)); },
        [&v, name](const std::string& bytes) -> std::function<void()> {
          if (bytes.size() % sizeof(T) != 0)
            throw CheckpointError("caller state '" + name + "': " + std::to_string(bytes.size()) +
                                  " bytes is not a whole number of elements");
          std::vector<T> tmp(bytes.size() / sizeof(T));
          if (!tmp.empty()) std::memcpy(static_cast<void*>(tmp.data()), bytes.data(), bytes.size());
          return [&v, tmp = std::move(tmp)]() mutable { v = std::move(tmp); };
        });
  }
  /// Anything else: `save` returns the value's bytes; `parse` checks bytes written by `save`
  /// (throwing CheckpointError, or any std::exception, if malformed) and returns the function that
  /// assigns them; parse must not change anything itself.
  void add_custom(const std::string& name, std::function<std::string()> save,
                  std::function<std::function<void()>(const std::string&)> parse);

  bool empty() const { return entries_.empty(); }
  /// The encoded values (u64 count, then name and bytes of each entry in the order added).
  std::string save() const;
  /// Decodes `blob` and returns the function that assigns every value (the "commit"); throws
  /// CheckpointError naming a missing, unknown or malformed entry, having changed nothing.
  std::function<void()> prepare_load(const std::string& blob) const;
  /// prepare_load(blob)().
  void load(const std::string& blob) const { prepare_load(blob)(); }

 private:
  struct Entry {
    std::string name;
    std::function<std::string()> save;
    std::function<std::function<void()>(const std::string&)> parse;
  };
  std::vector<Entry> entries_;
};

/// train_loop's checkpointing (TrainOptions::checkpoint). Off unless every > 0.
struct CheckpointOptions {
  /// Save after every `every` completed updates, and after the last one (so a finished run is
  /// skipped on resume); 0 = off. Must be >= 0.
  int every = 0;
  /// The checkpoint file; its directory must exist. Required when every > 0.
  std::string path;
  /// What the checkpoint belongs to (any text; e.g. the cell fingerprint and the phase). A file
  /// with another identity is ignored (note on stderr) and later overwritten.
  std::string identity;
  /// The model whose named parameters and buffers are saved; may be null (then only the trained
  /// parameters are saved, as "params.<index>", and no buffers).
  Module* model = nullptr;
  /// The caller's values (see CheckpointState).
  CheckpointState state;
  /// true: a note on stderr when training resumes from a checkpoint. Problems with a checkpoint
  /// (ignored file) are reported on stderr regardless.
  bool notes = true;

  bool enabled() const { return every > 0; }
};

/// The decoded content of a checkpoint file.
struct Checkpoint {
  struct NamedTensor {
    std::string key;
    std::vector<std::size_t> shape;
    std::vector<float> values;
  };
  /// Buffer kinds, as NamedBuffer's alternatives.
  enum class BufferKind : std::uint8_t { Floats = 0, Doubles = 1, Integer = 2, Generator = 3 };
  struct Buffer {
    std::string key;
    BufferKind kind = BufferKind::Floats;
    std::vector<float> floats;    // Floats
    std::vector<double> doubles;  // Doubles
    std::int64_t integer = 0;     // Integer
    Rng::State rng{};             // Generator
  };

  std::string identity;
  std::int64_t step = 0;         // completed updates
  std::int64_t total_steps = 0;  // TrainOptions::steps of the run that wrote it
  double last_loss = NAN;        // loss of update step-1 (NaN when step = 0)
  std::vector<NamedTensor> parameters;
  std::vector<Buffer> buffers;
  OptimizerState optimizer;
  std::string extra;  // CheckpointState::save()
};

/// The file bytes of `c` (format above).
std::string encode_checkpoint(const Checkpoint& c);
/// Parses file bytes. Throws CheckpointError: "not a seqlab checkpoint", "version V (this build
/// reads 1)", "truncated (N of M bytes)", "checksum mismatch (damaged file)", "malformed: ...".
Checkpoint decode_checkpoint(const std::string& bytes);

/// Writes encode_checkpoint(c) to `path` atomically (write_file_atomic). Throws
/// std::runtime_error naming the path and the system error; `path` then still holds its previous
/// content (or does not exist), and no temporary file is left.
void write_checkpoint(const std::string& path, const Checkpoint& c);
/// std::nullopt if `path` does not exist; else the decoded file. Throws CheckpointError if it
/// cannot be read or decoded (message starting with the path).
std::optional<Checkpoint> read_checkpoint(const std::string& path);

/// The state of a run after `step` of `total_steps` updates: opts.identity, opts.model's named
/// parameters and buffers, `params` not in the model, the optimizer's state and parameters,
/// opts.state.save().
Checkpoint capture_checkpoint(const CheckpointOptions& opts, const std::vector<Parameter*>& params,
                              const Optimizer& optim, std::int64_t step, std::int64_t total_steps,
                              double last_loss);
/// Restores `c` into the run (the inverse of capture_checkpoint), all or nothing: throws
/// CheckpointError naming the first mismatch (identity, a parameter key set or shape, a buffer
/// key, kind or size, the optimizer kind or buffers, the caller state) and then has changed
/// nothing.
/// Why a checkpoint's identity is not this run's, for the note that ignores it: where both carry
/// the experiment framework's run tokens (" threads=N", " flush_denormals", " commit=C"), the first
/// that differs ("it was written at --threads 2, this run has --threads 1"), else "it belongs to
/// another run (identity differs)".
std::string identity_mismatch(const std::string& stored, const std::string& here);
void restore_checkpoint(const Checkpoint& c, const CheckpointOptions& opts,
                        const std::vector<Parameter*>& params, Optimizer& optim);

}  // namespace seqlab
