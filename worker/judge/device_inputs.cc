#include "worker/judge/device_inputs.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "worker/judge/compare.h"
#include "worker/judge/device_compare.h"
#include "worker/judge/host_tensor.h"

namespace forge::judge {

// draw_element.h's and draw_kernel.cuh's text, embedded at build time.
extern const char kDrawElementHeader[];
extern const char kDrawKernel[];

const std::string& DeviceInputsSource() {
  static const std::string* const source =
      new std::string(absl::StrCat(kDrawElementHeader, kDrawKernel));
  return *source;
}

std::vector<std::string> DeviceInputsOptions() { return {"--fmad=false", "-std=c++17"}; }

absl::StatusOr<DrawLayout> DrawLayoutOf(const forge::v1::TensorSpec& spec) {
  DrawLayout layout;
  layout.count = ElementCount(spec);
  FORGE_ASSIGN_OR_RETURN(layout.element_bytes, ElementBytes(spec.dtype()));
  layout.row_major = IsRowMajor(spec) ? 1 : 0;
  if (layout.row_major) return layout;
  if (spec.shape_size() > kMaxDrawRank) {
    return absl::UnimplementedError(absl::StrCat("the device draws no strided tensor of more than ",
                                                 kMaxDrawRank, " dimensions: ",
                                                 DescribeSpec(spec)));
  }
  layout.rank = spec.shape_size();
  for (int d = 0; d < layout.rank; ++d) {
    layout.shape[d] = spec.shape(d);
    layout.strides[d] = spec.strides(d);
  }
  return layout;
}

absl::StatusOr<std::unique_ptr<DeviceInputs>> DeviceInputs::Create(const gpu::Device& device) {
  FORGE_ASSIGN_OR_RETURN(gpu::Module module,
                         CompileJudgeModule(device, DeviceInputsSource(), DeviceInputsOptions(),
                                            "the judge's device draws"));
  FORGE_ASSIGN_OR_RETURN(gpu::Kernel kernel, module.GetKernel("forge_draw"));
  return std::unique_ptr<DeviceInputs>(
      new DeviceInputs(std::move(module), std::move(kernel), device.properties().sm_count));
}

absl::Status DeviceInputs::Draw(const forge::v1::TensorSpec& spec, const DrawRule& rule,
                                gpu::DeviceBuffer& buffer, gpu::Stream& stream) const {
  FORGE_ASSIGN_OR_RETURN(DrawLayout layout, DrawLayoutOf(spec));
  FORGE_ASSIGN_OR_RETURN(const size_t bytes, StorageBytes(spec));
  if (layout.element_bytes != DrawElementBytes(rule.dtype) || buffer.size_bytes() < bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a device draw of ", DrawElementBytes(rule.dtype), "-byte elements for ",
        DescribeSpec(spec), " into ", buffer.size_bytes(), " bytes"));
  }
  if (layout.count == 0) return absl::OkStatus();
  if (!layout.row_major) FORGE_RETURN_IF_ERROR(buffer.Fill8(0, stream));
  CUdeviceptr storage = buffer.address();
  void* parameters[] = {const_cast<DrawRule*>(&rule), &layout, &storage};
  gpu::LaunchShape shape;
  shape.block[0] = 256;
  // A grid-stride loop: enough blocks to fill every SM a few times, fewer for small tensors.
  const int64_t blocks = (layout.count + shape.block[0] - 1) / shape.block[0];
  shape.grid[0] = static_cast<uint32_t>(std::min<int64_t>(blocks, int64_t{8} * std::max(sm_count_, 1)));
  return kernel_.Launch(shape, parameters, stream);
}

}  // namespace forge::judge
