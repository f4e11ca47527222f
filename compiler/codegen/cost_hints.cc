#include "compiler/codegen/cost_hints.h"

#include <algorithm>

#include "common/dtype/dtype.h"

namespace forge::codegen {
namespace {

int BytesPerIndex(const google::protobuf::RepeatedPtrField<forge::v1::TensorSpec>& specs,
                  int64_t elements) {
  int bytes = 0;
  for (const forge::v1::TensorSpec& spec : specs) {
    if (Elements(spec) == elements) bytes += DTypeBytes(spec.dtype());
  }
  return bytes;
}

}  // namespace

int64_t Elements(const forge::v1::TensorSpec& spec) {
  int64_t elements = 1;
  for (int64_t size : spec.shape()) elements *= size;
  return elements;
}

const forge::v1::TensorSpec* LargestInput(const forge::v1::KernelTask& task) {
  const forge::v1::TensorSpec* largest = nullptr;
  for (const forge::v1::TensorSpec& input : task.inputs()) {
    if (largest == nullptr || Elements(input) > Elements(*largest)) largest = &input;
  }
  return largest;
}

int64_t LargestOutputElements(const forge::v1::KernelTask& task) {
  int64_t largest = 0;
  for (const forge::v1::TensorSpec& output : task.outputs()) {
    largest = std::max(largest, Elements(output));
  }
  return largest;
}

int InputBytesPerIndex(const forge::v1::KernelTask& task, int64_t elements) {
  return BytesPerIndex(task.inputs(), elements);
}

int OutputBytesPerIndex(const forge::v1::KernelTask& task, int64_t elements) {
  return BytesPerIndex(task.outputs(), elements);
}

}  // namespace forge::codegen
