#!/usr/bin/env python3
"""PyTorch peer for bench/minhash.js: classic MinHash (datasketch's formula,
((a * h + b) mod 2^64) mod (2^61 - 1), low 32 bits, minimum over each row's
tokens) on the GitHub-shaped workload, written the way one would in PyTorch:
per chunk of nonzeros, broadcast the token hashes against the (a, b) vectors
in int64 (its products wrap mod 2^64 like numpy's uint64), reduce mod p with
the Mersenne fold, then segment minima with scatter_reduce. Times the GPU work
only (CUDA events), inputs already on the GPU. Checks itself against exact
integers on a few rows. Prints one JSON line last.

usage: minhash_classic_torch.py ROWS DIM SAMPLES
"""
import json

from github_rows import begin, github_rows, time_runs


def main():
    started = begin()
    if started is None:
        return
    rows, dim, samples, np, torch = started
    dev = torch.device("cuda")
    lens, cols, _, row_of = github_rows(np, rows, dim)
    nnz = int(lens.sum())

    P = (1 << 61) - 1
    gen = np.random.RandomState(1)
    ab = np.array([(gen.randint(1, np.uint64(P), dtype=np.uint64), gen.randint(0, np.uint64(P), dtype=np.uint64)) for _ in range(samples)], dtype=np.uint64)
    # int64 holds the same bits; arithmetic wraps mod 2^64 as uint64 would.
    a = torch.from_numpy(ab[:, 0].view(np.int64)).to(dev)
    b = torch.from_numpy(ab[:, 1].view(np.int64)).to(dev)
    p = torch.tensor(P, dtype=torch.int64, device=dev)
    h = torch.from_numpy(cols).to(dev)
    rid = torch.from_numpy(row_of).to(dev)
    chunk = max(1, (1 << 26) // samples)  # nonzeros per step: bounded temporaries

    def run():
        best = torch.full((rows, samples), 0xFFFFFFFF, device=dev, dtype=torch.int64)
        for lo in range(0, nnz, chunk):
            hi = min(nnz, lo + chunk)
            x = h[lo:hi].unsqueeze(1) * a + b
            y = (x & p) + ((x >> 61) & 7)
            y = torch.where(y >= p, y - p, y) & 0xFFFFFFFF
            best.scatter_reduce_(0, rid[lo:hi].unsqueeze(1).expand(-1, samples), y, reduce="amin")
        return best

    got = run()  # warm-up, and the self-check below
    torch.cuda.synchronize()
    first = got[:3].cpu().numpy()
    for r in range(3):
        toks = cols[row_of == r]
        for si in (0, samples - 1):
            ai, bi = int(ab[si, 0]), int(ab[si, 1])
            want = min((((ai * int(t) + bi) % (1 << 64)) % P) & 0xFFFFFFFF for t in toks)
            if int(first[r, si]) != want:
                print(json.dumps({"skipped": f"peer self-check failed at row {r} sample {si}"}))
                return
    print(json.dumps(time_runs(torch, run, rows, nnz, samples)))


if __name__ == "__main__":
    main()
