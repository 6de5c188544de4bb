#pragma once
// FNV-1a, 64-bit (Fowler, Noll & Vo; http://www.isthe.com/chongo/tech/comp/fnv/): a fast,
// non-cryptographic hash for checksums of files seqlab writes or expects (training checkpoints,
// prepared corpus splits). It detects accidental changes (a truncated, edited or regenerated file),
// not deliberate forgery.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace seqlab {

/// FNV-1a 64 of the `n` bytes at `p`: h = 0xcbf29ce484222325 (offset basis); for each byte b,
/// h = (h XOR b) * 0x100000001b3 (the 64-bit FNV prime), modulo 2^64.
inline std::uint64_t fnv1a64(const char* p, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

/// FNV-1a 64 of the bytes of `s`.
inline std::uint64_t fnv1a64(std::string_view s) { return fnv1a64(s.data(), s.size()); }

}  // namespace seqlab
