#pragma once
// Weights files in the safetensors layout (https://huggingface.co/docs/safetensors, "Format"), so
// a model trained here is read in Python with numpy alone, or loaded into the torch.nn module of
// the same structure with the same keys:
//
//   u64 N, little-endian          size of the header in bytes
//   N bytes of JSON (UTF-8)       {"__metadata__": {"key": "value", ...},
//                                  "<tensor key>": {"dtype": "F32", "shape": [2, 3],
//                                                   "data_offsets": [begin, end]}, ...}
//                                 padded with spaces so that the data starts at a multiple of 8
//   the tensors' bytes            little-endian, row-major; tensor k occupies [begin, end) of
//                                 this buffer (offsets relative to its start), with no gaps
//
// Reading it with numpy:
//   n = int.from_bytes(b[:8], "little"); h = json.loads(b[8:8 + n]); data = b[8 + n:]
//   w = np.frombuffer(data[begin:end], dtype="<f4").reshape(shape)
// and with torch: safetensors.torch.load_file, or the arrays above through torch.from_numpy, then
// module.load_state_dict(...).
//
// dtypes: F32 (float32) and I64 (int64), the two of Module::state_dict (nn/parameter.hpp). The
// header is written and read by this file's own small JSON code, not nlohmann-json: seqlab::nn
// depends on xtensor and BLAS only. The reader accepts the JSON the format allows (objects,
// arrays, strings with every escape, non-negative integers, any whitespace) and rejects the rest.
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>

#include "seqlab/nn/parameter.hpp"

namespace seqlab {

/// A file that is not a valid safetensors file of F32 / I64 tensors. The message names the path
/// and the problem (e.g. "'w.safetensors': tensor \"head.weight\": data_offsets [0, 12] hold 12
/// bytes, its dtype F32 and shape [2, 3] need 24").
class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The content of a safetensors file: the tensors by key and the "__metadata__" strings.
struct SafetensorsFile {
  StateDict tensors;
  std::map<std::string, std::string> metadata;
};

/// The bytes of a safetensors file holding `tensors` (in key order, 8-byte aligned data start)
/// and `metadata` (omitted from the header when empty). Keys may be any non-empty string other
/// than "__metadata__". Throws std::invalid_argument naming an empty or reserved key.
std::string encode_safetensors(const StateDict& tensors,
                               const std::map<std::string, std::string>& metadata = {});

/// Decodes a safetensors file's bytes; `what` names the source in messages (the path). Checks:
/// at least 8 bytes; header size within the file and at most 100,000,000 bytes (the format's
/// limit); the header a JSON object starting with '{' (trailing spaces allowed), no duplicate
/// keys; "__metadata__" an object of strings; every other entry an object with exactly dtype
/// (F32 or I64), shape (non-negative integers) and data_offsets ([begin, end], begin <= end,
/// end - begin = the bytes dtype and shape need); the tensors' ranges covering the data buffer
/// exactly, without gaps or overlaps. Throws SafetensorsError naming `what`, the key and the
/// problem.
SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& what = "<bytes>");

/// Writes encode_safetensors(tensors, metadata) to `path` atomically (core/file_io.hpp: a
/// reader sees the old file or the whole new one). The one call for a model's weights:
///   save_safetensors("model.safetensors", model.state_dict(), {{"model", "lstm"}});
/// Throws std::invalid_argument as encode_safetensors, std::runtime_error naming the path if it
/// cannot be written.
void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads and decodes the file at `path`; then e.g. model.load_state_dict(file.tensors).
/// Throws std::runtime_error naming the path if it cannot be read, SafetensorsError (a
/// std::runtime_error) if it is not valid (decode_safetensors).
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace seqlab
