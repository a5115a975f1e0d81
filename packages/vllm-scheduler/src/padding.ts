/** The smallest capture size >= n, or n itself above the largest (vLLM runs those eagerly). */
export function paddedBatchSize(n: number, captureSizes: readonly number[] | undefined): number {
  if (captureSizes === undefined || n <= 0) return n;
  let lo = 0;
  let hi = captureSizes.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (captureSizes[mid]! < n) lo = mid + 1;
    else hi = mid;
  }
  return lo < captureSizes.length ? captureSizes[lo]! : n;
}
