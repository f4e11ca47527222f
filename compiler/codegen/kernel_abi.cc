#include "compiler/codegen/kernel_abi.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/codegen/cuda_expr.h"

namespace forge::codegen {

std::string KernelParameterList(const forge::v1::KernelTask& task) {
  std::vector<std::string> parameters;
  for (int i = 0; i < task.inputs_size(); ++i) {
    parameters.push_back(absl::StrCat("const ", *StorageType(task.inputs(i).dtype()),
                                      "* __restrict__ in", i));
  }
  for (int o = 0; o < task.outputs_size(); ++o) {
    parameters.push_back(
        absl::StrCat(*StorageType(task.outputs(o).dtype()), "* __restrict__ out", o));
  }
  return absl::StrJoin(parameters, ", ");
}

std::string KernelArgumentList(const forge::v1::KernelTask& task) {
  std::vector<std::string> names;
  for (int i = 0; i < task.inputs_size(); ++i) names.push_back(absl::StrCat("in", i));
  for (int o = 0; o < task.outputs_size(); ++o) names.push_back(absl::StrCat("out", o));
  return absl::StrJoin(names, ", ");
}

}  // namespace forge::codegen
