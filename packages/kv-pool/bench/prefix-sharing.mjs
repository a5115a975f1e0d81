// Benchmark of @kvsim/kv-pool on a synthetic prefix-sharing workload (run after a build:
// `pnpm bench` at the root, or `pnpm --filter @kvsim/kv-pool bench`). Prints figures; asserts
// nothing about wall time.
import process from "node:process";
import { performance } from "node:perf_hooks";
import { KvCacheManager, computeBlockHashes, createPromptTokens } from "../dist/index.js";

const REQUESTS = 10_000;
const PREFIXES = 64;
const PREFIX_TOKENS = 1024;
const CONCURRENCY = 128;
const CHUNK = 2048;

/** A 32-bit LCG (deterministic; the pure packages never use Math.random). */
function lcg(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s;
  };
}

function workload() {
  const rnd = lcg(20261129);
  const prefixes = Array.from({ length: PREFIXES }, () => Uint32Array.from({ length: PREFIX_TOKENS }, () => rnd() % 150_000));
  return Array.from({ length: REQUESTS }, (_, i) => {
    // Skewed popularity: the square of a uniform index favours low prefix ids.
    const u = (rnd() % 1000) / 1000;
    const p = prefixes[Math.floor(u * u * PREFIXES)];
    const user = 64 + (rnd() % 448);
    const tokens = new Uint32Array(PREFIX_TOKENS + user);
    tokens.set(p);
    for (let k = PREFIX_TOKENS; k < tokens.length; k++) tokens[k] = rnd() % 150_000;
    return { id: `r${i}`, tokens, outputs: 32 + (rnd() % 97) };
  });
}

function fmt(n) {
  return Math.round(n).toLocaleString("en-US");
}

function benchHashes(reqs, blockSize) {
  let blocks = 0;
  const t0 = performance.now();
  for (const r of reqs) blocks += computeBlockHashes(r.tokens, blockSize).length;
  const ms = performance.now() - t0;
  return { blocks, ms };
}

/** Replays the requests through one rank's pool: chunked prefill, per-token decode, FCFS preemption. */
function benchPool(reqs, groups, numPages, label) {
  const m = new KvCacheManager({ numPages, groups, enablePrefixCaching: true, vllmVersion: "0.31.0" });
  const prompts = reqs.map((r) => createPromptTokens(r.tokens));
  const align = m.alignsChunksToBlocks ? groups.find((g) => g.kind === "state").block_size_tokens : 0;
  let next = 0;
  const waiting = [];
  const running = [];
  let allocations = 0;
  let failed = 0;
  let preemptions = 0;
  let hitTokens = 0;
  let promptTokens = 0;
  let steps = 0;
  /** vLLM's _mamba_block_aligned_split: chunks end on block boundaries up to the last one. */
  const alignedChunk = (numTokens, computed, n) => {
    if (align === 0) return n;
    const last = numTokens - (numTokens % align);
    if (computed + n < last) return n - ((computed + n) % align);
    return computed < last ? last - computed : n;
  };
  /** After a step: cache what was computed; at the end of the tokens sample one, or finish. */
  const finishStep = (q) => {
    m.commitComputed(q.seq, q.computed);
    if (q.computed < q.seq.numTokens) return false;
    if (q.outputs === 0) {
      m.free(q.seq);
      return true;
    }
    q.seq.appendToken(q.outputs);
    q.outputs--;
    return false;
  };
  const t0 = performance.now();
  while (next < reqs.length || waiting.length > 0 || running.length > 0) {
    steps++;
    while (running.length + waiting.length < CONCURRENCY && next < reqs.length) {
      const r = reqs[next];
      waiting.push({ seq: m.createSequence(r.id, prompts[next]), computed: 0, outputs: r.outputs });
      promptTokens += r.tokens.length;
      next++;
    }
    // Running first; preempt from the tail when a step does not fit.
    for (let i = 0; i < running.length; i++) {
      const q = running[i];
      let n = Math.min(CHUNK, q.seq.numTokens - q.computed);
      n = alignedChunk(q.seq.numTokens, q.computed, n);
      allocations++;
      while (!m.allocateSlots(q.seq, { computedTokens: q.computed, newTokens: n })) {
        failed++;
        const victim = running.pop();
        m.free(victim.seq);
        victim.computed = 0;
        waiting.unshift(victim);
        preemptions++;
        if (victim === q) break;
        allocations++;
      }
      if (q.computed === 0 && !running.includes(q)) continue;
      q.computed += n;
      if (finishStep(q)) running.splice(i--, 1);
    }
    // Then waiting, if nothing was preempted (keeps the loop simple: admit while it fits).
    while (waiting.length > 0) {
      const q = waiting[0];
      const hit = m.findPrefixHit(q.seq);
      let n = Math.min(CHUNK, q.seq.numTokens - hit.tokens);
      n = alignedChunk(q.seq.numTokens, hit.tokens, n);
      allocations++;
      if (!m.allocateSlots(q.seq, { computedTokens: 0, newTokens: n, hit })) {
        failed++;
        break;
      }
      hitTokens += hit.tokens;
      waiting.shift();
      q.computed = hit.tokens + n;
      if (!finishStep(q)) running.push(q);
    }
  }
  const ms = performance.now() - t0;
  const met = m.metrics();
  process.stdout.write(
    `${label}: ${fmt(allocations)} allocateSlots calls in ${ms.toFixed(0)} ms = ${fmt((allocations / ms) * 1000)} allocations/s ` +
      `(${fmt(steps)} steps, ${fmt(failed)} refused, ${fmt(preemptions)} preemptions, prefix reuse ${((100 * hitTokens) / promptTokens).toFixed(1)}%, ` +
      `end: ${met.freePages}/${met.usablePages} free, ${met.cachedEvictablePages} cached)\n`,
  );
}

const reqs = workload();
const totalTokens = reqs.reduce((n, r) => n + r.tokens.length, 0);
process.stdout.write(`kv-pool bench: ${fmt(REQUESTS)} requests, ${PREFIXES} shared ${PREFIX_TOKENS}-token prefixes, ${fmt(totalTokens)} prompt tokens\n`);
benchHashes(reqs.slice(0, 200), 16); // warm-up
for (const b of [16, 64]) {
  const { blocks, ms } = benchHashes(reqs, b);
  process.stdout.write(`block hashes (B ${b}): ${fmt(blocks)} in ${ms.toFixed(0)} ms = ${fmt((blocks / ms) * 1000)} hashes/s\n`);
}
const fa = { name: "kv", kind: "full_attention", num_layers: 1, block_size_tokens: 16, prefix_cacheable: true, transfer_bytes_per_block: 1 };
const swa = {
  name: "swa",
  kind: "sliding_window",
  num_layers: 1,
  block_size_tokens: 16,
  window_tokens: 128,
  prefix_cacheable: true,
  transfer_bytes_per_block: 1,
};
const mamba = { name: "mamba", kind: "state", num_layers: 1, block_size_tokens: 16, prefix_cacheable: true, transfer_bytes_per_block: 1 };
benchPool(reqs, [fa], 8192, "pool, full attention B 16, 8,191 pages");
benchPool(reqs, [fa, swa], 12288, "pool, full + SW 128, B 16, 12,287 pages");
// Align mode caches a state only where a chunk ends on a block boundary: the last boundary of each
// prompt, never the end of the shared prefix, so this workload gets no Mamba-type hit (the shape of
// vLLM issue 45238). It measures the allocation path of a three-kind hybrid.
benchPool(reqs, [fa, swa, mamba], 12288, "pool, full + SW 128 + Mamba (align), B 16, 12,287 pages");
