// One row-major batched matmul with a cuBLASLt epilogue, described to cuBLASLt the one way Forge
// does it. The worker (worker/library/cublaslt_gemm.cc) judges and times the gemm_library
// family's candidates through it, and every generated extension (forge_runtime.h) replays the
// winner through it. A candidate's `algo` is an index into cuBLASLt's heuristic list, which is
// only reproducible for identical requests: both sides build the same descriptors, set the same
// attributes in the same order and ask for the same number of results, here. Even then another
// cuBLASLt build may list other algorithms, so the worker also records which algorithm the index
// chose (DescribeAlgorithm) and the extension replays that one, wherever its list has it.
//
// Header-only, on cuBLASLt and the C++ standard library alone: torch's extension tooling compiles
// it on the user's machine, without Abseil or Forge's protos. Errors are plain cuBLASLt statuses;
// callers turn them into absl::Status or TORCH_CHECK.
#ifndef FORGE_RUNTIME_EXTENSION_CUBLASLT_MATMUL_H_
#define FORGE_RUNTIME_EXTENSION_CUBLASLT_MATMUL_H_

#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace forge_cublaslt {

// Workspace offered to cuBLASLt (what NVIDIA advises for Hopper); a run's workspace has this many
// bytes.
inline constexpr uint64_t kWorkspaceBytes = uint64_t{32} << 20;
// Heuristic results asked for: a candidate's `algo` is 0 .. this - 1
// (codegen::GemmLibraryFamily::kHeuristicAlgorithms).
inline constexpr int kHeuristicAlgorithms = 8;

// cuBLASLt's epilogues that Forge maps onto (codegen::LibraryEpilogue; GELU is the tanh form).
enum class Epilogue { kNone, kBias, kRelu, kReluBias, kGelu, kGeluBias };

inline bool HasBias(Epilogue epilogue) {
  return epilogue == Epilogue::kBias || epilogue == Epilogue::kReluBias ||
         epilogue == Epilogue::kGeluBias;
}

// How one operand is stored: element (i, j) of batch b sits at
// b * batch_stride + i * leading_dim + j, or b * batch_stride + j * leading_dim + i when
// transposed (codegen::LibraryMatrix without its input position).
struct Matrix {
  bool transposed = false;
  int64_t leading_dim = 0;
  int64_t batch_stride = 0;
};

// For each of `batch` products: D (m x n, row-major, leading dimension n, batches m * n apart) =
// A (m x k) B (k x n), then the epilogue (bias[n] broadcast over rows, then the activation).
// A, B, D and the bias share `type`; the product accumulates in float32 whatever the type.
struct Matmul {
  cudaDataType_t type = CUDA_R_32F;
  int64_t batch = 1;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  Matrix a;
  Matrix b;
  Epilogue epilogue = Epilogue::kNone;
};

// Device addresses of one call's matrices; bias is null when the epilogue has none.
struct Operands {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;
  void* d = nullptr;
};

// The largest power of two up to 256 that divides `address` (256 for null: an absent operand).
// Plans are made for their operands' alignments, so callers cache them by these.
inline uint32_t Alignment(const void* address) {
  const auto bits = reinterpret_cast<uintptr_t>(address);
  if (bits == 0) return 256;
  return static_cast<uint32_t>(std::min<uintptr_t>(256, bits & (~bits + 1)));
}

// A cuBLASLt status and the function that returned it.
struct Status {
  cublasStatus_t code = CUBLAS_STATUS_SUCCESS;
  const char* call = "";

  bool ok() const { return code == CUBLAS_STATUS_SUCCESS; }
  // "cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not supported)"
  std::string message() const {
    return std::string(call) + ": " + cublasLtGetStatusName(code) + " (" +
           cublasLtGetStatusString(code) + ")";
  }
};

// Sets *description to one line naming `algo` by its configuration, e.g. "id 21 tile 18 stages 9
// splitk 1 reduction 0 swizzle 0 custom 0 inner 0 cluster 0": the same line for the same
// algorithm from any heuristic list (what Forge records as forge.v1.Measurement's
// library_algorithm).
inline Status DescribeAlgorithm(const cublasLtMatmulAlgo_t& algo, std::string* description) {
  std::string line;
  Status status;
  // Reads one attribute as the type cublasLt.h documents for it (cuBLASLt refuses any other
  // size), unless an earlier read failed.
  const auto append = [&](auto type, cublasLtMatmulAlgoConfigAttributes_t attribute,
                          const char* label) {
    if (!status.ok()) return;
    decltype(type) value{};
    size_t written = 0;
    status = {
        cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof(value), &written),
        "cublasLtMatmulAlgoConfigGetAttribute"};
    if (!status.ok()) return;
    if (!line.empty()) line += ' ';
    line.append(label).append(" ").append(std::to_string(static_cast<int64_t>(value)));
  };
  append(int32_t{}, CUBLASLT_ALGO_CONFIG_ID, "id");
  append(uint32_t{}, CUBLASLT_ALGO_CONFIG_TILE_ID, "tile");
  append(uint32_t{}, CUBLASLT_ALGO_CONFIG_STAGES_ID, "stages");
  append(int32_t{}, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, "splitk");
  append(uint32_t{}, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, "reduction");
  append(uint32_t{}, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, "swizzle");
  append(uint32_t{}, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, "custom");
  append(uint16_t{}, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, "inner");
  append(uint16_t{}, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, "cluster");
  if (status.ok()) *description = std::move(line);
  return status;
}

// The descriptors of one matmul and cuBLASLt's heuristic list for it, made once per matmul and
// operand alignments. cuBLASLt is column-major: the row-major D (m x n) = A B is computed as the
// column-major D^T (n x m) = B^T A^T, so cuBLASLt's first operand is our B and its second our A;
// bias[n] runs along D^T's rows.
class MatmulPlan {
 public:
  // Describes `matmul` on `handle` (which must outlive the plan) for operands aligned as
  // `operands` are (the bias pointer is set too, as cuBLASLt reads it), and asks the heuristic for
  // kHeuristicAlgorithms results with a workspace of kWorkspaceBytes. Sets *plan on success.
  static Status Create(cublasLtHandle_t handle, const Matmul& matmul, const Operands& operands,
                       std::unique_ptr<MatmulPlan>* plan) {
    std::unique_ptr<MatmulPlan> made(new MatmulPlan(handle, matmul));
    if (Status status = made->Describe(operands); !status.ok()) return status;
    if (Status status = made->QueryHeuristic(operands); !status.ok()) return status;
    *plan = std::move(made);
    return {};
  }

  ~MatmulPlan() {
    if (operation_ != nullptr) cublasLtMatmulDescDestroy(operation_);
    for (cublasLtMatrixLayout_t layout : {first_, second_, output_}) {
      if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout);
    }
  }
  MatmulPlan(const MatmulPlan&) = delete;
  MatmulPlan& operator=(const MatmulPlan&) = delete;

  // How many algorithms the heuristic offered (at most kHeuristicAlgorithms).
  int algorithm_count() const { return static_cast<int>(algorithms_.size()); }

  // DescribeAlgorithm's line for the heuristic's result `algo` (0 <= algo < algorithm_count()).
  const std::string& algorithm_description(int algo) const { return descriptions_[algo]; }

  // The heuristic result whose description is `description`: `preferred` when it is that one (the
  // index recorded with it), else the first that is; -1 when none is.
  int FindAlgorithm(const std::string& description, int preferred) const {
    if (preferred >= 0 && preferred < algorithm_count() &&
        descriptions_[preferred] == description) {
      return preferred;
    }
    const auto found = std::find(descriptions_.begin(), descriptions_.end(), description);
    return found == descriptions_.end() ? -1 : static_cast<int>(found - descriptions_.begin());
  }

  // Enqueues the matmul with the heuristic's result `algo` (0 <= algo < algorithm_count()) on
  // `stream`, with `workspace` (kWorkspaceBytes of device memory). Sets the descriptor's bias
  // pointer: callers serialize the runs of one plan.
  Status Run(const Operands& operands, int algo, void* workspace, cudaStream_t stream) {
    if (HasBias(matmul_.epilogue)) {
      if (Status status = SetBiasPointer(operands.bias); !status.ok()) return status;
    }
    const float alpha = 1.0f;
    const float beta = 0.0f;
    return {cublasLtMatmul(handle_, operation_, &alpha, operands.b, first_, operands.a, second_,
                           &beta, operands.d, output_, operands.d, output_, &algorithms_[algo].algo,
                           workspace, kWorkspaceBytes, stream),
            "cublasLtMatmul"};
  }

 private:
  MatmulPlan(cublasLtHandle_t handle, const Matmul& matmul) : handle_(handle), matmul_(matmul) {}

  template <typename T>
  Status SetAttribute(cublasLtMatmulDescAttributes_t attribute, const T& value) {
    return {cublasLtMatmulDescSetAttribute(operation_, attribute, &value, sizeof(value)),
            "cublasLtMatmulDescSetAttribute"};
  }

  Status SetBiasPointer(const void* bias) {
    return SetAttribute(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  }

  // The layout of `matrix` (rows x cols as the product uses it) in cuBLASLt's column-major
  // terms: a row-major rows x cols matrix is a column-major cols x rows one.
  Status CreateLayout(const Matrix& matrix, int64_t rows, int64_t cols,
                      cublasLtMatrixLayout_t* layout) const {
    const uint64_t stored_rows = matrix.transposed ? rows : cols;
    const uint64_t stored_cols = matrix.transposed ? cols : rows;
    Status status{cublasLtMatrixLayoutCreate(layout, matmul_.type, stored_rows, stored_cols,
                                             matrix.leading_dim),
                  "cublasLtMatrixLayoutCreate"};
    if (!status.ok() || matmul_.batch <= 1) return status;
    const int32_t count = static_cast<int32_t>(matmul_.batch);
    status = {cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                               sizeof(count)),
              "cublasLtMatrixLayoutSetAttribute"};
    if (!status.ok()) return status;
    return {cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                             &matrix.batch_stride, sizeof(matrix.batch_stride)),
            "cublasLtMatrixLayoutSetAttribute"};
  }

  Status Describe(const Operands& operands) {
    // float32 stays float32: CUBLAS_COMPUTE_32F, never the TF32 fast path.
    Status status{cublasLtMatmulDescCreate(&operation_, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                  "cublasLtMatmulDescCreate"};
    if (!status.ok()) return status;
    const cublasOperation_t first_op = matmul_.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t second_op = matmul_.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (status = SetAttribute(CUBLASLT_MATMUL_DESC_TRANSA, first_op); !status.ok()) return status;
    if (status = SetAttribute(CUBLASLT_MATMUL_DESC_TRANSB, second_op); !status.ok()) return status;
    if (status = SetAttribute(CUBLASLT_MATMUL_DESC_EPILOGUE, LtEpilogue(matmul_.epilogue));
        !status.ok()) {
      return status;
    }
    if (HasBias(matmul_.epilogue)) {
      if (status = SetAttribute(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, matmul_.type); !status.ok()) {
        return status;
      }
      if (status = SetBiasPointer(operands.bias); !status.ok()) return status;
    }
    if (status = CreateLayout(matmul_.b, matmul_.k, matmul_.n, &first_); !status.ok()) {
      return status;
    }
    if (status = CreateLayout(matmul_.a, matmul_.m, matmul_.k, &second_); !status.ok()) {
      return status;
    }
    const Matrix output{false, matmul_.n, matmul_.m * matmul_.n};
    return CreateLayout(output, matmul_.m, matmul_.n, &output_);
  }

  Status QueryHeuristic(const Operands& operands) {
    cublasLtMatmulPreference_t preference = nullptr;
    Status status{cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate"};
    if (!status.ok()) return status;
    const uint64_t workspace = kWorkspaceBytes;
    status = {
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspace, sizeof(workspace)),
        "cublasLtMatmulPreferenceSetAttribute"};
    const struct {
      cublasLtMatmulPreferenceAttributes_t attribute;
      const void* address;
    } alignments[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, operands.b},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, operands.a},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, operands.d},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, operands.d}};
    for (const auto& [attribute, address] : alignments) {
      const uint32_t bytes = Alignment(address);
      if (status.ok()) {
        status = {
            cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes, sizeof(bytes)),
            "cublasLtMatmulPreferenceSetAttribute"};
      }
    }
    std::vector<cublasLtMatmulHeuristicResult_t> results(kHeuristicAlgorithms);
    int returned = 0;
    if (status.ok()) {
      status = {cublasLtMatmulAlgoGetHeuristic(
                    handle_, operation_, first_, second_, output_, output_, preference,
                    static_cast<int>(results.size()), results.data(), &returned),
                "cublasLtMatmulAlgoGetHeuristic"};
    }
    cublasLtMatmulPreferenceDestroy(preference);
    for (int i = 0; status.ok() && i < returned; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
      std::string description;
      if (status = DescribeAlgorithm(results[i].algo, &description); status.ok()) {
        algorithms_.push_back(results[i]);
        descriptions_.push_back(std::move(description));
      }
    }
    return status;
  }

  static cublasLtEpilogue_t LtEpilogue(Epilogue epilogue) {
    switch (epilogue) {
      case Epilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
      case Epilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
      case Epilogue::kRelu: return CUBLASLT_EPILOGUE_RELU;
      case Epilogue::kReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
      case Epilogue::kGelu: return CUBLASLT_EPILOGUE_GELU;
      case Epilogue::kGeluBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
    }
    return CUBLASLT_EPILOGUE_DEFAULT;
  }

  const cublasLtHandle_t handle_;
  const Matmul matmul_;
  cublasLtMatmulDesc_t operation_ = nullptr;
  cublasLtMatrixLayout_t first_ = nullptr;   // our B
  cublasLtMatrixLayout_t second_ = nullptr;  // our A
  cublasLtMatrixLayout_t output_ = nullptr;  // D, also C (beta = 0)
  std::vector<cublasLtMatmulHeuristicResult_t> algorithms_;
  std::vector<std::string> descriptions_;  // DescribeAlgorithm's, one per entry of algorithms_
};

}  // namespace forge_cublaslt

#endif  // FORGE_RUNTIME_EXTENSION_CUBLASLT_MATMUL_H_
