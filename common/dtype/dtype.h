// Facts about forge.v1 dtypes shared by the compiler, the worker and the client.
#ifndef FORGE_COMMON_DTYPE_DTYPE_H_
#define FORGE_COMMON_DTYPE_DTYPE_H_

#include <string>

#include "forge/v1/graph.pb.h"

namespace forge {

// Bytes per element; 0 for DTYPE_UNSPECIFIED.
int DTypeBytes(forge::v1::DType dtype);
// True for the float64 down to float8 dtypes; false for integers, bool and complex64.
bool IsFloatingPoint(forge::v1::DType dtype);
// The enum name without "DTYPE_", lowercased as torch spells it: "bfloat16", "float8_e4m3fn".
std::string DTypeName(forge::v1::DType dtype);

}  // namespace forge

#endif  // FORGE_COMMON_DTYPE_DTYPE_H_
