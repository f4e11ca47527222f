#include "worker/judge/aten_reference.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "compiler/reference/reference.h"

namespace forge::judge {
namespace {

// The reference interpreter's form: elements row-major, the layout as strides.
reference::HostTensor ToReference(const HostTensor& tensor) {
  reference::HostTensor converted;
  converted.dtype = tensor.spec.dtype();
  converted.shape.assign(tensor.spec.shape().begin(), tensor.spec.shape().end());
  converted.strides.assign(tensor.spec.strides().begin(), tensor.spec.strides().end());
  const int element_bytes = *ElementBytes(tensor.spec.dtype());
  const int64_t count = tensor.element_count();
  converted.bytes.resize(static_cast<size_t>(count) * element_bytes);
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(converted.bytes.data() + i * element_bytes,
                tensor.storage.data() + StorageOffsetOf(tensor.spec, i) * element_bytes,
                element_bytes);
  }
  return converted;
}

absl::StatusOr<std::vector<double>> ToDoubles(const reference::HostTensor& tensor, int output) {
  absl::StatusOr<int> element_bytes = ElementBytes(tensor.dtype);
  if (!element_bytes.ok()) return element_bytes.status();
  if (tensor.bytes.size() % *element_bytes != 0) {
    return absl::InternalError(absl::StrCat("reference output ", output, " holds ",
                                            tensor.bytes.size(), " bytes, not whole elements of ",
                                            forge::v1::DType_Name(tensor.dtype)));
  }
  std::vector<double> values(tensor.bytes.size() / *element_bytes);
  const auto* bytes = reinterpret_cast<const std::byte*>(tensor.bytes.data());
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = DecodeElement(tensor.dtype, bytes + i * *element_bytes);
  }
  return values;
}

// The task's group through `run_group` at `precision`, each output decoded to doubles.
ReferenceRun AtenReferenceAt(GroupRunner run_group, reference::Precision precision) {
  return [run_group = std::move(run_group), precision](
             const forge::v1::KernelTask& task,
             absl::Span<const HostTensor> inputs) -> absl::StatusOr<std::vector<std::vector<double>>> {
    std::vector<reference::HostTensor> converted;
    converted.reserve(inputs.size());
    for (const HostTensor& input : inputs) converted.push_back(ToReference(input));
    absl::StatusOr<std::vector<reference::HostTensor>> outputs =
        run_group(task, converted, precision);
    if (!outputs.ok()) return outputs.status();
    std::vector<std::vector<double>> values;
    for (size_t o = 0; o < outputs->size(); ++o) {
      absl::StatusOr<std::vector<double>> output = ToDoubles((*outputs)[o], static_cast<int>(o));
      if (!output.ok()) return output.status();
      values.push_back(*std::move(output));
    }
    return values;
  };
}

}  // namespace

ReferenceFn AtenFloat64Reference(GroupRunner run_group) {
  return ReferenceFn(AtenReferenceAt(run_group, reference::Precision::kFloat64),
                     AtenReferenceAt(run_group, reference::Precision::kNative));
}

}  // namespace forge::judge
