// The kernel that draws a judge's input on the GPU (device_inputs.cc): every logical element i
// gets DrawElement(rule, i) (draw_element.h, whose text precedes this in the NVRTC source) at its
// place in the storage. Grid-stride loop; the values depend on i alone, not on the launch shape.
// FORGE_EMBED_BEGIN
extern "C" __global__ void forge_draw(forge::judge::DrawRule rule, forge::judge::DrawLayout layout,
                                      unsigned char* storage) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < layout.count; i += stride) {
    const unsigned long long bits = forge::judge::DrawElement(rule, i);
    const long long offset = forge::judge::DrawOffset(layout, i);
    switch (layout.element_bytes) {
      case 1: storage[offset] = static_cast<unsigned char>(bits); break;
      case 2: reinterpret_cast<unsigned short*>(storage)[offset] = static_cast<unsigned short>(bits); break;
      case 4: reinterpret_cast<unsigned int*>(storage)[offset] = static_cast<unsigned int>(bits); break;
      default: reinterpret_cast<unsigned long long*>(storage)[offset] = bits; break;
    }
  }
}
