// When the lanes of a pointwise_flat chunk read an input through views (transpose, permute, slice,
// select, expand, broadcast) as one aligned vector. A chunk is `width` consecutive elements of the
// outputs, starting at chunk_start, a multiple of `width`; when `width` divides the last dim of
// every output shape, its lanes share every output coordinate but the last, which is base + lane
// with base a multiple of `width`. ChunkLanes proves, from the index a lane reads an input at (as
// the ElementEmitter spells it, bound index variables expanded), that the lanes read `width`
// consecutive elements: exactly one dim of the input is indexed by the last output coordinate
// plus integer constants that are multiples of `width` (through + and -, and * by 1), that dim has
// unit stride, every other dim's index does not depend on the lane and has a stride that is a
// multiple of `width`, and so is the storage offset. Anything it cannot parse (division or modulo
// of the lane's coordinate, a reshape's re-split, a glue op's choice) is not a vector read.
#ifndef FORGE_COMPILER_CODEGEN_POINTWISE_LANE_VECTORS_H_
#define FORGE_COMPILER_CODEGEN_POINTWISE_LANE_VECTORS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/codegen/cuda_expr.h"
#include "forge/v1/task.pb.h"

namespace forge::codegen::pointwise {

class ChunkLanes {
 public:
  // The chunk's lanes in outputs of `output_shapes` read by `width`-element chunks whose lane v
  // is the element "(chunk_start + v)" ("chunk_start" for lane 0); nullopt when `width` < 2 or
  // does not divide some output's last dim.
  static std::optional<ChunkLanes> Of(const std::vector<std::vector<int64_t>>& output_shapes,
                                      int64_t width);

  int64_t width() const { return width_; }

  // A key that every lane of one vector read of an input laid out by `spec` at `index` (lane
  // `lane`'s index) shares, when the read is one (see the file comment); nullopt otherwise.
  std::optional<std::string> VectorKey(const Index& index, int64_t lane,
                                       const forge::v1::TensorSpec& spec,
                                       const ElementEmitter& emitter) const;

 private:
  int64_t width_ = 1;
  // By lane: (output coordinate string, its symbol), longest string first.
  std::vector<std::vector<std::pair<std::string, std::string>>> symbols_;
};

}  // namespace forge::codegen::pointwise

#endif  // FORGE_COMPILER_CODEGEN_POINTWISE_LANE_VECTORS_H_
