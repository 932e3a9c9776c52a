// The table normkit_bench prints at the end of its run: one line per pass, element type and
// shape measured, with normkit's throughput, its roofline and its speed-up over each peer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <map>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace normkit_bench {

/// One benchmark's result, as report_bytes() computed it.
struct Measurement {
  double bytes_per_second = 0;
  double roofline = 0;
};

/// Every benchmark's result, by name, in the order the benchmarks first ran. Google Benchmark
/// calls a benchmark function several times (with growing iteration counts until the minimum
/// time is reached, then once per repetition) and reports the last call, so the last call
/// recorded is the one kept.
class Results {
 public:
  void record(const std::string& name, Measurement m) {
    const auto [it, inserted] = index_.try_emplace(name, entries_.size());
    if (inserted) {
      entries_.push_back({name, m});
    } else {
      entries_[it->second].second = m;
    }
  }
  const std::vector<std::pair<std::string, Measurement>>& entries() const { return entries_; }

 private:
  std::map<std::string, std::size_t> index_;
  std::vector<std::pair<std::string, Measurement>> entries_;
};

inline Results& results() {
  static Results instance;
  return instance;
}

namespace summary_detail {

/// The benchmarks of one pass, type and shape: every implementation measured, by name.
struct Group {
  std::string op, type, shape;  // e.g. "LayerNorm forward", "f32", "4096x768"
  std::map<std::string, Measurement, std::less<>> by_impl;
};

/// Splits "<norm>/<pass>/<type>/<shape>/<impl>" (the naming scheme of normkit_bench.cpp) into
/// its five parts; anything else (the copies have no implementation part) gives an empty vector.
inline std::vector<std::string> split_name(const std::string& name) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t slash; (slash = name.find('/', start)) != std::string::npos; start = slash + 1) {
    parts.push_back(name.substr(start, slash - start));
  }
  parts.push_back(name.substr(start));
  if (parts.size() != 5) parts.clear();
  return parts;
}

inline std::string format(const char* spec, double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, spec, value);
  return buffer;
}

}  // namespace summary_detail

/// Prints the summary of results(): for each pass, type and shape that normkit ran, normkit's
/// GiB/s and roofline on `preferred_isa` (the instruction set it picks on this machine) or,
/// when that one was filtered out, on the fastest of `isas` measured, and its speed-up over the
/// naive loop and oneDNN where those ran. Prints nothing when no normkit benchmark ran.
inline void print_summary(std::ostream& out, std::string_view preferred_isa, std::span<const std::string_view> isas) {
  using summary_detail::Group;
  std::vector<Group> groups;
  std::map<std::string, std::size_t> group_of;
  for (const auto& [name, measurement] : results().entries()) {
    const std::vector<std::string> parts = summary_detail::split_name(name);
    if (parts.empty()) continue;
    const std::string key = parts[0] + "/" + parts[1] + "/" + parts[2] + "/" + parts[3];
    const auto [it, inserted] = group_of.try_emplace(key, groups.size());
    if (inserted) groups.push_back({parts[0] + " " + parts[1], parts[2], parts[3], {}});
    groups[it->second].by_impl[parts[4]] = measurement;
  }

  const std::vector<std::string> header{"shape", "type", "op", "isa", "GiB/s", "roofline", "vs naive", "vs oneDNN"};
  std::vector<std::vector<std::string>> table;
  bool any_naive = false, any_onednn = false;
  for (const Group& g : groups) {
    const Measurement* normkit = nullptr;
    std::string isa;
    for (std::string_view candidate : isas) {
      const auto it = g.by_impl.find(candidate);
      if (it == g.by_impl.end()) continue;
      const bool faster = normkit == nullptr || it->second.bytes_per_second > normkit->bytes_per_second;
      if (candidate == preferred_isa || (isa != preferred_isa && faster)) {
        normkit = &it->second;
        isa = candidate;
      }
    }
    if (normkit == nullptr) continue;
    const auto speedup = [&](const char* peer, bool& any) -> std::string {
      const auto it = g.by_impl.find(peer);
      if (it == g.by_impl.end()) return "-";
      any = true;
      return summary_detail::format("%.2fx", normkit->bytes_per_second / it->second.bytes_per_second);
    };
    table.push_back({g.shape, g.type, g.op, isa, summary_detail::format("%.1f", normkit->bytes_per_second / 0x1p30),
                     summary_detail::format("%.0f%%", 100 * normkit->roofline), speedup("naive", any_naive),
                     speedup("onednn", any_onednn)});
  }
  if (table.empty()) return;

  // Peer columns nobody filled (oneDNN not built in, or filtered out) are left out.
  std::vector<std::size_t> keep{0, 1, 2, 3, 4, 5};
  if (any_naive) keep.push_back(6);
  if (any_onednn) keep.push_back(7);
  std::vector<std::size_t> width(keep.size());
  for (std::size_t c = 0; c < keep.size(); ++c) {
    width[c] = header[keep[c]].size();
    for (const auto& row : table) width[c] = std::max(width[c], row[keep[c]].size());
  }
  // Text columns (shape, type, op, isa) are left-aligned, numbers right-aligned.
  const auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t c = 0; c < keep.size(); ++c) {
      const std::string& cell = row[keep[c]];
      const std::string pad(width[c] - cell.size(), ' ');
      line += keep[c] < 4 ? cell + pad : pad + cell;
      if (c + 1 < keep.size()) line += "  ";
    }
    out << line << '\n';
  };

  out << "\nSummary, one thread. isa: the one normkit picks on this CPU. GiB/s: tensor bytes moved per second\n"
         "(x read, y written; backward x, dy read, dx written). roofline: that over the copy rate of the same\n"
         "bytes, measured in this run. vs <peer>: normkit's speed-up over it (-: not measured).\n";
  print_row(header);
  for (const auto& row : table) print_row(row);
  out.flush();
}

}  // namespace normkit_bench
