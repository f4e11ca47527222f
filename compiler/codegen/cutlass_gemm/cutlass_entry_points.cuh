// The host-launch entry points of every cutlass_gemm template, embedded at build time after the
// template's .cuh, which defines in namespace forge_cutlass:
//   Gemm                  a CUTLASS device-level GEMM (3.x GemmUniversalAdapter or 2.x
//                         GemmUniversal: both have static get_workspace_size and can_implement,
//                         and initialize(arguments, workspace, stream) / run(stream))
//   MakeArguments(args, buffers)   its Arguments for one launch (buffers nullptr: sizes only)
//   kTemplateName         the prefix of every error ("sm90_tma_ws: ")
// A template that prepares its operands before the GEMM (sm90_3xtf32's split kernel) defines
// FORGE_PREPARES_OPERANDS 1 and, instead of MakeArguments(args, buffers):
//   OperandWorkspaceBytes(args)    bytes of the workspace its prepared operands take (first)
//   PrepareOperands(args, buffers, operand_workspace, stream)   enqueues the preparation;
//                         "" or the reason it cannot
//   MakeArguments(args, buffers, operand_workspace)   the GEMM's Arguments over them
// forge_workspace_bytes asks CUTLASS for the workspace of the arguments (after the prepared
// operands'); forge_launch checks the arguments, the workspace and can_implement, then enqueues
// on the given stream only (the preparation; CUTLASS's initialize sets kernel attributes and
// writes its parameters; run launches). Neither synchronizes or allocates.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN
namespace forge_cutlass {
#if !FORGE_PREPARES_OPERANDS
// The template reads its operands where they are: no workspace of its own, nothing to prepare.
inline int64_t OperandWorkspaceBytes(const Args&) { return 0; }
inline const char* PrepareOperands(const Args&, void* const*, void*, cudaStream_t) { return ""; }
inline typename Gemm::Arguments MakeArguments(const Args& args, void* const* buffers, void*) {
  return MakeArguments(args, buffers);
}
#endif
}  // namespace forge_cutlass

extern "C" int64_t forge_workspace_bytes(const int64_t* runtime_args, int32_t runtime_arg_count) {
  const forge_cutlass::Args args{runtime_args, runtime_arg_count};
  if (forge_cutlass::CheckArgs(args, -1)[0] != '\0') return -1;
  // Only sizes and scalars enter the workspace size: no buffers here.
  return forge_cutlass::OperandWorkspaceBytes(args) +
         static_cast<int64_t>(forge_cutlass::Gemm::get_workspace_size(
             forge_cutlass::MakeArguments(args, nullptr, nullptr)));
}

extern "C" int32_t forge_launch(void* const* buffers, int32_t buffer_count,
                                const int64_t* runtime_args, int32_t runtime_arg_count,
                                void* workspace, int64_t workspace_bytes, void* stream,
                                char* error, int32_t error_capacity) {
  using forge_cutlass::Fail;
  using forge_cutlass::kTemplateName;
  const forge_cutlass::Args args{runtime_args, runtime_arg_count};
  if (const char* reason = forge_cutlass::CheckArgs(args, buffer_count); reason[0] != '\0') {
    return Fail(error, error_capacity, kTemplateName, reason);
  }
  const int64_t operand_bytes = forge_cutlass::OperandWorkspaceBytes(args);
  void* const operand_workspace = operand_bytes > 0 ? workspace : nullptr;
  const typename forge_cutlass::Gemm::Arguments arguments =
      forge_cutlass::MakeArguments(args, buffers, operand_workspace);
  if (operand_bytes + static_cast<int64_t>(forge_cutlass::Gemm::get_workspace_size(arguments)) >
          workspace_bytes ||
      (operand_bytes > 0 && workspace == nullptr)) {
    return Fail(error, error_capacity, kTemplateName,
                "the workspace is smaller than forge_workspace_bytes");
  }
  cutlass::Status status = forge_cutlass::Gemm::can_implement(arguments);
  if (status != cutlass::Status::kSuccess) {
    return Fail(error, error_capacity, kTemplateName, "can_implement: ",
                cutlass::cutlassGetStatusString(status));
  }
  forge_cutlass::Gemm gemm;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (const char* reason =
          forge_cutlass::PrepareOperands(args, buffers, operand_workspace, cuda_stream);
      reason[0] != '\0') {
    return Fail(error, error_capacity, kTemplateName, reason);
  }
  status = gemm.initialize(
      arguments, operand_bytes > 0 ? static_cast<char*>(workspace) + operand_bytes : workspace,
      cuda_stream);
  if (status != cutlass::Status::kSuccess) {
    return Fail(error, error_capacity, kTemplateName, "initialize: ",
                cutlass::cutlassGetStatusString(status));
  }
  status = gemm.run(cuda_stream);
  if (status != cutlass::Status::kSuccess) {
    return Fail(error, error_capacity, kTemplateName, "run: ",
                cutlass::cutlassGetStatusString(status));
  }
  return 0;
}
