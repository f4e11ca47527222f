#include "worker/judge/draw_cache.h"

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "common/proto_io/deterministic.h"
#include "worker/judge/thread_pool.h"

namespace forge::judge {
namespace {

// What an entry costs besides its data: the map node, the recency list node, the control blocks.
constexpr int64_t kEntryOverheadBytes = 256;

template <typename T>
int64_t BytesOf(const std::vector<T>& values) {
  return static_cast<int64_t>(values.size() * sizeof(T));
}

int64_t BytesOf(const DrawKey& key, const CachedDraw& draw) {
  int64_t bytes = kEntryOverheadBytes + static_cast<int64_t>(key.task.size()) +
                  BytesOf(key.input_domains) + DataBytes(draw);
  if (draw.references != nullptr) {
    bytes += static_cast<int64_t>(draw.references->native_unavailable.size());
  }
  return bytes;
}

template <typename T>
absl::string_view BytesView(const std::vector<T>& values) {
  return absl::string_view(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// A hash of `bytes`: the hashes of its chunks (hashed in parallel on the judge's threads),
// combined in order with its length.
size_t HashBytes(absl::string_view bytes) {
  const int64_t size = static_cast<int64_t>(bytes.size());
  std::vector<size_t> chunk_hashes(ThreadPool::ChunkCount(size));
  ThreadPool::Default().ForEachChunk(size, [&](int64_t chunk, int64_t begin, int64_t end) {
    chunk_hashes[chunk] = absl::HashOf(bytes.substr(begin, end - begin));
  });
  return absl::HashOf(bytes.size(), chunk_hashes);
}

// A hash of the draw's data (absl::Hash is seeded per process, which is all a cache in memory
// needs).
uint64_t Fingerprint(const CachedDraw& draw) {
  size_t hash = 0;
  for (const HostTensor& input : *draw.inputs) {
    hash = absl::HashOf(hash, HashBytes(BytesView(input.storage)));
  }
  if (draw.references != nullptr) {
    for (const auto* outputs : {&draw.references->float64, &draw.references->native}) {
      for (const std::vector<double>& output : *outputs) {
        hash = absl::HashOf(hash, HashBytes(BytesView(output)));
      }
    }
    hash = absl::HashOf(hash, draw.references->native_unavailable);
  }
  return hash;
}

}  // namespace

int64_t DataBytes(const CachedDraw& draw) {
  int64_t bytes = 0;
  for (const HostTensor& input : *draw.inputs) bytes += BytesOf(input.storage);
  if (draw.references != nullptr) {
    for (const auto* outputs : {&draw.references->float64, &draw.references->native}) {
      for (const std::vector<double>& output : *outputs) bytes += BytesOf(output);
    }
  }
  return bytes;
}

DrawKey MakeDrawKey(const forge::v1::KernelTask& task, absl::Span<const InputDomain> domains,
                    uint64_t reference_id, bool native_reference, uint64_t seed, int draw) {
  forge::v1::KernelTask drawn;
  drawn.set_digest(task.digest());
  *drawn.mutable_group() = task.group();
  drawn.mutable_group()->clear_metadata();
  for (forge::v1::Node& node : *drawn.mutable_group()->mutable_nodes()) node.clear_attributes();
  *drawn.mutable_inputs() = task.inputs();
  *drawn.mutable_outputs() = task.outputs();

  DrawKey key;
  key.task = SerializeDeterministic(drawn);
  for (const InputDomain& domain : domains) {
    key.input_domains.insert(key.input_domains.end(), {static_cast<int64_t>(domain.kind),
                                                       domain.range.low, domain.range.high});
  }
  key.reference_id = reference_id;
  key.native_reference = native_reference;
  key.seed = seed;
  key.draw = draw;
  return key;
}

ReferenceFacts DrawReferences::Facts(int output, forge::v1::DType dtype,
                                     const Tolerances& tolerances,
                                     const std::shared_ptr<const DrawReferences>& first_draw,
                                     ThreadPool& pool) const {
  const auto key = std::make_tuple(output, tolerances.atol, tolerances.rtol, tolerances.rel_norm);
  const bool against_first = first_draw != nullptr && first_draw.get() != this;
  std::optional<KnownFacts> known;
  {
    absl::MutexLock lock(&facts_mutex_);
    if (auto found = known_facts_.find(key); found != known_facts_.end()) known = found->second;
  }
  // The passes over the whole output run outside the lock (two judges asking at once both
  // compute them, with equal results).
  const std::vector<double>& values = float64[output];
  if (!known) {
    known.emplace();
    known->near_constant = IsNearConstant(values, tolerances, pool);
    known->rms = RootMeanSquare(values, pool, OverflowThreshold(dtype));
    if (!native.empty()) known->eager.Add(native[output], values, pool);
  }
  if (against_first && (!known->agrees || known->agrees_with.lock() != first_draw)) {
    known->agrees = AgreeWithin(values, first_draw->float64[output], tolerances, pool);
    known->agrees_with = first_draw;
  }
  ReferenceFacts facts;
  facts.near_constant = known->near_constant;
  facts.eager = known->eager;
  facts.rms = known->rms;
  facts.agrees_with_first_draw = against_first && *known->agrees;
  absl::MutexLock lock(&facts_mutex_);
  known_facts_[key] = *std::move(known);
  return facts;
}

DrawCache::DrawCache(int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {
  stats_.capacity_bytes = capacity_bytes;
}

std::optional<CachedDraw> DrawCache::Find(const DrawKey& key, bool verify) {
  CachedDraw draw;
  uint64_t fingerprint = 0;
  {
    absl::MutexLock lock(&mutex_);
    auto entry = entries_.find(key);
    if (entry == entries_.end()) {
      ++stats_.misses;
      return std::nullopt;
    }
    recency_.splice(recency_.begin(), recency_, entry->second.recency);
    draw = entry->second.draw;
    fingerprint = entry->second.fingerprint;
  }
  // Hashing large draws takes a while; the data is immutable, so it happens outside the lock.
  const bool intact = !verify || Fingerprint(draw) == fingerprint;
  absl::MutexLock lock(&mutex_);
  if (!intact) {
    ++stats_.corrupt;
    ++stats_.misses;
    auto entry = entries_.find(key);
    if (entry != entries_.end() && entry->second.draw.inputs == draw.inputs &&
        entry->second.draw.references == draw.references) {
      EraseLocked(entry);
    }
    return std::nullopt;
  }
  ++(draw.references != nullptr ? stats_.hits : stats_.input_hits);
  return draw;
}

void DrawCache::Insert(const DrawKey& key, CachedDraw draw) {
  const int64_t bytes = BytesOf(key, draw);
  const uint64_t fingerprint = Fingerprint(draw);
  absl::MutexLock lock(&mutex_);
  if (auto existing = entries_.find(key); existing != entries_.end()) EraseLocked(existing);
  if (bytes > capacity_bytes_) return;
  auto [entry, inserted] = entries_.try_emplace(key);
  recency_.push_front(&entry->first);
  entry->second = Entry{.draw = std::move(draw),
                        .fingerprint = fingerprint,
                        .bytes = bytes,
                        .recency = recency_.begin()};
  stats_.bytes += bytes;
  ++stats_.entries;
  while (stats_.bytes > capacity_bytes_) {
    EraseLocked(entries_.find(*recency_.back()));
    ++stats_.evictions;
  }
}

DrawCacheStats DrawCache::stats() const {
  absl::MutexLock lock(&mutex_);
  return stats_;
}

void DrawCache::EraseLocked(absl::node_hash_map<DrawKey, Entry>::iterator entry) {
  stats_.bytes -= entry->second.bytes;
  --stats_.entries;
  recency_.erase(entry->second.recency);
  entries_.erase(entry);
}

}  // namespace forge::judge
