// The judge's draws, kept across candidates. With the same seed, the random inputs of a task's
// draws and the references computed from them are the same for every candidate of the task; a
// search tries dozens of candidates per task, and the float64 reference of a large task costs
// seconds of CPU. The cache keeps, per draw, the host inputs and the references, so that only the
// first candidate of a task pays for them.
//
// What the cache never changes: every candidate gets fresh device buffers uploaded from the
// cached host inputs, poisoned outputs, and the check that its inputs came back unchanged against
// the same pristine host copy. A cached draw is immutable (shared_ptr to const) and verified
// against the fingerprint taken when it was stored before every hit is served: a candidate runs
// in the process that holds the cache, and a draw changed in memory would otherwise mislead every
// later candidate. A reference that fails is never stored.
//
// Bounded by bytes, least recently used first out. A judged candidate shares ownership of its
// last draw (JudgedCandidate), which therefore outlives its eviction; the bound counts only what
// the cache itself holds. Thread-safe.
#ifndef FORGE_WORKER_JUDGE_DRAW_CACHE_H_
#define FORGE_WORKER_JUDGE_DRAW_CACHE_H_

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "forge/v1/task.pb.h"
#include "worker/judge/compare.h"
#include "worker/judge/host_tensor.h"
#include "worker/judge/inputs.h"
#include "worker/judge/thread_pool.h"

namespace forge::judge {

// Everything a draw's inputs and references depend on.
struct DrawKey {
  // The task's digest, group, inputs and outputs, serialized deterministically (the partitioner's
  // notes, the node attributes and the baseline figures left out): two tasks that share a digest
  // but differ in what is drawn or computed never share draws.
  std::string task;
  // Per task input: its domain's kind, and the low and high of the integer range it draws from.
  std::vector<int64_t> input_domains;
  // ReferenceFn::id() of the reference that computes the draw's references.
  uint64_t reference_id = 0;
  // Whether the native-precision reference runs too (it widens the tolerance).
  bool native_reference = false;
  uint64_t seed = 0;
  int draw = 0;

  bool operator==(const DrawKey& other) const {
    return draw == other.draw && seed == other.seed && reference_id == other.reference_id &&
           native_reference == other.native_reference && input_domains == other.input_domains &&
           task == other.task;
  }
  template <typename H>
  friend H AbslHashValue(H hash, const DrawKey& key) {
    return H::combine(std::move(hash), key.task, key.input_domains, key.reference_id,
                      key.native_reference, key.seed, key.draw);
  }
};

// The key of draw `draw` of `task`, whose inputs have `domains` (InferInputDomains with the
// caller's integer ranges).
DrawKey MakeDrawKey(const forge::v1::KernelTask& task, absl::Span<const InputDomain> domains,
                    uint64_t reference_id, bool native_reference, uint64_t seed, int draw);

// What the judge derives from one draw's references for one output, alone or against the first
// draw's: the same for every candidate of the task, so computed once per tolerance and kept with
// the references (DrawReferences::Facts). A candidate judged on the device then needs no host pass
// over the references at all.
struct ReferenceFacts {
  bool near_constant = false;           // IsNearConstant(float64[o])
  bool agrees_with_first_draw = false;  // AgreeWithin(float64[o], the first draw's float64[o])
  EagerError eager;                     // this draw's EagerError (zero without eager's values)
  double rms = 0;  // RootMeanSquare(float64[o]) below the overflow: ScaledToReference's scale
};

// What the reference computed for one draw.
struct DrawReferences {
  // The float64 reference: one row-major vector per task output.
  std::vector<std::vector<double>> float64;
  // Eager's outputs (the native-precision reference); empty when it was not asked for or failed.
  std::vector<std::vector<double>> native;
  // Why the native-precision reference failed; empty when it ran or was not asked for.
  std::string native_unavailable;

  // The facts of output `output`, stored as `dtype`, under `tolerances`, computed on first
  // request (rms over the values `dtype` holds: RootMeanSquare with OverflowThreshold(dtype)).
  // agrees_with_first_draw is checked against `first_draw`, the task's draw 0; it is false when
  // that is null or this draw itself. Thread-safe.
  ReferenceFacts Facts(int output, forge::v1::DType dtype, const Tolerances& tolerances,
                       const std::shared_ptr<const DrawReferences>& first_draw,
                       ThreadPool& pool) const ABSL_LOCKS_EXCLUDED(facts_mutex_);

 private:
  struct KnownFacts {
    bool near_constant = false;
    EagerError eager;
    double rms = 0;
    // agrees_with_first_draw, and the draw 0 it was checked against.
    std::optional<bool> agrees;
    std::weak_ptr<const DrawReferences> agrees_with;
  };
  mutable absl::Mutex facts_mutex_;
  // By (output, atol, rtol, rel_norm).
  mutable std::map<std::tuple<int, double, double, double>, KnownFacts> known_facts_
      ABSL_GUARDED_BY(facts_mutex_);
};

// One draw: its host inputs, and its references once a judge got that far (a candidate that
// crashes or writes its inputs ends the draw before the reference runs).
struct CachedDraw {
  std::shared_ptr<const std::vector<HostTensor>> inputs;  // one per task input; never null
  std::shared_ptr<const DrawReferences> references;       // null until computed
};

// Bytes of a draw's input storage and reference values (those it has).
int64_t DataBytes(const CachedDraw& draw);

struct DrawCacheStats {
  int64_t hits = 0;        // draws found with their references
  int64_t input_hits = 0;  // draws found without references: the inputs only were saved
  int64_t misses = 0;      // draws not found (corrupt ones included)
  int64_t corrupt = 0;     // draws whose data changed in memory since stored; dropped
  int64_t evictions = 0;   // draws dropped to stay within the capacity
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t capacity_bytes = 0;
};

class DrawCache {
 public:
  static constexpr int64_t kDefaultCapacityBytes = int64_t{4} << 30;

  explicit DrawCache(int64_t capacity_bytes = kDefaultCapacityBytes);
  DrawCache(const DrawCache&) = delete;
  DrawCache& operator=(const DrawCache&) = delete;

  // The draw stored under `key`, if any and unchanged since stored; counts a hit, an input hit or
  // a miss.
  // Without `verify` the fingerprint is not checked: for a caller that reads the draw from a copy
  // it verifies itself (DeviceDraws), and the host copy only to word what that copy found.
  std::optional<CachedDraw> Find(const DrawKey& key, bool verify = true)
      ABSL_LOCKS_EXCLUDED(mutex_);
  // Stores `draw` under `key`, replacing what was there (e.g. the same inputs without their
  // references), then evicts the least recently used draws until the cache fits its capacity. A
  // draw larger than the capacity is not kept. Two judges that miss the same draw at once both
  // compute it; the later store wins, with equal contents.
  void Insert(const DrawKey& key, CachedDraw draw) ABSL_LOCKS_EXCLUDED(mutex_);

  DrawCacheStats stats() const ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  struct Entry {
    CachedDraw draw;
    uint64_t fingerprint = 0;
    int64_t bytes = 0;
    std::list<const DrawKey*>::iterator recency;  // its place in recency_
  };

  void EraseLocked(absl::node_hash_map<DrawKey, Entry>::iterator entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const int64_t capacity_bytes_;
  mutable absl::Mutex mutex_;
  // node_hash_map: recency_ points at the keys, which must not move.
  absl::node_hash_map<DrawKey, Entry> entries_ ABSL_GUARDED_BY(mutex_);
  std::list<const DrawKey*> recency_ ABSL_GUARDED_BY(mutex_);  // most recently used first
  DrawCacheStats stats_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_DRAW_CACHE_H_
