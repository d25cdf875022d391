"""FlyHash the way a PyTorch user would: dense X @ W with the binary projection
W (d x m, s ones per column), then torch.topk(k). Data lives on the GPU.
Usage: flyhash_torch.py n d m s k [dtype] [data]. dtype: fp32 (default), fp16,
or int8: 8-bit data shifted to int8 (x - 128) and multiplied on the int8 tensor
cores with torch._int_mm; every output then drops by the same 128 * s, so the
top-k is that of X @ W, exactly. data: "float" (uniform in [0, 1), the default)
or "u8" (uniform integers in [0, 255]). Prints one JSON line last."""
import json
import sys

import torch


def main():
    n, d, m, s, k = (int(a) for a in sys.argv[1:6])
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "int8": torch.int8}[sys.argv[6] if len(sys.argv) > 6 else "fp32"]
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    data = sys.argv[7] if len(sys.argv) > 7 else "float"
    if dtype == torch.int8:
        if data != "u8":
            raise SystemExit("int8 needs 8-bit data (data = u8)")
        x = (torch.randint(0, 256, (n, d), device=dev, generator=g) - 128).to(torch.int8)
    elif data == "u8":
        x = torch.randint(0, 256, (n, d), device=dev, generator=g).to(dtype)
    else:
        x = torch.rand(n, d, device=dev, generator=g, dtype=torch.float32).to(dtype)
    # s distinct inputs per output: the s smallest of m x d uniform keys.
    cols = torch.rand(m, d, device=dev, generator=g).argsort(dim=1)[:, :s]
    w = torch.zeros(d, m, device=dev, dtype=dtype)
    w[cols, torch.arange(m, device=dev).unsqueeze(1).expand(m, s)] = 1
    torch.backends.cuda.matmul.allow_tf32 = False
    # Chunk rows so the n x m activation matrix stays within memory.
    free, _ = torch.cuda.mem_get_info()
    chunk = max(1, min(n, int(free * 0.4) // (m * 4 * 2)))

    if dtype == torch.int8:
        # cuBLASLt's int8 GEMM wants the right operand column-major.
        w = w.t().contiguous().t()

        def matmul(a):
            return torch._int_mm(a, w)
    else:

        def matmul(a):
            return a @ w

    def run():
        out = []
        for r in range(0, n, chunk):
            a = matmul(x[r : r + chunk])
            out.append(torch.topk(a, k, dim=1, sorted=False).indices)
        return out

    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    print(json.dumps({
        "ms_median": times[len(times) // 2],
        "ms_min": times[0],
        "n": n, "d": d, "m": m, "s": s, "k": k,
        "dtype": str(dtype), "data": data, "chunk": chunk,
        "device": torch.cuda.get_device_name(0),
    }))


if __name__ == "__main__":
    main()
