"""What the MinHash PyTorch peers share: their start (arguments, imports,
the skip line the harness reads) and the GitHub-shaped rows they time, the
shape of bench/minhash.js's workload: log-normal row lengths with mean 340,
Zipf(1.1) column ranks over dim (duplicates within a row are harmless for
timing), integer count weights 1..8."""
import json
import sys


def begin():
    """(rows, dim, samples, numpy, torch), or None after printing why the peer skips."""
    rows, dim, samples = (int(a) for a in sys.argv[1:4])
    try:
        import numpy as np
        import torch
    except ImportError as e:  # the harness reports the skip
        print(json.dumps({"skipped": f"missing {e.name}"}))
        return None
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device for torch"}))
        return None
    return rows, dim, samples, np, torch


def github_rows(np, rows, dim):
    """(lens, cols, vals, row_of) as numpy arrays."""
    rng = np.random.default_rng(7)
    sigma = 1.0
    lens = np.clip(np.rint(rng.lognormal(np.log(340) - sigma * sigma / 2, sigma, rows)), 1, dim).astype(np.int64)
    nnz = int(lens.sum())
    s = 1.1
    u = rng.random(nnz)
    cols = np.minimum(dim - 1, np.floor((1 - u * (1 - dim ** (1 - s))) ** (1 / (1 - s))) - 1).astype(np.int64)
    vals = (1 + rng.integers(0, 8, nnz)).astype(np.float32)
    row_of = np.repeat(np.arange(rows), lens)
    return lens, cols, vals, row_of


def time_runs(torch, run, rows, nnz, samples):
    """Prints the peer's JSON line: median GPU time of three runs of run() by CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(3):
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    ms = sorted(times)[len(times) // 2]
    return {
        "peer": f"torch {torch.__version__}",
        "rows": rows,
        "nnz": nnz,
        "samples": samples,
        "ms": ms,
        "elem_samples_per_s": nnz * samples / (ms / 1e3),
    }
