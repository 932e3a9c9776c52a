// Pairwise summation of per-block γ/β gradient partials, so that a gradient summed over many
// rows loses accuracy like log(blocks), and in an order fixed by the row count alone.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "aligned.hpp"

namespace normkit::detail {

/// The buffers a PairwiseSum works in, kept by the caller from one sum to the next so that a
/// backward() call on a few rows allocates nothing (a fresh 32 KiB for one row of 4096 floats
/// cost more than the row's arithmetic). A copy starts empty: the contents are scratch.
template <class A>
struct SumWorkspace {
  aligned_vector<A> current;
  std::vector<aligned_vector<A>> levels;  // levels[k]: the sum of 2^k blocks, or empty

  SumWorkspace() = default;
  SumWorkspace(const SumWorkspace&) noexcept {}
  SumWorkspace(SumWorkspace&&) noexcept {}
  SumWorkspace& operator=(const SumWorkspace&) noexcept { return *this; }
  SumWorkspace& operator=(SumWorkspace&&) noexcept { return *this; }
};

/// Sums equal-length partials that arrive one block at a time. Like a binary counter, two
/// partials of 2^k blocks each are added as soon as both exist, which builds a balanced tree
/// whose shape depends only on how many blocks there are.
template <class A, class AddInto>
class PairwiseSum {
 public:
  PairwiseSum(std::size_t length, AddInto add_into, SumWorkspace<A>& workspace)
      : length_(length), add_into_(add_into), current_(workspace.current), levels_(workspace.levels) {
    for (aligned_vector<A>& level : levels_) level.clear();
  }

  /// A zeroed buffer to accumulate the next block into; pass it to commit() when complete.
  aligned_vector<A>& next() {
    current_.assign(length_, A(0));
    return current_;
  }

  void commit() {
    std::size_t level = 0;
    for (; level < levels_.size() && !levels_[level].empty(); ++level) {
      add_into_(levels_[level].data(), current_.data(), length_);  // older + newer
      std::swap(current_, levels_[level]);
      levels_[level].clear();
    }
    if (level == levels_.size()) levels_.emplace_back();
    std::swap(levels_[level], current_);
  }

  /// The sum of every committed block, smallest level first; a single level as it is.
  const aligned_vector<A>& total() {
    const aligned_vector<A>* only = nullptr;
    std::size_t filled = 0;
    for (const aligned_vector<A>& level : levels_) {
      if (!level.empty()) {
        only = &level;
        ++filled;
      }
    }
    if (filled == 1) return *only;
    current_.assign(length_, A(0));
    for (const aligned_vector<A>& level : levels_) {
      if (!level.empty()) add_into_(current_.data(), level.data(), length_);
    }
    return current_;
  }

 private:
  std::size_t length_;
  AddInto add_into_;
  aligned_vector<A>& current_;
  std::vector<aligned_vector<A>>& levels_;
};

}  // namespace normkit::detail
