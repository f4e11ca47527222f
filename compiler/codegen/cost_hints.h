// What the families share to fill CostHints (generated_kernel.h) from a task: the tensors a
// kernel streams and their bytes per index. The figures follow the emulated backend's model: the
// largest input by element count is the streamed one (a reduction's row tensor, a pointwise
// group's full-size operand), and its bytes per index sum every input of its size.
#ifndef FORGE_COMPILER_CODEGEN_COST_HINTS_H_
#define FORGE_COMPILER_CODEGEN_COST_HINTS_H_

#include <cstdint>

#include "forge/v1/task.pb.h"

namespace forge::codegen {

// Elements of `spec` (1 for a 0-d tensor).
int64_t Elements(const forge::v1::TensorSpec& spec);
// The first input of the most elements, or nullptr for a task without inputs.
const forge::v1::TensorSpec* LargestInput(const forge::v1::KernelTask& task);
// The most elements of any output (0 without outputs).
int64_t LargestOutputElements(const forge::v1::KernelTask& task);
// Summed element bytes of the inputs of exactly `elements` elements: the bytes one index reads.
int InputBytesPerIndex(const forge::v1::KernelTask& task, int64_t elements);
// The same over the outputs: the bytes one index writes.
int OutputBytesPerIndex(const forge::v1::KernelTask& task, int64_t elements);

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_COST_HINTS_H_
