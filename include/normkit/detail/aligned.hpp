// Storage aligned to a cache line, for the per-feature arrays the kernels read with every row.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace normkit::detail {

/// A cache line on x86 and most AArch64 cores, and a multiple of every target's vector width.
/// Rows start at feature 0, so in an array aligned to it no full vector load straddles two
/// lines (except in streamed rows, whose full vectors start where y is aligned); one that does
/// costs two L1 accesses. malloc's 16-byte alignment put γ and β at 48 and 16 bytes past a line
/// in one program: aligned, LayerNorm forward went from 32.5 to 38 GiB/s at 32768×768 floats
/// and from 52 to 60 at 64×1024 (from L2), RMSNorm 89 to 100 there (a standalone program, x and
/// y page-aligned, AVX-512, one thread).
inline constexpr std::size_t kLineBytes = 64;

template <class T>
struct LineAlignedAllocator {
  using value_type = T;

  LineAlignedAllocator() = default;
  template <class U>
  LineAlignedAllocator(const LineAlignedAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kLineBytes}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kLineBytes}); }

  template <class U>
  bool operator==(const LineAlignedAllocator<U>&) const noexcept {
    return true;
  }
};

/// std::vector whose data() is aligned to kLineBytes.
template <class T>
using aligned_vector = std::vector<T, LineAlignedAllocator<T>>;

}  // namespace normkit::detail
