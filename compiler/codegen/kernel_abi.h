// The generated-kernel ABI of generated_kernel.h, written as CUDA: the parameter list every
// generated kernel declares (one `const T* __restrict__ in<i>` per task input, then one
// `T* __restrict__ out<o>` per task output, T the storage type of the tensor's dtype).
#ifndef FORGE_COMPILER_CODEGEN_KERNEL_ABI_H_
#define FORGE_COMPILER_CODEGEN_KERNEL_ABI_H_

#include <string>

#include "forge/v1/task.pb.h"

namespace forge::codegen {

// "const float* __restrict__ in0, float* __restrict__ out0" for a float32 task of one input and
// one output. Every dtype of the task must have a storage type (StorageType).
std::string KernelParameterList(const forge::v1::KernelTask& task);
// The same parameters' names, "in0, in1, out0": how a kernel passes them on to the element
// functions it calls.
std::string KernelArgumentList(const forge::v1::KernelTask& task);

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_KERNEL_ABI_H_
