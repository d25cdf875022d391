"""Peer for bench/cluster.js: what a user would write with CuPy/cuSPARSE.
Random rows x K unit-norm centroids over a V-term vocabulary in CSR; a
document as a dense vector -> SpMV -> argmax, and B documents as a dense
matrix -> SpMM -> argmax per column. Prints one JSON line."""
import json
import sys
import time

import cupy as cp
import cupyx.scipy.sparse as sp


def main():
    rows, k, v, b = (int(x) for x in sys.argv[1:5])
    rs = cp.random.RandomState(1)
    indices = rs.randint(0, v, size=rows * k, dtype=cp.int32)
    data = rs.random_sample(rows * k, dtype=cp.float32)
    indptr = cp.arange(0, rows * k + 1, k, dtype=cp.int32)
    m = sp.csr_matrix((data, indices, indptr), shape=(rows, v))
    m.sum_duplicates()
    norms = cp.sqrt(m.multiply(m).sum(axis=1)).ravel()
    m = sp.diags(1 / cp.maximum(norms, 1e-12)) @ m
    m = m.tocsr()

    def doc():
        d = cp.zeros(v, dtype=cp.float32)
        d[rs.randint(0, v, size=55)] = rs.random_sample(55, dtype=cp.float32)
        return d / cp.linalg.norm(d)

    docs = [doc() for _ in range(64)]
    for d in docs[:4]:
        int(cp.argmax(m @ d))
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for d in docs:
        int(cp.argmax(m @ d))  # the host needs the answer before the next document
    spmv_ms = (time.perf_counter() - t0) * 1e3 / len(docs)

    dm = cp.stack([doc() for _ in range(b)], axis=1)
    cp.argmax(m @ dm, axis=0).get()
    reps = 5
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        cp.argmax(m @ dm, axis=0).get()
    spmm_ms = (time.perf_counter() - t0) * 1e3 / reps
    print(json.dumps({"rows": rows, "k": k, "v": v, "b": b, "spmv_ms": spmv_ms, "spmm_ms": spmm_ms}))


if __name__ == "__main__":
    main()
