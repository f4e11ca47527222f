#include "common/dtype/dtype.h"

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace forge {

int DTypeBytes(forge::v1::DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT64:
    case forge::v1::DTYPE_INT64:
    case forge::v1::DTYPE_COMPLEX64:
      return 8;
    case forge::v1::DTYPE_FLOAT32:
    case forge::v1::DTYPE_INT32:
      return 4;
    case forge::v1::DTYPE_FLOAT16:
    case forge::v1::DTYPE_BFLOAT16:
    case forge::v1::DTYPE_INT16:
      return 2;
    case forge::v1::DTYPE_FLOAT8_E4M3FN:
    case forge::v1::DTYPE_FLOAT8_E5M2:
    case forge::v1::DTYPE_INT8:
    case forge::v1::DTYPE_UINT8:
    case forge::v1::DTYPE_BOOL:
      return 1;
    default:
      return 0;
  }
}

bool IsFloatingPoint(forge::v1::DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT64:
    case forge::v1::DTYPE_FLOAT32:
    case forge::v1::DTYPE_FLOAT16:
    case forge::v1::DTYPE_BFLOAT16:
    case forge::v1::DTYPE_FLOAT8_E4M3FN:
    case forge::v1::DTYPE_FLOAT8_E5M2:
      return true;
    default:
      return false;
  }
}

std::string DTypeName(forge::v1::DType dtype) {
  absl::string_view name = forge::v1::DType_Name(dtype);
  absl::ConsumePrefix(&name, "DTYPE_");
  return absl::AsciiStrToLower(name);
}

}  // namespace forge
