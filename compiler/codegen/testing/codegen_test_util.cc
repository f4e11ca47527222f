#include "compiler/codegen/testing/codegen_test_util.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <optional>
#include <iostream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/dtype/dtype.h"
#include "compiler/codegen/cost_hints.h"
#include "compiler/codegen/cuda_expr.h"

namespace forge::codegen::testing {

using forge::v1::Argument;

Argument TensorArg(const std::string& name, const std::string& value) {
  Argument argument;
  argument.set_name(name);
  argument.set_tensor(value);
  return argument;
}
Argument OptionalTensorArg(const std::string& name, const std::string& value) {
  Argument argument;
  argument.set_name(name);
  argument.mutable_optional_tensor()->set_value_name(value);
  return argument;
}
Argument NoneArg(const std::string& name) {
  Argument argument;
  argument.set_name(name);
  argument.mutable_none();
  return argument;
}
Argument FloatArg(const std::string& name, double value) {
  Argument argument;
  argument.set_name(name);
  argument.set_float_value(value);
  return argument;
}
Argument IntArg(const std::string& name, int64_t value) {
  Argument argument;
  argument.set_name(name);
  argument.set_int_value(value);
  return argument;
}
Argument BoolArg(const std::string& name, bool value) {
  Argument argument;
  argument.set_name(name);
  argument.set_bool_value(value);
  return argument;
}
Argument StringArg(const std::string& name, const std::string& value) {
  Argument argument;
  argument.set_name(name);
  argument.set_keyword(true);
  argument.set_string_value(value);
  return argument;
}
Argument IntsArg(const std::string& name, const std::vector<int64_t>& values) {
  Argument argument;
  argument.set_name(name);
  for (int64_t value : values) argument.mutable_ints()->add_values(value);
  return argument;
}
Argument TensorsArg(const std::string& name, const std::vector<std::string>& values) {
  Argument argument;
  argument.set_name(name);
  for (const std::string& value : values) argument.mutable_tensors()->add_value_names(value);
  return argument;
}
Argument DTypeArg(const std::string& name, forge::v1::DType value) {
  Argument argument;
  argument.set_name(name);
  argument.set_keyword(true);
  argument.set_dtype(value);
  return argument;
}

forge::v1::TensorSpec TaskBuilder::Spec(forge::v1::DType dtype, const std::vector<int64_t>& shape,
                                        std::vector<int64_t> strides,
                                        int64_t storage_offset) const {
  if (strides.empty()) strides = ContiguousStrides(shape);
  forge::v1::TensorSpec spec;
  spec.set_dtype(dtype);
  for (int64_t size : shape) spec.add_shape(size);
  for (int64_t stride : strides) spec.add_strides(stride);
  spec.set_storage_offset(storage_offset);
  spec.mutable_device()->set_type("cuda");
  spec.set_layout(forge::v1::LAYOUT_STRIDED);
  return spec;
}

TaskBuilder& TaskBuilder::Input(const std::string& name, forge::v1::DType dtype,
                                std::vector<int64_t> shape, std::vector<int64_t> strides,
                                int64_t storage_offset) {
  forge::v1::Value* value = task_.mutable_group()->add_values();
  value->set_name(name);
  *value->mutable_tensor() = Spec(dtype, shape, strides, storage_offset);
  forge::v1::GraphInput* input = task_.mutable_group()->add_inputs();
  input->set_kind(forge::v1::INPUT_KIND_USER_INPUT);
  input->set_value_name(name);
  *task_.add_inputs() = value->tensor();
  return *this;
}

TaskBuilder& TaskBuilder::Node(const std::string& output, const std::string& op,
                               const std::string& overload, std::vector<Argument> arguments,
                               forge::v1::DType dtype, std::vector<int64_t> shape) {
  return MultiOutputNode(output, {output}, op, overload, std::move(arguments), dtype,
                         {std::move(shape)});
}

TaskBuilder& TaskBuilder::MultiOutputNode(const std::string& name,
                                          const std::vector<std::string>& outputs,
                                          const std::string& op, const std::string& overload,
                                          std::vector<Argument> arguments,
                                          forge::v1::DType dtype,
                                          const std::vector<std::vector<int64_t>>& shapes) {
  forge::v1::Node* node = task_.mutable_group()->add_nodes();
  node->set_name(name);
  node->set_op(absl::StrCat("aten::", op));
  node->set_overload(overload);
  // The dispatcher's schema is not needed by the generators; the fallback only checks presence.
  node->set_schema(absl::StrCat("aten::", op, overload.empty() ? "" : ".", overload, "(...)"));
  for (Argument& argument : arguments) *node->add_arguments() = std::move(argument);
  for (size_t k = 0; k < outputs.size() && k < shapes.size(); ++k) {
    forge::v1::Value* value = task_.mutable_group()->add_values();
    value->set_name(outputs[k]);
    *value->mutable_tensor() = Spec(dtype, shapes[k], {}, 0);
    node->add_outputs(outputs[k]);
  }
  return *this;
}

TaskBuilder& TaskBuilder::Output(const std::string& name, std::vector<int64_t> strides) {
  forge::v1::GraphOutput* output = task_.mutable_group()->add_outputs();
  output->set_kind(forge::v1::OUTPUT_KIND_USER_OUTPUT);
  output->set_value_name(name);
  for (const forge::v1::Value& value : task_.group().values()) {
    if (value.name() != name) continue;
    std::vector<int64_t> shape(value.tensor().shape().begin(), value.tensor().shape().end());
    *task_.add_outputs() = Spec(value.tensor().dtype(), shape, std::move(strides), 0);
  }
  return *this;
}

forge::v1::KernelTask TaskBuilder::Build(forge::v1::KernelFamily family) const {
  forge::v1::KernelTask task = task_;
  task.set_family(family);
  task.set_digest(std::string(64, 'a'));
  task.set_occurrences(1);
  return task;
}

forge::v1::KernelTask ReluTask() {
  constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
  return TaskBuilder()
      .Input("x", kF32, {16})
      .Node("relu", "relu", "default", {TensorArg("self", "x")}, kF32, {16})
      .Output("relu")
      .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
}

forge::v1::KernelTask MatmulReluTask() {
  constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
  return TaskBuilder()
      .Input("a", kF32, {4, 8})
      .Input("b", kF32, {8, 2})
      .Node("mm", "mm", "default", {TensorArg("self", "a"), TensorArg("mat2", "b")}, kF32, {4, 2})
      .Node("relu", "relu", "default", {TensorArg("self", "mm")}, kF32, {4, 2})
      .Output("relu")
      .Build(forge::v1::KERNEL_FAMILY_ATEN);
}

namespace {

// `op`(x, dim=-1) over a [rows, columns] tensor of `dtype`, a task of `family`, with its flops
// (`flops_per_element` per element) and min_bytes (read and write once) set.
forge::v1::KernelTask LastDimTask(const std::string& op, const std::string& overload,
                                  forge::v1::KernelFamily family, int64_t flops_per_element,
                                  forge::v1::DType dtype, int64_t rows, int64_t columns) {
  forge::v1::KernelTask task =
      TaskBuilder()
          .Input("x", dtype, {rows, columns})
          .Node(op, op, overload, {TensorArg("self", "x"), IntArg("dim", -1)}, dtype,
                {rows, columns})
          .Output(op)
          .Build(family);
  task.set_flops(rows * columns * flops_per_element);
  task.set_min_bytes(rows * columns * 2 * DTypeBytes(dtype));
  return task;
}

}  // namespace

forge::v1::KernelTask SoftmaxTask(forge::v1::DType dtype, int64_t rows, int64_t columns) {
  return LastDimTask("softmax", "int", forge::v1::KERNEL_FAMILY_REDUCTION, 5, dtype, rows,
                     columns);
}

forge::v1::KernelTask CumsumTask(forge::v1::DType dtype, int64_t rows, int64_t columns) {
  return LastDimTask("cumsum", "default", forge::v1::KERNEL_FAMILY_SCAN, 1, dtype, rows, columns);
}

namespace {

// ATen's pooling output size (pooling_output_shape): with ceil_mode, a last window that starts
// in the right padding does not count.
int64_t WindowOutputSize(int64_t size, const Window2d& window, bool ceil_mode) {
  const int64_t span = size + 2 * window.padding - window.dilation * (window.kernel - 1) - 1 +
                       (ceil_mode ? window.stride - 1 : 0);
  int64_t output = span / window.stride + 1;
  if (ceil_mode && (output - 1) * window.stride >= size + window.padding) --output;
  return output;
}

std::vector<int64_t> WindowOutputShape(const std::vector<int64_t>& shape, const Window2d& window,
                                       bool ceil_mode) {
  return {shape[0], shape[1], WindowOutputSize(shape[2], window, ceil_mode),
          WindowOutputSize(shape[3], window, ceil_mode)};
}

std::vector<int64_t> StridesFor(const std::vector<int64_t>& shape, bool channels_last) {
  return channels_last ? ChannelsLastStrides(shape) : std::vector<int64_t>{};
}

// Appends the window's stride, padding and (with `dilation`) dilation arguments.
void AppendWindowArguments(const Window2d& window, bool dilation,
                           std::vector<forge::v1::Argument>& arguments) {
  arguments.push_back(IntsArg("stride", {window.stride, window.stride}));
  arguments.push_back(IntsArg("padding", {window.padding, window.padding}));
  if (dilation) arguments.push_back(IntsArg("dilation", {window.dilation, window.dilation}));
}

}  // namespace

std::vector<int64_t> ChannelsLastStrides(const std::vector<int64_t>& shape) {
  return {shape[1] * shape[2] * shape[3], 1, shape[3] * shape[1], shape[1]};
}

forge::v1::KernelTask DepthwiseConvTask(forge::v1::DType dtype, const std::vector<int64_t>& shape,
                                        const Window2d& window, bool bias, bool gelu,
                                        bool channels_last) {
  const int64_t c = shape[1];
  const std::vector<int64_t> out = WindowOutputShape(shape, window, false);
  TaskBuilder builder;
  builder.Input("x", dtype, shape, StridesFor(shape, channels_last))
      .Input("w", dtype, {c, 1, window.kernel, window.kernel});
  std::vector<forge::v1::Argument> arguments = {TensorArg("input", "x"), TensorArg("weight", "w")};
  AppendWindowArguments(window, true, arguments);
  arguments.push_back(IntArg("groups", c));
  if (bias) {
    builder.Input("b", dtype, {c});
    arguments.push_back(OptionalTensorArg("bias", "b"));
  }
  builder.Node("y", "conv2d", "default", arguments, dtype, out);
  if (gelu) builder.Node("g", "gelu", "default", {TensorArg("self", "y")}, dtype, out);
  builder.Output(gelu ? "g" : "y", StridesFor(out, channels_last));
  return builder.Build(forge::v1::KERNEL_FAMILY_STENCIL);
}

forge::v1::KernelTask AffineReluMaxPoolTask(forge::v1::DType dtype,
                                            const std::vector<int64_t>& shape,
                                            const Window2d& window, bool ceil_mode,
                                            bool channels_last) {
  const int64_t c = shape[1];
  const std::vector<int64_t> out = WindowOutputShape(shape, window, ceil_mode);
  std::vector<forge::v1::Argument> arguments = {
      TensorArg("self", "r"), IntsArg("kernel_size", {window.kernel, window.kernel})};
  AppendWindowArguments(window, true, arguments);
  arguments.push_back(BoolArg("ceil_mode", ceil_mode));
  TaskBuilder builder;
  builder.Input("x", dtype, shape, StridesFor(shape, channels_last))
      .Input("scale", dtype, {c, 1, 1})
      .Input("shift", dtype, {c, 1, 1})
      .Node("m", "mul", "Tensor", {TensorArg("self", "x"), TensorArg("other", "scale")}, dtype,
            shape)
      .Node("a", "add", "Tensor", {TensorArg("self", "m"), TensorArg("other", "shift")}, dtype,
            shape)
      .Node("r", "relu", "default", {TensorArg("self", "a")}, dtype, shape)
      .Node("y", "max_pool2d", "default", arguments, dtype, out)
      .Output("y", StridesFor(out, channels_last));
  return builder.Build(forge::v1::KERNEL_FAMILY_STENCIL);
}

forge::v1::KernelTask AvgPoolTask(forge::v1::DType dtype, const std::vector<int64_t>& shape,
                                  const Window2d& window, bool ceil_mode, bool count_include_pad,
                                  bool channels_last) {
  const std::vector<int64_t> out = WindowOutputShape(shape, window, ceil_mode);
  std::vector<forge::v1::Argument> arguments = {
      TensorArg("self", "x"), IntsArg("kernel_size", {window.kernel, window.kernel})};
  AppendWindowArguments(window, false, arguments);
  arguments.push_back(BoolArg("ceil_mode", ceil_mode));
  arguments.push_back(BoolArg("count_include_pad", count_include_pad));
  TaskBuilder builder;
  builder.Input("x", dtype, shape, StridesFor(shape, channels_last))
      .Node("y", "avg_pool2d", "default", arguments, dtype, out)
      .Output("y", StridesFor(out, channels_last));
  return builder.Build(forge::v1::KERNEL_FAMILY_STENCIL);
}

std::vector<SchedulePoint> ValidPoints(const KernelFamily& family,
                                       const forge::v1::KernelTask& task) {
  std::vector<SchedulePoint> valid;
  absl::StatusOr<std::vector<TemplateSpace>> spaces = family.ScheduleSpace(task);
  if (!spaces.ok()) return valid;
  for (const TemplateSpace& space : *spaces) {
    for (SchedulePoint& point : EnumeratePoints(space)) {
      if (family.Validate(task, point).ok()) valid.push_back(std::move(point));
    }
  }
  return valid;
}

std::vector<SchedulePoint> EvenSample(const std::vector<SchedulePoint>& points, size_t count) {
  if (points.size() <= count) return points;
  std::vector<SchedulePoint> sample;
  for (size_t i = 0; i < count; ++i) sample.push_back(points[i * points.size() / count]);
  return sample;
}

namespace {

// The CUTLASS headers host-launched sources compile against: $FORGE_CUTLASS_INCLUDE where set (the
// GPU machine, whose bundle carries them elsewhere), else the build's.
std::string CutlassInclude() {
  const char* configured = std::getenv("FORGE_CUTLASS_INCLUDE");
  return configured != nullptr && *configured != '\0' ? std::string(configured)
                                                      : forge::compile::DefaultCutlassInclude();
}

}  // namespace

forge::compile::CompilePool& Pool() {
  static forge::compile::CompilePool* pool = [] {
    forge::compile::CompilePoolOptions options;
    options.threads = 2;
    options.cutlass_include = CutlassInclude();
    if (const char* nvcc = std::getenv("FORGE_NVCC"); nvcc != nullptr && *nvcc != '\0') {
      options.nvcc_path = nvcc;
    }
    // CUTLASS sm90 configurations take minutes of nvcc on a loaded machine.
    options.nvcc_timeout = absl::Minutes(30);
    // Where set, compiled results persist across test processes (the GPU scripts run test cases
    // in parallel to compile them at once, then time them again from the cache).
    if (const char* cache = std::getenv("FORGE_TEST_COMPILE_CACHE"); cache != nullptr && *cache) {
      options.disk_cache_dir = cache;
    }
    auto created = forge::compile::CompilePool::Create(options);
    if (!created.ok()) {
      std::cerr << "compile pool: " << created.status() << "\n";
      std::abort();
    }
    return created->release();
  }();
  return *pool;
}

forge::compile::CompileRequest RequestFor(const GeneratedKernel& kernel, const std::string& arch) {
  forge::compile::CompileRequest request;
  request.source = kernel.source;
  request.name_expressions = {kernel.kernel_name};
  request.arch = arch;
  return request;
}

void ExpectCompiles(const std::vector<GeneratedKernel>& kernels,
                    const std::vector<std::string>& labels, bool expect_no_spills,
                    const std::vector<std::string>& archs) {
  ASSERT_EQ(kernels.size(), labels.size());
  std::vector<std::future<forge::compile::CompileResult>> pending;
  for (const GeneratedKernel& kernel : kernels) {
    for (const std::string& arch : archs) pending.push_back(Pool().Submit(RequestFor(kernel, arch)));
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    const std::string& label = labels[i / archs.size()];
    const std::string& arch = archs[i % archs.size()];
    forge::compile::CompileResult result = pending[i].get();
    ASSERT_TRUE(result.ok()) << label << " for " << arch << ": " << result.status << "\n"
                             << result.log << "\n" << kernels[i / archs.size()].source;
    const forge::compile::PtxasFunctionReport* report =
        result.ptxas.Find(kernels[i / archs.size()].kernel_name);
    ASSERT_NE(report, nullptr) << label << " for " << arch << ": no ptxas report\n" << result.log;
    if (expect_no_spills) {
      EXPECT_EQ(report->spill_store_bytes + report->spill_load_bytes, 0)
          << label << " for " << arch << " spills:\n" << result.log;
    }
  }
}

forge::v1::KernelTask LinearActivationTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k,
                                           bool bias, const std::string& activation,
                                           const std::string& approximate) {
  TaskBuilder builder;
  builder.Input("x", dtype, {m, k}).Input("w", dtype, {n, k});
  std::vector<forge::v1::Argument> arguments = {TensorArg("input", "x"), TensorArg("weight", "w")};
  if (bias) {
    builder.Input("bias", dtype, {n});
    arguments.push_back(OptionalTensorArg("bias", "bias"));
  }
  builder.Node("linear", "linear", "", arguments, dtype, {m, n});
  if (activation.empty()) return builder.Output("linear").Build(forge::v1::KERNEL_FAMILY_GEMM);
  std::vector<forge::v1::Argument> act = {TensorArg("self", "linear")};
  if (!approximate.empty()) act.push_back(StringArg("approximate", approximate));
  builder.Node("act", activation, "", act, dtype, {m, n});
  return builder.Output("act").Build(forge::v1::KERNEL_FAMILY_GEMM);
}

forge::v1::KernelTask ScaledActivationTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k,
                                           const std::string& activation,
                                           std::vector<forge::v1::Argument> arguments) {
  const bool tensor_bound = std::any_of(arguments.begin(), arguments.end(),
                                        [](const forge::v1::Argument& a) { return a.has_tensor(); });
  arguments.insert(arguments.begin(), TensorArg("self", "scaled"));
  TaskBuilder builder;
  builder.Input("x", dtype, {m, k}).Input("w", dtype, {n, k});
  if (tensor_bound) builder.Input("low", dtype, {m, n});
  return builder
      .Node("linear", "linear", "", {TensorArg("input", "x"), TensorArg("weight", "w")}, dtype,
            {m, n})
      .Node("scaled", "mul", "Scalar", {TensorArg("self", "linear"), FloatArg("other", 2)}, dtype,
            {m, n})
      .Node("act", activation, "", arguments, dtype, {m, n})
      .Output("act")
      .Build(forge::v1::KERNEL_FAMILY_GEMM);
}

forge::v1::KernelTask GatedLinearTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k,
                                      const std::string& activation) {
  TaskBuilder builder;
  builder.Input("x", dtype, {m, k}).Input("wg", dtype, {n, k}).Input("wu", dtype, {n, k});
  builder.Node("gate", "linear", "", {TensorArg("input", "x"), TensorArg("weight", "wg")}, dtype,
               {m, n});
  builder.Node("up", "linear", "", {TensorArg("input", "x"), TensorArg("weight", "wu")}, dtype,
               {m, n});
  builder.Node("act", activation, "", {TensorArg("self", "gate")}, dtype, {m, n});
  builder.Node("gated", "mul", "Tensor", {TensorArg("self", "act"), TensorArg("other", "up")},
               dtype, {m, n});
  forge::v1::KernelTask task = builder.Output("gated").Build(forge::v1::KERNEL_FAMILY_GEMM);
  task.set_flops(4 * m * n * k);
  return task;
}

forge::v1::KernelTask SdpaTask(forge::v1::DType dtype, const AttentionShape& shape,
                               const std::string& mask) {
  const AttentionShape& s = shape;
  const std::vector<int64_t> q = {s.batch, s.heads, s.q_len, s.head_dim};
  const std::vector<int64_t> kv = {s.batch, s.kv_heads, s.kv_len, s.head_dim};
  TaskBuilder builder;
  builder.Input("q", dtype, q).Input("k", dtype, kv).Input("v", dtype, kv);
  std::vector<forge::v1::Argument> arguments = {TensorArg("query", "q"), TensorArg("key", "k"),
                                                TensorArg("value", "v")};
  int64_t mask_bytes = 0;
  if (mask == "bool" || mask == "additive") {
    const bool boolean = mask == "bool";
    const std::vector<int64_t> m = {boolean ? s.batch : 1, 1, s.q_len, s.kv_len};
    const forge::v1::DType mask_dtype = boolean ? forge::v1::DTYPE_BOOL : dtype;
    builder.Input("mask", mask_dtype, m);
    arguments.push_back(OptionalTensorArg("attn_mask", "mask"));
    mask_bytes = m[0] * m[2] * m[3] * DTypeBytes(mask_dtype);
  }
  if (mask == "causal") {
    arguments.push_back(NoneArg("attn_mask"));
    arguments.push_back(FloatArg("dropout_p", 0));
    arguments.push_back(BoolArg("is_causal", true));
  }
  if (s.kv_heads != s.heads) {
    forge::v1::Argument gqa = BoolArg("enable_gqa", true);
    gqa.set_keyword(true);
    arguments.push_back(gqa);
  }
  builder.Node("attention", "scaled_dot_product_attention", "", arguments, dtype, q);
  forge::v1::KernelTask task = builder.Output("attention").Build(forge::v1::KERNEL_FAMILY_ATTENTION);
  task.set_flops(4 * s.batch * s.heads * s.q_len * s.kv_len * s.head_dim);
  task.set_min_bytes((2 * s.batch * s.heads * s.q_len * s.head_dim +
                      2 * s.batch * s.kv_heads * s.kv_len * s.head_dim) *
                         DTypeBytes(dtype) +
                     mask_bytes);
  return task;
}

AttentionShape LlamaDecodeShape(int64_t batch, int64_t kv_len) {
  return {.batch = batch, .heads = 32, .kv_heads = 8, .q_len = 1, .kv_len = kv_len,
          .head_dim = 128};
}

forge::v1::KernelTask SdpaCacheSliceTask(forge::v1::DType dtype, int64_t start) {
  const int64_t b = 2, h = 8, hkv = 2, cache = 4096, keys = 1000, d = 64;
  forge::v1::KernelTask task =
      TaskBuilder()
          .Input("q_bshd", dtype, {b, 1, h, d})
          .Input("k_cache", dtype, {b, hkv, cache, d})
          .Input("v_cache", dtype, {b, hkv, cache, d})
          .Node("q", "transpose", "int",
                {TensorArg("self", "q_bshd"), IntArg("dim0", 1), IntArg("dim1", 2)}, dtype,
                {b, h, 1, d})
          .Node("k", "slice", "Tensor",
                {TensorArg("self", "k_cache"), IntArg("dim", 2), IntArg("start", start),
                 IntArg("end", start + keys)},
                dtype, {b, hkv, keys, d})
          .Node("v", "slice", "Tensor",
                {TensorArg("self", "v_cache"), IntArg("dim", 2), IntArg("start", start),
                 IntArg("end", start + keys)},
                dtype, {b, hkv, keys, d})
          .Node("attention", "scaled_dot_product_attention", "",
                {TensorArg("query", "q"), TensorArg("key", "k"), TensorArg("value", "v"),
                 BoolArg("enable_gqa", true)},
                dtype, {b, h, 1, d})
          .Output("attention")
          .Build(forge::v1::KERNEL_FAMILY_ATTENTION);
  // The views' strides and offsets, as the export records them.
  for (forge::v1::Value& value : *task.mutable_group()->mutable_values()) {
    forge::v1::TensorSpec& spec = *value.mutable_tensor();
    if (value.name() == "q") {
      spec.clear_strides();
      for (int64_t stride : {h * d, d, h * d, int64_t{1}}) spec.add_strides(stride);
    } else if (value.name() == "k" || value.name() == "v") {
      spec.clear_strides();
      for (int64_t stride : {hkv * cache * d, cache * d, d, int64_t{1}}) spec.add_strides(stride);
      spec.set_storage_offset(start * d);
    }
  }
  return task;
}

forge::v1::KernelTask ConvEpilogueTask(forge::v1::DType dtype, const ConvShape& shape, bool bias,
                                       const std::vector<std::string>& epilogue,
                                       bool channels_last) {
  const int64_t p = (shape.h + 2 * shape.padding - shape.dilation * (shape.r - 1) - 1) / shape.stride + 1;
  const int64_t q = (shape.w + 2 * shape.padding - shape.dilation * (shape.s - 1) - 1) / shape.stride + 1;
  const std::vector<int64_t> y = {shape.n, shape.k, p, q};
  auto nhwc = [channels_last](const std::vector<int64_t>& d) -> std::vector<int64_t> {
    if (!channels_last) return {};
    return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
  };
  TaskBuilder builder;
  builder.Input("x", dtype, {shape.n, shape.c, shape.h, shape.w},
                nhwc({shape.n, shape.c, shape.h, shape.w}))
      .Input("weight", dtype, {shape.k, shape.c / shape.groups, shape.r, shape.s});
  std::vector<forge::v1::Argument> arguments = {TensorArg("input", "x"),
                                                TensorArg("weight", "weight")};
  if (bias) {
    builder.Input("bias", dtype, {shape.k});
    arguments.push_back(OptionalTensorArg("bias", "bias"));
  } else {
    arguments.push_back(NoneArg("bias"));
  }
  arguments.push_back(IntsArg("stride", {shape.stride, shape.stride}));
  arguments.push_back(IntsArg("padding", {shape.padding, shape.padding}));
  arguments.push_back(IntsArg("dilation", {shape.dilation, shape.dilation}));
  arguments.push_back(IntArg("groups", shape.groups));
  builder.Node("conv", "conv2d", "", arguments, dtype, y);
  std::string current = "conv";
  for (size_t i = 0; i < epilogue.size(); ++i) {
    const std::string& step = epilogue[i];
    const std::string out = absl::StrCat("step", i);
    if (step == "residual" || step == "channel_bias") {
      const bool residual = step == "residual";
      builder.Input(step, dtype, residual ? y : std::vector<int64_t>{1, shape.k, 1, 1},
                    residual ? nhwc(y) : std::vector<int64_t>{});
      builder.Node(out, "add", "Tensor", {TensorArg("self", current), TensorArg("other", step)},
                   dtype, y);
    } else if (step == "scale") {
      builder.Node(out, "mul", "Tensor", {TensorArg("self", current), FloatArg("other", 0.5)},
                   dtype, y);
    } else if (step == "gelu_tanh") {
      builder.Node(out, "gelu", "", {TensorArg("self", current), StringArg("approximate", "tanh")},
                   dtype, y);
    } else if (step == "clamp") {
      builder.Node(out, "clamp", "", {TensorArg("self", current), FloatArg("min", -0.25)}, dtype, y);
    } else if (step == "batch_norm") {
      // The exporter's eval-mode form, with weight and bias: (out, save_mean, save_invstd).
      for (const char* operand : {"running_mean", "running_var", "bn_weight", "bn_bias"}) {
        builder.Input(absl::StrCat(out, "_", operand), dtype, {shape.k});
      }
      builder.MultiOutputNode(
          out, {out, absl::StrCat(out, "_save_mean"), absl::StrCat(out, "_save_invstd")},
          "_native_batch_norm_legit_no_training", "",
          {TensorArg("input", current), OptionalTensorArg("weight", absl::StrCat(out, "_bn_weight")),
           OptionalTensorArg("bias", absl::StrCat(out, "_bn_bias")),
           TensorArg("running_mean", absl::StrCat(out, "_running_mean")),
           TensorArg("running_var", absl::StrCat(out, "_running_var")), FloatArg("momentum", 0.1),
           FloatArg("eps", 1e-5)},
          dtype, {y, {0}, {0}});
    } else if (step == "batch_norm_eval" || step == "batch_norm_training") {
      // aten::batch_norm without weight and bias, in eval or training mode.
      for (const char* operand : {"running_mean", "running_var"}) {
        builder.Input(absl::StrCat(out, "_", operand), dtype, {shape.k});
      }
      builder.Node(out, "batch_norm", "",
                   {TensorArg("input", current), NoneArg("weight"), NoneArg("bias"),
                    OptionalTensorArg("running_mean", absl::StrCat(out, "_running_mean")),
                    OptionalTensorArg("running_var", absl::StrCat(out, "_running_var")),
                    BoolArg("training", step == "batch_norm_training"), FloatArg("momentum", 0.1),
                    FloatArg("eps", 1e-3), BoolArg("cudnn_enabled", true)},
                   dtype, y);
    } else {
      builder.Node(out, step, "", {TensorArg("self", current)}, dtype, y);
    }
    current = out;
  }
  forge::v1::KernelTask task = builder.Output(current, nhwc(y)).Build(forge::v1::KERNEL_FAMILY_CONV);
  const int64_t outputs = y[0] * y[1] * y[2] * y[3];
  task.set_flops(2 * outputs * (shape.c / shape.groups) * shape.r * shape.s);
  int64_t bytes = 0;
  for (const forge::v1::TensorSpec& spec : task.inputs()) bytes += Elements(spec) * ElementBytes(spec.dtype());
  task.set_min_bytes(bytes + outputs * ElementBytes(dtype));
  return task;
}

forge::v1::KernelTask ScaleResidualTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k,
                                        double scale) {
  return TaskBuilder()
      .Input("a", dtype, {m, k})
      .Input("b", dtype, {k, n})
      .Input("residual", dtype, {m, n})
      .Node("mm", "mm", "", {TensorArg("self", "a"), TensorArg("mat2", "b")}, dtype, {m, n})
      .Node("scaled", "mul", "Tensor", {TensorArg("self", "mm"), FloatArg("other", scale)}, dtype,
            {m, n})
      .Node("sum", "add", "Tensor", {TensorArg("self", "residual"), TensorArg("other", "scaled")},
            dtype, {m, n})
      .Output("sum")
      .Build(forge::v1::KERNEL_FAMILY_GEMM);
}

forge::v1::KernelTask MatmulTask(forge::v1::DType dtype, int64_t batch_a, int64_t batch_b,
                                 int64_t m, int64_t n, int64_t k, bool b_transposed,
                                 const std::string& activation) {
  const bool batched = batch_a > 0 || batch_b > 0;
  auto shape = [&](int64_t batch, int64_t rows, int64_t cols) {
    return batched ? std::vector<int64_t>{batch, rows, cols} : std::vector<int64_t>{rows, cols};
  };
  TaskBuilder builder;
  builder.Input("a", dtype, shape(batch_a, m, k));
  if (b_transposed) {
    builder.Input("bt", dtype, shape(batch_b, n, k));
    builder.Node("b", "transpose", "int",
                 {TensorArg("self", "bt"), IntArg("dim0", batched ? 1 : 0),
                  IntArg("dim1", batched ? 2 : 1)},
                 dtype, shape(batch_b, k, n));
  } else {
    builder.Input("b", dtype, shape(batch_b, k, n));
  }
  const std::vector<int64_t> out = shape(std::max(batch_a, batch_b), m, n);
  builder.Node("out", "matmul", "", {TensorArg("self", "a"), TensorArg("other", "b")}, dtype, out);
  if (activation.empty()) return builder.Output("out").Build(forge::v1::KERNEL_FAMILY_GEMM);
  builder.Node("act", activation, "", {TensorArg("self", "out")}, dtype, out);
  return builder.Output("act").Build(forge::v1::KERNEL_FAMILY_GEMM);
}

bool HaveCutlass() {
  const std::string include = CutlassInclude();
  return !include.empty() &&
         std::filesystem::exists(std::filesystem::path(include) / "cutlass" / "version.h");
}

absl::StatusOr<std::string> CompileSharedObject(const GeneratedKernel& kernel,
                                                const std::string& arch) {
  std::optional<forge::compile::CompileRequest> request =
      forge::compile::CompileRequestFor(kernel, arch);
  if (!request.has_value() || request->output != CompileOutput::kNvccSharedObject) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel.kernel_name, " is not compiled into a shared object"));
  }
  forge::compile::CompileResult compiled = Pool().Compile(*std::move(request));
  if (!compiled.ok()) {
    return absl::Status(compiled.status.code(),
                        absl::StrCat(compiled.status.message(), "\n", compiled.log));
  }
  return std::move(compiled.cubin);
}

}  // namespace forge::codegen::testing
