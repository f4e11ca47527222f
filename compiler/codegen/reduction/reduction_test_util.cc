#include "compiler/codegen/reduction/reduction_test_util.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/testing/codegen_test_util.h"

namespace forge::codegen::testing {

using ::forge::v1::DType;
using ::forge::v1::KernelTask;

KernelTask Softmax(DType dtype, std::vector<int64_t> shape, const char* op) {
  return TaskBuilder()
      .Input("x", dtype, shape)
      .Node("softmax", op, "int", {TensorArg("self", "x"), IntArg("dim", -1)}, dtype, shape)
      .Output("softmax")
      .Build(kReduction);
}

// layer_norm(x, (C,), w, b, 1e-5) then gelu, as the layer-norm+GELU test model exports it.
KernelTask LayerNormGelu(DType dtype, int64_t rows, int64_t columns) {
  return LayerNormTrailing(dtype, {rows, columns}, 1, {}, {});
}

// nn.LayerNorm((C, H, W)) over x of shape (N, C, H, W), then `epilogue` (none, or "gelu");
// `x_strides` as the kernel sees x (contiguous when empty).
KernelTask LayerNormTrailing(DType dtype, std::vector<int64_t> shape, int normalized_dims,
                             std::vector<int64_t> x_strides,
                             std::vector<int64_t> weight_shape) {
  const std::vector<int64_t> normalized(shape.end() - normalized_dims, shape.end());
  if (weight_shape.empty()) weight_shape = normalized;
  return TaskBuilder()
      .Input("x", dtype, shape, x_strides)
      .Input("w", dtype, weight_shape)
      .Input("b", dtype, weight_shape)
      .Node("layer_norm", "layer_norm", "default",
            {TensorArg("input", "x"), IntsArg("normalized_shape", normalized),
             OptionalTensorArg("weight", "w"), OptionalTensorArg("bias", "b"),
             FloatArg("eps", 1e-5), BoolArg("cudnn_enable", false)},
            dtype, shape)
      .Node("gelu", "gelu", "default", {TensorArg("self", "layer_norm")}, dtype, shape)
      .Output("gelu")
      .Build(kReduction);
}

// The RMSNorm pattern of the Llama block: x * rsqrt(mean(x^2, -1, keepdim) + eps) * w.
KernelTask RmsNorm(DType dtype, int64_t rows, int64_t columns) {
  return TaskBuilder()
      .Input("x", dtype, {rows, columns})
      .Input("w", dtype, {columns})
      .Node("pow", "pow", "Tensor_Scalar", {TensorArg("self", "x"), IntArg("exponent", 2)}, dtype, {rows, columns})
      .Node("mean", "mean", "dim", {TensorArg("self", "pow"), IntsArg("dim", {-1}), BoolArg("keepdim", true)}, dtype, {rows, 1})
      .Node("add", "add", "Tensor", {TensorArg("self", "mean"), FloatArg("other", 1e-6)}, dtype, {rows, 1})
      .Node("rsqrt", "rsqrt", "default", {TensorArg("self", "add")}, dtype, {rows, 1})
      .Node("mul", "mul", "Tensor", {TensorArg("self", "x"), TensorArg("other", "rsqrt")}, dtype, {rows, columns})
      .Node("mul_1", "mul", "Tensor", {TensorArg("self", "mul"), TensorArg("other", "w")}, dtype, {rows, columns})
      .Output("mul_1")
      .Build(kReduction);
}

KernelTask RowStatistic(const char* op, const char* overload, bool keepdim, DType dtype) {
  const std::vector<int64_t> out_shape = keepdim ? std::vector<int64_t>{6, 5, 1} : std::vector<int64_t>{6, 5};
  return TaskBuilder()
      .Input("x", dtype, {6, 5, 100})
      .Node("scaled", "mul", "Tensor", {TensorArg("self", "x"), IntArg("other", 2)}, dtype, {6, 5, 100})
      .Node("r", op, overload, {TensorArg("self", "scaled"), IntsArg("dim", {-1}), BoolArg("keepdim", keepdim)}, dtype, out_shape)
      .Output("r")
      .Build(kReduction);
}

// Channel RMS norm as exported from x * rsqrt(x.pow(2).mean(dim=1, keepdim=True) + eps) * w on
// (N, C, H, W), w of shape (C, 1, 1).
KernelTask ChannelRmsNorm(DType dtype, std::vector<int64_t> shape) {
  std::vector<int64_t> per_row = shape;
  per_row[1] = 1;
  return TaskBuilder()
      .Input("x", dtype, shape)
      .Input("w", dtype, {shape[1], 1, 1})
      .Node("pow", "pow", "Tensor_Scalar", {TensorArg("self", "x"), IntArg("exponent", 2)}, dtype, shape)
      .Node("mean", "mean", "dim", {TensorArg("self", "pow"), IntsArg("dim", {1}), BoolArg("keepdim", true)}, dtype, per_row)
      .Node("add", "add", "Tensor", {TensorArg("self", "mean"), FloatArg("other", 1e-6)}, dtype, per_row)
      .Node("rsqrt", "rsqrt", "default", {TensorArg("self", "add")}, dtype, per_row)
      .Node("mul", "mul", "Tensor", {TensorArg("self", "x"), TensorArg("other", "rsqrt")}, dtype, shape)
      .Node("mul_1", "mul", "Tensor", {TensorArg("self", "mul"), TensorArg("other", "w")}, dtype, shape)
      .Output("mul_1")
      .Build(kReduction);
}

KernelTask SoftmaxDim(DType dtype, std::vector<int64_t> shape, int64_t dim) {
  return TaskBuilder()
      .Input("x", dtype, shape)
      .Node("softmax", "_softmax", "default", {TensorArg("self", "x"), IntArg("dim", dim), BoolArg("half_to_float", false)}, dtype, shape)
      .Output("softmax")
      .Build(kReduction);
}

// `op` over dim `dim` of x * 2 (var: var.correction with `correction`).
KernelTask Statistic(const char* op, const char* overload, std::vector<int64_t> shape, int64_t dim,
                     bool keepdim, DType dtype, int64_t correction) {
  std::vector<int64_t> out_shape = shape;
  if (keepdim) {
    out_shape[dim < 0 ? dim + shape.size() : dim] = 1;
  } else {
    out_shape.erase(out_shape.begin() + (dim < 0 ? dim + shape.size() : dim));
  }
  std::vector<forge::v1::Argument> arguments = {TensorArg("self", "scaled"), IntsArg("dim", {dim})};
  if (std::string(op) == "var") arguments.push_back(IntArg("correction", correction));
  arguments.push_back(BoolArg("keepdim", keepdim));
  return TaskBuilder()
      .Input("x", dtype, shape)
      .Node("scaled", "mul", "Tensor", {TensorArg("self", "x"), IntArg("other", 2)}, dtype, shape)
      .Node("r", op, overload, std::move(arguments), dtype, out_shape)
      .Output("r")
      .Build(kReduction);
}

// torch.var_mean(x, dim, correction=0, keepdim=True): outputs "vm.0" (var) and "vm.1" (mean).
KernelTask VarMean(std::vector<int64_t> shape, int64_t dim) {
  std::vector<int64_t> out_shape = shape;
  out_shape[dim] = 1;
  KernelTask task =
      TaskBuilder()
          .Input("x", kF32, shape)
          .Node("vm.0", "var_mean", "correction", {TensorArg("self", "x"), IntsArg("dim", {dim}), IntArg("correction", 0), BoolArg("keepdim", true)}, kF32, out_shape)
          .Node("mean_plus_one", "add", "Tensor", {TensorArg("self", "vm.1"), IntArg("other", 1)}, kF32, out_shape)
          .Output("vm.0")
          .Output("mean_plus_one")
          .Build(kReduction);
  forge::v1::Value* mean = task.mutable_group()->add_values();
  *mean = task.group().values(1);
  mean->set_name("vm.1");
  task.mutable_group()->mutable_nodes(0)->add_outputs("vm.1");
  return task;
}

KernelTask GroupNormSilu(DType dtype, std::vector<int64_t> shape, int64_t groups, bool epilogue) {
  TaskBuilder builder;
  builder.Input("x", dtype, shape)
      .Input("w", dtype, {shape[1]})
      .Input("b", dtype, {shape[1]})
      .Node("group_norm", "group_norm", "default",
            {TensorArg("input", "x"), IntArg("num_groups", groups), OptionalTensorArg("weight", "w"),
             OptionalTensorArg("bias", "b"), FloatArg("eps", 1e-5),
             BoolArg("cudnn_enabled", false)},
            dtype, shape);
  if (!epilogue) return builder.Output("group_norm").Build(kReduction);
  return builder.Node("silu", "silu", "default", {TensorArg("self", "group_norm")}, dtype, shape)
      .Output("silu")
      .Build(kReduction);
}

KernelTask NativeGroupNormResidual(DType dtype, std::vector<int64_t> shape, int64_t groups) {
  int64_t spatial = 1;
  for (size_t d = 2; d < shape.size(); ++d) spatial *= shape[d];
  KernelTask task =
      TaskBuilder()
          .Input("x", dtype, shape)
          .Input("w", dtype, {shape[1]})
          .Input("b", dtype, {shape[1]})
          .Input("residual", dtype, shape)
          .Node("gn.0", "native_group_norm", "default",
                {TensorArg("input", "x"), OptionalTensorArg("weight", "w"),
                 OptionalTensorArg("bias", "b"), IntArg("N", shape[0]), IntArg("C", shape[1]),
                 IntArg("HxW", spatial), IntArg("group", groups), FloatArg("eps", 1e-5)},
                dtype, shape)
          .Node("sum", "add", "Tensor", {TensorArg("self", "gn.0"), TensorArg("other", "residual")},
                dtype, shape)
          .Output("sum")
          .Build(kReduction);
  // The statistics: (N, G) values the node also defines, and task outputs.
  for (const char* name : {"gn.1", "gn.2"}) {
    forge::v1::Value* value = task.mutable_group()->add_values();
    value->set_name(name);
    value->mutable_tensor()->set_dtype(dtype);
    value->mutable_tensor()->add_shape(shape[0]);
    value->mutable_tensor()->add_shape(groups);
    value->mutable_tensor()->add_strides(groups);
    value->mutable_tensor()->add_strides(1);
    task.mutable_group()->mutable_nodes(0)->add_outputs(name);
    task.mutable_group()->add_outputs()->set_value_name(name);
    *task.add_outputs() = value->tensor();
  }
  return task;
}

KernelTask InstanceNorm(DType dtype, std::vector<int64_t> shape) {
  return TaskBuilder()
      .Input("x", dtype, shape)
      .Input("w", dtype, {shape[1]})
      .Input("b", dtype, {shape[1]})
      .Node("instance_norm", "instance_norm", "default",
            {TensorArg("input", "x"), OptionalTensorArg("weight", "w"),
             OptionalTensorArg("bias", "b"), NoneArg("running_mean"),
             NoneArg("running_var"), BoolArg("use_input_stats", true),
             FloatArg("momentum", 0.1), FloatArg("eps", 1e-5), BoolArg("cudnn_enabled", false)},
            dtype, shape)
      .Output("instance_norm")
      .Build(kReduction);
}

std::vector<std::pair<std::string, KernelTask>> Cases() {
  std::vector<std::pair<std::string, KernelTask>> cases;
  cases.emplace_back("softmax_f32_1000", Softmax(kF32, {8, 1000}));
  cases.emplace_back("softmax_f64_3d", Softmax(kF64, {2, 3, 257}));
  cases.emplace_back("log_softmax_f16_4096", Softmax(kF16, {4, 4096}, "log_softmax"));
  cases.emplace_back("softmax_f32_393216", Softmax(kF32, {16, 393216}));
  cases.emplace_back("layer_norm_gelu_bf16_4096", LayerNormGelu(kBF16, 16, 4096));
  cases.emplace_back("layer_norm_gelu_f32_768", LayerNormGelu(kF32, 10, 768));
  cases.emplace_back("rms_norm_f32_4096", RmsNorm(kF32, 4, 4096));
  cases.emplace_back("rms_norm_bf16_512", RmsNorm(kBF16, 7, 512));
  cases.emplace_back("sum_keepdim", RowStatistic("sum", "dim_IntList", true));
  cases.emplace_back("sum", RowStatistic("sum", "dim_IntList", false));
  cases.emplace_back("mean", RowStatistic("mean", "dim", false, kF16));
  cases.emplace_back("amax_keepdim", RowStatistic("amax", "default", true));
  cases.emplace_back("amin", RowStatistic("amin", "default", false, kF64));
  cases.emplace_back("var_last_dim", Statistic("var", "correction", {33, 1001}, -1, false));
  cases.emplace_back("var_last_dim_unbiased0_f16",
                     Statistic("var", "correction", {7, 4096}, 1, true, kF16, 0));
  cases.emplace_back("var_mean_last_dim", VarMean({9, 300}, 1));
  cases.emplace_back("channel_rms_norm_f32", ChannelRmsNorm(kF32, {4, 64, 32, 32}));
  cases.emplace_back("channel_rms_norm_bf16", ChannelRmsNorm(kBF16, {2, 96, 7, 9}));
  cases.emplace_back("channel_rms_norm_anchor", ChannelRmsNorm(kF32, {112, 64, 512, 512}));
  cases.emplace_back("softmax_dim1_f32", SoftmaxDim(kF32, {8, 1000, 33}, 1));
  cases.emplace_back("softmax_dim0_f16", SoftmaxDim(kF16, {300, 129}, 0));
  cases.emplace_back("sum_dim1", Statistic("sum", "dim_IntList", {6, 100, 17}, 1, false));
  cases.emplace_back("mean_dim1_keepdim", Statistic("mean", "dim", {6, 4097, 5}, 1, true));
  cases.emplace_back("amax_dim0", Statistic("amax", "default", {5000, 3}, 0, false, kF64));
  cases.emplace_back("amin_dim2_bf16", Statistic("amin", "default", {3, 4, 50, 64}, 2, true, kBF16));
  cases.emplace_back("var_dim1", Statistic("var", "correction", {16, 256, 49}, 1, true));
  cases.emplace_back("var_mean_dim0", VarMean({77, 130}, 0));
  cases.emplace_back("logsumexp", Statistic("logsumexp", "default", {33, 1001}, -1, false));
  cases.emplace_back("logsumexp_dim1_keepdim_bf16",
                     Statistic("logsumexp", "default", {4, 77, 9}, 1, true, kBF16));
  cases.emplace_back("mean_hw_keepdim_times_x",
                     TaskBuilder()
                         .Input("x", kF32, {4, 6, 7, 9})
                         .Node("m", "mean", "dim", {TensorArg("self", "x"), IntsArg("dim", {2, 3}), BoolArg("keepdim", true)}, kF32, {4, 6, 1, 1})
                         .Node("y", "mul", "Tensor", {TensorArg("self", "x"), TensorArg("other", "m")}, kF32, {4, 6, 7, 9})
                         .Output("y")
                         .Build(kReduction));
  cases.emplace_back("group_norm_silu_f16", GroupNormSilu(kF16, {2, 320, 8, 8}, 32));
  cases.emplace_back("group_norm_silu_bf16_3d", GroupNormSilu(kBF16, {3, 12, 7}, 4));
  cases.emplace_back("group_norm_f32_5d", GroupNormSilu(kF32, {2, 6, 3, 5, 7}, 3, false));
  cases.emplace_back("group_norm_f32_2d", GroupNormSilu(kF32, {33, 96}, 8));
  cases.emplace_back("native_group_norm_residual_f16", NativeGroupNormResidual(kF16, {3, 8, 5, 5}, 2));
  cases.emplace_back("instance_norm_f32", InstanceNorm(kF32, {2, 5, 9, 11}));
  // Views inside the group: softmax over a transposed input (strided reads), a sum over dim 1 of
  // a permuted one (col_reduce), and a layer norm whose output is reshaped back.
  cases.emplace_back("softmax_of_transpose",
                     TaskBuilder()
                         .Input("x", kF32, {300, 129})
                         .Node("t", "transpose", "int", {TensorArg("self", "x"), IntArg("dim0", 0), IntArg("dim1", 1)}, kF32, {129, 300})
                         .Node("s", "softmax", "int", {TensorArg("self", "t"), IntArg("dim", -1)}, kF32, {129, 300})
                         .Output("s")
                         .Build(kReduction));
  cases.emplace_back("sum_dim1_of_permute",
                     TaskBuilder()
                         .Input("x", kBF16, {4, 7, 33})
                         .Node("p", "permute", "default", {TensorArg("self", "x"), IntsArg("dims", {0, 2, 1})}, kBF16, {4, 33, 7})
                         .Node("r", "sum", "dim_IntList", {TensorArg("self", "p"), IntsArg("dim", {1}), BoolArg("keepdim", true)}, kBF16, {4, 1, 7})
                         .Output("r")
                         .Build(kReduction));
  cases.emplace_back("layer_norm_of_view",
                     TaskBuilder()
                         .Input("x", kF32, {8, 4, 64})
                         .Node("v", "view", "default", {TensorArg("self", "x"), IntsArg("size", {32, 64})}, kF32, {32, 64})
                         .Node("ln", "layer_norm", "default", {TensorArg("input", "v"), IntsArg("normalized_shape", {64})}, kF32, {32, 64})
                         .Output("ln")
                         .Build(kReduction));
  // Softmax of a layer norm's output, and its row max as a second output.
  cases.emplace_back(
      "layer_norm_then_softmax_and_amax",
      TaskBuilder()
          .Input("x", kF32, {32, 256})
          .Node("ln", "layer_norm", "default", {TensorArg("input", "x"), IntsArg("normalized_shape", {256})}, kF32, {32, 256})
          .Node("sm", "softmax", "int", {TensorArg("self", "ln"), IntArg("dim", 1)}, kF32, {32, 256})
          .Node("mx", "amax", "default", {TensorArg("self", "ln"), IntsArg("dim", {1}), BoolArg("keepdim", true)}, kF32, {32, 1})
          .Output("sm")
          .Output("mx")
          .Build(kReduction));
  return cases;
}

SchedulePoint ClusterPoint(int64_t blocks, int64_t threads, int64_t width, int64_t online) {
  return {"row_reduce",
          {{"threads_per_row", threads},
           {"rows_per_block", 1},
           {"vector_width", width},
           {"cache_row", 1},
           {"cluster_blocks", blocks},
           {"online_softmax", online},
           {"max_registers", 0}}};
}

SchedulePoint ColumnPoint(int64_t block, int64_t split, int64_t cache) {
  return {"col_reduce", {{"threads_per_block", block}, {"reduce_threads", split}, {"cache_row", cache}}};
}

SchedulePoint Point(int64_t threads, int64_t rows, int64_t width, int64_t cache, int64_t online) {
  return {"row_reduce",
          {{"threads_per_row", threads}, {"rows_per_block", rows}, {"vector_width", width},
           {"cache_row", cache}, {"online_softmax", online}, {"max_registers", 0}}};
}

// F.cross_entropy(logits, target, ...) as forge.export emits it: one aten::cross_entropy_loss
// node; `arguments` are those after self and target that differ from their defaults.
KernelTask CrossEntropy(DType dtype, int64_t rows, int64_t classes,
                        std::vector<forge::v1::Argument> arguments,
                        std::vector<int64_t> logits_strides, const std::string& op) {
  std::vector<forge::v1::Argument> all = {TensorArg("self", "x"), TensorArg("target", "t")};
  all.insert(all.end(), arguments.begin(), arguments.end());
  // reduction none: a loss per row; weight "w": class weights of the logits' dtype, an input.
  std::vector<int64_t> loss_shape;
  bool weighted = false;
  for (const forge::v1::Argument& argument : arguments) {
    if (argument.name() == "reduction" && argument.int_value() == 0) loss_shape = {rows};
    weighted = weighted || argument.name() == "weight";
  }
  TaskBuilder builder;
  builder.Input("x", dtype, {rows, classes}, std::move(logits_strides))
      .Input("t", forge::v1::DTYPE_INT64, {rows});
  if (weighted) builder.Input("w", dtype, {classes});
  return builder
      .Node(op, op, "default", std::move(all), dtype, loss_shape)
      .Output(op)
      .Build(kReduction);
}

SchedulePoint CrossEntropyPoint(int64_t threads, int64_t rows, int64_t width) {
  return {"cross_entropy",
          {{"threads_per_row", threads}, {"rows_per_block", rows}, {"vector_width", width}}};
}

std::string Label(const std::string& prefix, const SchedulePoint& point) {
  std::string label = prefix;
  for (const auto& [name, value] : point.parameters) absl::StrAppend(&label, " ", name, "=", value);
  return label;
}

}  // namespace forge::codegen::testing
