# Host<->GPU copy bandwidth from page-locked memory, one GPU alone and all GPUs
# at once: the ceiling for transfer-bound work such as the MinHash pipeline
# (2.7 GB of CSR in and 1 GB of signatures out per 1M GitHub-shaped rows).
# Prints one JSON line.
import json
import time

import torch

GB = 1 << 30
n_dev = torch.cuda.device_count()
size = GB  # bytes per direction per GPU per copy
reps = 5


def setup(d):
    with torch.cuda.device(d):
        return {
            "h_in": torch.empty(size, dtype=torch.uint8, pin_memory=True),
            "h_out": torch.empty(size, dtype=torch.uint8, pin_memory=True),
            "d_in": torch.empty(size, dtype=torch.uint8, device=f"cuda:{d}"),
            "d_out": torch.empty(size, dtype=torch.uint8, device=f"cuda:{d}"),
            "s_h2d": torch.cuda.Stream(device=d),
            "s_d2h": torch.cuda.Stream(device=d),
        }


bufs = [setup(d) for d in range(n_dev)]


def run(devs, h2d, d2h):
    for d in devs:
        torch.cuda.synchronize(d)
    t0 = time.perf_counter()
    for _ in range(reps):
        for d in devs:
            b = bufs[d]
            if h2d:
                with torch.cuda.stream(b["s_h2d"]):
                    b["d_in"].copy_(b["h_in"], non_blocking=True)
            if d2h:
                with torch.cuda.stream(b["s_d2h"]):
                    b["h_out"].copy_(b["d_out"], non_blocking=True)
    for d in devs:
        torch.cuda.synchronize(d)
    s = time.perf_counter() - t0
    moved = reps * len(devs) * size * (int(h2d) + int(d2h))
    return moved / s / 1e9


res = {"devices": [torch.cuda.get_device_name(d) for d in range(n_dev)], "bytes_per_copy": size, "reps": reps}
for label, h2d, d2h in [("h2d", True, False), ("d2h", False, True), ("both", True, True)]:
    run([0], h2d, d2h)  # warm-up
    res[f"{label}_1gpu_GBps"] = run([0], h2d, d2h)
    if n_dev > 1:
        run(list(range(n_dev)), h2d, d2h)
        res[f"{label}_{n_dev}gpu_GBps"] = run(list(range(n_dev)), h2d, d2h)
print(json.dumps(res))
