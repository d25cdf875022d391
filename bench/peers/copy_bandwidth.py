# Host<->GPU copy ceiling: what 1, 2, 4 … GPUs at once can move from and to
# host memory, H2D, D2H and both ways at once, from page-locked and from
# pageable (ordinary) host memory. The ceiling for transfer-bound work such as
# the MinHash pipeline (2.7 GB of CSR in and 1 GB of signatures out per 1M
# GitHub-shaped rows); bench/minhash.js prints it beside its own rates.
# Each GPU copies from its own host buffer on its own streams (one per
# direction), all GPUs issued from one thread: copies are asynchronous from
# pinned memory. Pageable copies are staged by the driver on the calling
# thread, so the pageable rows use one Python thread per GPU.
# Usage: copy_bandwidth.py [MiB per copy, default 256] [reps, default 4]
# Prints one JSON line: { devices, rows: [{ gpus, direction, host, GBps }] }.
import json
import sys
import threading
import time

import torch

MB = 1 << 20
size = int(sys.argv[1]) * MB if len(sys.argv) > 1 else 256 * MB
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 4
n_dev = torch.cuda.device_count()
if n_dev == 0:
    raise SystemExit("no CUDA device")


def setup(d):
    with torch.cuda.device(d):
        b = {
            "d_in": torch.empty(size, dtype=torch.uint8, device=f"cuda:{d}"),
            "d_out": torch.empty(size, dtype=torch.uint8, device=f"cuda:{d}"),
            "s_h2d": torch.cuda.Stream(device=d),
            "s_d2h": torch.cuda.Stream(device=d),
        }
        for host in ("pinned", "pageable"):
            pin = host == "pinned"
            # Touched once so no page fault lands in a timed copy.
            b[f"h_in_{host}"] = torch.ones(size, dtype=torch.uint8).pin_memory() if pin else torch.ones(size, dtype=torch.uint8)
            b[f"h_out_{host}"] = torch.ones(size, dtype=torch.uint8).pin_memory() if pin else torch.ones(size, dtype=torch.uint8)
        return b


bufs = [setup(d) for d in range(n_dev)]


def issue(d, host, h2d, d2h):
    b = bufs[d]
    with torch.cuda.device(d):
        for _ in range(reps):
            if h2d:
                with torch.cuda.stream(b["s_h2d"]):
                    b["d_in"].copy_(b[f"h_in_{host}"], non_blocking=True)
            if d2h:
                with torch.cuda.stream(b["s_d2h"]):
                    b[f"h_out_{host}"].copy_(b["d_out"], non_blocking=True)


def run(devs, host, h2d, d2h):
    for d in devs:
        torch.cuda.synchronize(d)
    t0 = time.perf_counter()
    if host == "pinned":
        for d in devs:
            issue(d, host, h2d, d2h)
    else:
        threads = [threading.Thread(target=issue, args=(d, host, h2d, d2h)) for d in devs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for d in devs:
        torch.cuda.synchronize(d)
    s = time.perf_counter() - t0
    moved = reps * len(devs) * size * (int(h2d) + int(d2h))
    return moved / s / 1e9


counts = []
c = 1
while c <= n_dev:
    counts.append(c)
    c *= 2
if counts[-1] != n_dev:
    counts.append(n_dev)

rows = []
for host in ("pinned", "pageable"):
    for label, h2d, d2h in (("H2D", True, False), ("D2H", False, True), ("both", True, True)):
        for c in counts:
            devs = list(range(c))
            run(devs, host, h2d, d2h)  # warm-up
            rows.append({"gpus": c, "direction": label, "host": host, "GBps": run(devs, host, h2d, d2h)})

print(
    json.dumps(
        {
            "peer": f"torch {torch.__version__}",
            "devices": [torch.cuda.get_device_name(d) for d in range(n_dev)],
            "bytes_per_copy": size,
            "reps": reps,
            "rows": rows,
        }
    )
)
