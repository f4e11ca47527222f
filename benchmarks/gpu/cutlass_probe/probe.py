"""Times the CUTLASS probe objects (run_probe.sh builds them) against torch on this GPU.

Each object exports probe_gemm(M, N, K, A, B, D, stream). For every (object, shape): checks the
result against a float64 product (max error relative to the output's scale) and times it with
CUDA events (L2 flushed by a 2x-L2 write before every rep, median of 30), next to torch.matmul
(eager) on the same tensors; counts the elements outside float32's judge tolerance
(1e-4 + 1e-4 |ref|), ours and eager's. Prints a markdown table.
"""
import ctypes
import pathlib
import statistics
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from problems import bench  # noqa: E402  the timer's protocol, as the baselines use it

FLUSH = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def time_ms(fn):
    return statistics.median(bench(fn, FLUSH))


def main(args):
    rows = []
    for spec in args:
        path, dtype_name, m, n, k, b_layout = spec.split(":")
        m, n, k = int(m), int(n), int(k)
        dtype = getattr(torch, dtype_name)
        lib = ctypes.CDLL(path)
        lib.probe_gemm.restype = ctypes.c_int
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b_nk = torch.randn(n, k, device="cuda", dtype=dtype)  # B^T, row-major (N x K)
        b_kn = b_nk.t().contiguous()                           # B, row-major (K x N)
        b_arg = b_nk if b_layout == "nk" else b_kn
        d = torch.empty(m, n, device="cuda", dtype=dtype)
        stream = torch.cuda.current_stream().cuda_stream

        def run():
            rc = lib.probe_gemm(m, n, k, ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b_arg.data_ptr()),
                                ctypes.c_void_p(d.data_ptr()), ctypes.c_void_p(stream))
            if rc != 0:
                raise RuntimeError(f"{path}: probe_gemm returned {rc}")

        d.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        ref = (a.double() @ b_kn.double())
        scale = ref.abs().max().item()
        err = ((d.double() - ref).abs().max().item()) / scale
        eager_out = a @ b_kn
        eager_err = ((eager_out.double() - ref).abs().max().item()) / scale
        # Elements outside float32's judge tolerance (|d - ref| <= 1e-4 + 1e-4 |ref|), ours and eager's.
        bound = 1e-4 + 1e-4 * ref.abs()
        viol = int(((d.double() - ref).abs() > bound).sum().item())
        eager_viol = int(((eager_out.double() - ref).abs() > bound).sum().item())
        t = time_ms(run)
        te = time_ms(lambda: torch.matmul(a, b_kn))
        tflops = 2 * m * n * k / t / 1e9
        rows.append((path.split("/")[-1], dtype_name, f"{m}x{n}x{k}", f"{t:.3f}", f"{tflops:.0f}",
                     f"{te:.3f}", f"{2*m*n*k/te/1e9:.0f}", f"{te/t:.2f}", f"{err:.2e}", f"{eager_err:.2e}", str(viol), str(eager_viol)))
        del lib
    print("| object | dtype | MxNxK | ms | TFLOP/s | eager ms | eager TFLOP/s | vs eager | max rel err | eager max rel err | > 1e-4 tol | eager > 1e-4 tol |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    torch.backends.cuda.matmul.allow_tf32 = False
    main(sys.argv[1:])
