// Runs the cudnn_conv family's candidates (compiler/codegen/cudnn_conv/cudnn_conv.h) as cuDNN
// fused graphs, through runtime/extension/cudnn_conv_graph.h (the header generated extensions
// replay the winner with). This library's one translation unit is the only one of the worker
// that includes the cuDNN frontend (it brings nlohmann json); this header does not.
//
// libcudnn.so.9 (torch's nvidia-cudnn wheel) is linked, not loaded with dlopen: it loads without
// a CUDA driver and opens its engine libraries at first use, so binaries that link it still
// start on machines without a GPU. cuDNN works in the context current when its handle is made,
// here the device's primary context that gpu::Device::Open made current; a CUstream is the
// cudaStream_t it takes.
//
// Per (call without engine index) the graph is built, lowered and its heuristic queried once in
// the process; engine configurations are built lazily up to the index a candidate asks for
// (building one can compile a runtime-fusion kernel), and the workspace is one buffer per stream,
// grown to the largest plan's need. A call with a batch norm step folds it in every run, a
// kernel of one thread per channel before the graph, into float32 rows kept in the workspace
// after cuDNN's part; a call channels-last inside ("graph_nhwc") transposes x, w and the
// residuals into NHWC / KRSC copies there before the graph and its NHWC result into the task's
// NCHW output after it. Those kernels (codegen::RunKernelsSource) are compiled with NVRTC at the
// first Prepare that needs them; their time is the candidate's.
#ifndef FORGE_WORKER_LIBRARY_CUDNN_CONV_H_
#define FORGE_WORKER_LIBRARY_CUDNN_CONV_H_

#include <cuda.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compiler/codegen/cudnn_conv/cudnn_conv.h"
#include "worker/gpu/device.h"
#include "worker/judge/judge.h"

namespace forge::library {

class CudnnConv {
 public:
  // Unavailable when there is no usable GPU; Internal naming cuDNN's status when cudnnCreate fails.
  static absl::StatusOr<std::unique_ptr<CudnnConv>> Create(const gpu::Device& device);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // Builds `call`'s graph and its engine (cached). OutOfRange with cuDNN's reason when cuDNN
  // cannot run the call on this GPU: the graph is not supported, or call.engine is past the
  // configurations that build (the candidate is unsupported, not wrong). Returns cuDNN's name of
  // the engine configuration (what forge.v1.Measurement.library_algorithm records).
  absl::StatusOr<std::string> Prepare(const codegen::CudnnConvCall& call);

  // Enqueues `call` on `stream` with the generated-kernel ABI's arguments (`task_inputs` input
  // addresses, then the one output's): first the batch norm fold of each kBatchNorm step (into
  // the stream's workspace), then the graph. Prepare's errors, or Internal with cuDNN's message.
  absl::Status Run(const codegen::CudnnConvCall& call, absl::Span<const CUdeviceptr> args,
                   int task_inputs, gpu::Stream& stream);

 private:
  struct State;
  explicit CudnnConv(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The judge's launch of a cudnn_conv candidate; `conv` must outlive it. OutOfRange as Prepare.
struct CudnnConvLaunch {
  judge::CandidateLaunch launch;
  std::string engine_name;
};
absl::StatusOr<CudnnConvLaunch> LoadCudnnConvCandidate(CudnnConv& conv,
                                                       const forge::v1::KernelTask& task,
                                                       const codegen::SchedulePoint& point);

// Builds `call`'s cuDNN graph and validates it, without a handle or a GPU: what the frontend
// checks of the nodes and shapes before cuDNN's engines are asked. InvalidArgument with the
// frontend's message when it refuses the graph.
absl::Status ValidateCudnnConvGraph(const codegen::CudnnConvCall& call);

// The canonical text (forge_cudnn::Describe in runtime/extension/cudnn_conv_graph.h) of the graph
// this executor builds for `call`: what a runtime's graph, parsed from the plan's JSON of the
// call (forge_cudnn::ParseCall), must equal.
std::string DescribeCudnnConvGraph(const codegen::CudnnConvCall& call);

}  // namespace forge::library

#endif  // FORGE_WORKER_LIBRARY_CUDNN_CONV_H_
