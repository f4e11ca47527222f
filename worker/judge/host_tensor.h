// Tensors in host memory as the judge handles them: a TensorSpec and its storage bytes, plus the
// element codecs (float16, bfloat16, integers, ...) that turn stored elements into doubles and back.
//
// Storage follows the spec's strides: the bytes hold the span from the tensor's first element to its
// last (storage_offset is not part of it; the kernel gets a pointer to element [0, ..., 0]).
// Logical element i is the i-th in row-major order of the shape.
#ifndef FORGE_WORKER_JUDGE_HOST_TENSOR_H_
#define FORGE_WORKER_JUDGE_HOST_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/dtype/dtype.h"
#include "forge/v1/graph.pb.h"
#include "forge/v1/task.pb.h"

namespace forge::judge {

// Bytes per element; InvalidArgument for DTYPE_UNSPECIFIED. IsFloatingPoint and DTypeName come
// from common/dtype.
absl::StatusOr<int> ElementBytes(forge::v1::DType dtype);

// Elements of the shape (1 for a 0-d tensor).
int64_t ElementCount(const forge::v1::TensorSpec& spec);
// Row-major strides of the shape when the spec has none.
std::vector<int64_t> EffectiveStrides(const forge::v1::TensorSpec& spec);
// Elements of storage the tensor spans: 1 + the largest offset, or 0 for an empty tensor.
int64_t StorageElementCount(const forge::v1::TensorSpec& spec);
// Bytes of the storage of `spec` (what HostTensor::Allocate allocates); InvalidArgument for a
// dtype without an element size or a negative size in the shape.
absl::StatusOr<size_t> StorageBytes(const forge::v1::TensorSpec& spec);
// Bytes of the storage of every input and output of `task` (a tensor StorageBytes refuses counts
// 0): what the judge moves per draw, and what the worker sizes a task's judging by.
int64_t TaskStorageBytes(const forge::v1::KernelTask& task);
// Storage offset (in elements) of logical element `index`.
int64_t StorageOffsetOf(const forge::v1::TensorSpec& spec, int64_t index);
// The multi-index of logical element `index`: [1, 0] for element 1003 of a 1000x1003 tensor.
std::vector<int64_t> Unravel(absl::Span<const int64_t> shape, int64_t index);
// "[1, 0]".
std::string FormatIndex(absl::Span<const int64_t> index);
// "float32[1000, 1003]".
std::string DescribeSpec(const forge::v1::TensorSpec& spec);

// The element at byte `data` as a double (bool as 0/1, integers exactly up to 2^53).
double DecodeElement(forge::v1::DType dtype, const std::byte* data);
// Stores `value` rounded to nearest-even in `dtype` (integers truncate toward zero and saturate).
void EncodeElement(forge::v1::DType dtype, double value, std::byte* data);
// `value` as it reads back after storing in `dtype`.
double RoundToDType(forge::v1::DType dtype, double value);

uint16_t FloatToHalfBits(float value);
float HalfBitsToFloat(uint16_t bits);
uint16_t FloatToBfloat16Bits(float value);
float Bfloat16BitsToFloat(uint16_t bits);

struct HostTensor {
  forge::v1::TensorSpec spec;
  std::vector<std::byte> storage;  // StorageElementCount(spec) elements

  // Zero-filled storage for `spec`.
  static absl::StatusOr<HostTensor> Allocate(const forge::v1::TensorSpec& spec);
  int64_t element_count() const { return ElementCount(spec); }
  // Logical element `index` as a double.
  double Get(int64_t index) const;
  void Set(int64_t index, double value);
  // Every logical element as a double, in row-major order.
  std::vector<double> ToDoubles() const;
};

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_HOST_TENSOR_H_
