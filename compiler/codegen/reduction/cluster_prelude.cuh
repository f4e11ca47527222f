// Device helpers of row_reduce with cluster_blocks > 1, embedded at build time after
// reduction_prelude.cuh: the blocks of one thread block cluster share a row and combine their
// partial results through distributed shared memory (sm_90 and newer); a cached cluster fills its
// shared-memory row cache with cp.async.
//
// FORGE_WAIT_PENDING_CASES (with its line break) is replaced by the emitter with one `case N:` of
// cp.async.wait_group per pipelined chunk count (wait_group takes an immediate).
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "row_reduce with cluster_blocks > 1 needs thread block clusters: sm_90 or newer"
#endif
__device__ __forceinline__ unsigned forge_cluster_blocks() {
  unsigned blocks;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(blocks));
  return blocks;
}
// Every block of the cluster arrives before any continues; shared-memory writes made before are
// visible to the other blocks after.
__device__ __forceinline__ void forge_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
               ::: "memory");
}
// An asynchronous copy of kBytes (4, 8 or 16, aligned) from global to shared memory; 16-byte
// copies bypass L1.
template <int kBytes>
__device__ __forceinline__ void forge_cp_async(void* shared, const void* global) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  if (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(address), "l"(global) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(address), "l"(global),
                 "n"(kBytes) : "memory");
  }
}
// This thread's copies have landed (each thread reads only what it copied: no barrier).
__device__ __forceinline__ void forge_cp_async_wait_all() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}
// Closes a group of this thread's copies.
__device__ __forceinline__ void forge_cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// Waits until at most `pending` of this thread's groups are in flight. wait_group takes an
// immediate: `pending` is a constant once the caller's loop is unrolled, and the switch folds.
__device__ __forceinline__ void forge_cp_async_wait_pending(int pending) {
  switch (pending) {
FORGE_WAIT_PENDING_CASES
    default: asm volatile("cp.async.wait_all;" ::: "memory");
  }
}
// `local`'s counterpart in the shared memory of the cluster's block `rank`.
template <typename T>
__device__ __forceinline__ const T* forge_cluster_map(const T* local, unsigned rank) {
  unsigned long long remote;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(remote) : "l"(local), "r"(rank));
  return reinterpret_cast<const T*>(remote);
}
// The blocks combine their parts of the row in rank order: every block ends with the same,
// deterministic value. The second barrier keeps each block's slot (and the block) alive until
// every block has read it.
template <int kBlocks, typename Acc, typename Op>
__device__ __forceinline__ Acc forge_cluster_allreduce(Acc value, Op op, Acc* slot) {
  if (threadIdx.x == 0) *slot = value;
  forge_cluster_sync();
  value = *forge_cluster_map(slot, 0);
#pragma unroll
  for (unsigned rank = 1; rank < kBlocks; ++rank) value = op(value, *forge_cluster_map(slot, rank));
  forge_cluster_sync();
  return value;
}
