// Binary search over ascending arrays of ids, shared by the Redis index, the
// scale-out report and its checks.

/** The first index i with a[i] >= x in ascending `a` (a.length when there is none). */
export function lowerBound(a: ArrayLike<number>, x: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Whether ascending `a` holds x. */
export function sortedHas(a: ArrayLike<number>, x: number): boolean {
  const i = lowerBound(a, x);
  return i < a.length && a[i] === x;
}
