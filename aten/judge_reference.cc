// The judge's reference: its host tensors through a GroupRunner, the outputs decoded to doubles.
// No LibTorch here: the runner brings it.
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "aten/aten.h"
#include "worker/judge/compare.h"
#include "worker/judge/host_tensor.h"
#include "worker/judge/judge.h"
#include "worker/judge/thread_pool.h"

namespace forge::aten {
namespace {

// The reference interpreter's form: elements row-major, the layout as strides. Gathered in the
// pool's chunks: a first candidate of a large task converts gigabytes per draw.
HostTensor ToReference(const judge::HostTensor& tensor, judge::ThreadPool& pool) {
  HostTensor converted;
  converted.dtype = tensor.spec.dtype();
  converted.shape.assign(tensor.spec.shape().begin(), tensor.spec.shape().end());
  converted.strides.assign(tensor.spec.strides().begin(), tensor.spec.strides().end());
  const int64_t element_bytes = *judge::ElementBytes(tensor.spec.dtype());
  const int64_t count = tensor.element_count();
  converted.bytes.resize(static_cast<size_t>(count * element_bytes));
  char* const out = converted.bytes.data();
  const std::byte* const in = tensor.storage.data();
  const bool row_major = judge::IsRowMajor(tensor.spec);
  pool.ForEachChunk(count, [&](int64_t, int64_t begin, int64_t end) {
    if (row_major) {
      std::memcpy(out + begin * element_bytes, in + begin * element_bytes,
                  static_cast<size_t>((end - begin) * element_bytes));
      return;
    }
    for (int64_t i = begin; i < end; ++i) {
      std::memcpy(out + i * element_bytes,
                  in + judge::StorageOffsetOf(tensor.spec, i) * element_bytes,
                  static_cast<size_t>(element_bytes));
    }
  });
  return converted;
}

absl::StatusOr<std::vector<double>> ToDoubles(const HostTensor& tensor, int output,
                                              judge::ThreadPool& pool) {
  absl::StatusOr<int> element_bytes = judge::ElementBytes(tensor.dtype);
  if (!element_bytes.ok()) return element_bytes.status();
  forge::v1::TensorSpec row_major;
  row_major.set_dtype(tensor.dtype);
  int64_t count = 1;
  for (int64_t size : tensor.shape) {
    row_major.add_shape(size);
    count *= size;
  }
  if (tensor.bytes.size() != static_cast<size_t>(count) * *element_bytes) {
    return absl::InternalError(absl::StrCat(
        "reference output ", output, " holds ", tensor.bytes.size(), " bytes, not the ", count,
        " elements of ", forge::v1::DType_Name(tensor.dtype), " its shape has"));
  }
  return judge::DecodeElements(
      row_major,
      absl::MakeConstSpan(reinterpret_cast<const std::byte*>(tensor.bytes.data()),
                          tensor.bytes.size()),
      pool);
}

// The task's group through `run_group` at `precision`, each output decoded to doubles.
judge::ReferenceRun ReferenceAt(GroupRunner run_group, Precision precision) {
  return [run_group = std::move(run_group), precision](
             const forge::v1::KernelTask& task, absl::Span<const judge::HostTensor> inputs)
             -> absl::StatusOr<std::vector<std::vector<double>>> {
    std::vector<HostTensor> converted;
    converted.reserve(inputs.size());
    judge::ThreadPool& pool = judge::ThreadPool::Default();
    for (const judge::HostTensor& input : inputs) converted.push_back(ToReference(input, pool));
    absl::StatusOr<std::vector<HostTensor>> outputs =
        run_group(task, converted, precision);
    if (!outputs.ok()) return outputs.status();
    std::vector<std::vector<double>> values;
    for (size_t o = 0; o < outputs->size(); ++o) {
      absl::StatusOr<std::vector<double>> output =
          ToDoubles((*outputs)[o], static_cast<int>(o), pool);
      if (!output.ok()) return output.status();
      values.push_back(*std::move(output));
    }
    return values;
  };
}

}  // namespace

judge::ReferenceFn Float64Reference(GroupRunner run_group) {
  return judge::ReferenceFn(ReferenceAt(run_group, Precision::kFloat64),
                            ReferenceAt(run_group, Precision::kNative));
}

judge::ReferenceFn Float64Reference(GroupRunner run_group, DeviceReferenceRunner device) {
  judge::DeviceReference reference;
  reference.run = [run = device.run](const forge::v1::KernelTask& task,
                                     absl::Span<const CUdeviceptr> inputs, bool float64,
                                     absl::Span<const CUdeviceptr> outputs) {
    return run(task, inputs, float64 ? Precision::kFloat64 : Precision::kNative, outputs);
  };
  reference.facts = [statistics = device.statistics](
                        CUdeviceptr values, CUdeviceptr native, CUdeviceptr first_draw,
                        int64_t count, const judge::Tolerances& tolerances,
                        double overflow) -> absl::StatusOr<judge::ReferenceFacts> {
    absl::StatusOr<DeviceOutputStatistics> found = statistics(
        values, native, first_draw, count, tolerances.atol, tolerances.rtol, overflow);
    if (!found.ok()) return found.status();
    judge::ReferenceFacts facts;
    facts.near_constant = found->near_constant;
    facts.agrees_with_first_draw = found->agrees_with_first;
    facts.rms = found->rms;
    facts.eager.max_abs = found->eager_max_abs;
    facts.eager.rel_norm = found->eager_rel_norm;
    return facts;
  };
  return judge::ReferenceFn(ReferenceAt(run_group, Precision::kFloat64),
                            ReferenceAt(run_group, Precision::kNative), std::move(reference));
}

}  // namespace forge::aten
