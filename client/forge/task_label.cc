#include "client/forge/task_label.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/forge/inspect.h"

namespace forge::client {
namespace {

constexpr std::size_t kMinDigestDigits = 6;

// The fewest leading digits, at least kMinDigestDigits, that tell `digests` apart (all of them
// when two are equal).
std::size_t DistinctPrefixLength(const std::vector<std::string>& digests) {
  std::size_t longest = 0;
  for (const std::string& digest : digests) longest = std::max(longest, digest.size());
  for (std::size_t length = kMinDigestDigits; length < longest; ++length) {
    std::set<std::string> prefixes;
    for (const std::string& digest : digests) prefixes.insert(digest.substr(0, length));
    if (prefixes.size() == digests.size()) return length;
  }
  return longest;
}

}  // namespace

std::string OpLabel(const forge::v1::KernelTask& task, std::size_t max_chars) {
  std::vector<std::string> ops;
  for (absl::string_view op : absl::StrSplit(OpSummary(task.group()), '+', absl::SkipEmpty())) {
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.emplace_back(op);
  }
  if (ops.empty()) return "(no ops)";
  std::string label = absl::StrJoin(ops, "+");
  if (label.size() <= max_chars) return label;
  // The most leading ops that fit with the count of the rest; the first op always.
  for (std::size_t kept = ops.size() - 1; kept >= 1; --kept) {
    const std::size_t rest = ops.size() - kept;
    label = absl::StrCat(absl::StrJoin(ops.begin(), ops.begin() + kept, "+"), " (+", rest,
                         rest == 1 ? " op)" : " ops)");
    if (label.size() <= max_chars || kept == 1) break;
  }
  return label;
}

std::vector<std::string> TaskLabels(const std::vector<const forge::v1::KernelTask*>& tasks,
                                    std::size_t max_chars) {
  std::vector<std::string> labels;
  std::map<std::string, std::vector<std::size_t>> by_label;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    labels.push_back(OpLabel(*tasks[i], max_chars));
    by_label[labels.back()].push_back(i);
  }
  for (const auto& [label, indices] : by_label) {
    if (indices.size() < 2) continue;
    std::vector<std::string> digests;
    for (std::size_t i : indices) digests.push_back(tasks[i]->digest());
    const std::size_t digits = DistinctPrefixLength(digests);
    for (std::size_t i : indices) {
      labels[i] = absl::StrCat(label, " (", tasks[i]->digest().substr(0, digits), ")");
    }
  }
  return labels;
}

}  // namespace forge::client
