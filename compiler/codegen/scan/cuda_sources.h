// The CUDA of the scan family, embedded at build time from the .cuh files of this folder
// (forge_embed_cuda in CMakeLists.txt): each symbol is the file's text after its
// "// FORGE_EMBED_BEGIN" line.
#ifndef FORGE_COMPILER_CODEGEN_SCAN_CUDA_SOURCES_H_
#define FORGE_COMPILER_CODEGEN_SCAN_CUDA_SOURCES_H_

namespace forge::codegen::scan {

extern const char kScanPrelude[];      // scan_prelude.cuh
extern const char kRowScanBody[];      // row_scan.cuh
extern const char kColumnScanBody[];   // column_scan.cuh
extern const char kChainedScanBody[];  // chained_scan.cuh
extern const char kScanTile[];         // tile.cuh: what row_scan and chained_scan share

}  // namespace forge::codegen::scan

#endif  // FORGE_COMPILER_CODEGEN_SCAN_CUDA_SOURCES_H_
