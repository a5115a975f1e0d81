// Benchmark of one rank's hot path: steps per second and scheduled tokens per second with 256
// running requests. Runs against the built package (../dist); `pnpm bench` builds first.
// Prints figures only; it never fails on wall time.
import { performance } from "node:perf_hooks";
import { stdout } from "node:process";
import { createPromptTokens } from "@kvsim/kv-pool";
import { engineSettings } from "@kvsim/profile-schema";
import { Rank } from "../dist/index.js";

const RUNNING = 256;

const linear = { schema_version: 1, model: "bench/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 131072 };

const kda = (name, layers) => ({
  name,
  kind: "state",
  num_layers: layers,
  block_size_tokens: 2176,
  prefix_cacheable: true,
  transfer_bytes_per_block: layers * 1_085_440,
  prefill_checkpoint_blocks: 1,
});
const glm = {
  schema_version: 1,
  model: "zai-org/GLM-5.3-Flash",
  vllm_version: "0.32.0",
  tensor_parallel_size: 4,
  page_size_bytes: 13_045_120,
  kv_cache_groups: [
    { name: "full_attention", kind: "full_attention", num_layers: 11, block_size_tokens: 2176, prefix_cacheable: true, transfer_bytes_per_block: 13_045_120 },
    { name: "tail_ring", kind: "state", num_layers: 11, block_size_tokens: 2176, prefix_cacheable: false, transfer_bytes_per_block: 22_528 },
    kda("kda_0", 9),
    kda("kda_1", 9),
    kda("kda_2", 8),
    kda("kda_3", 8),
  ],
};

function prompt(i, n) {
  const t = new Uint32Array(n);
  for (let k = 0; k < n; k++) t[k] = (i * 1_000_003 + k) >>> 0;
  return createPromptTokens(t);
}

/**
 * Fills a rank with RUNNING requests, steps until all are running, then times `steps` passes. With
 * `outputTokens`, every finished request is replaced by a new one, so passes mix prefill chunks,
 * admissions and decodes.
 */
function scenario(name, { profile, engine, timing, promptTokens, outputTokens = 1_000_000, steps }) {
  const rank = new Rank({ role: "aggregated", profile, engine: engineSettings(engine), timing });
  let next = 0;
  const submit = () => {
    const i = next++;
    const out = rank.submit({ type: "submit", request: { id: `r${i}`, prompt: prompt(i, promptTokens), maxOutputTokens: outputTokens } });
    if (!out.ok) throw new Error(out.reason);
  };
  for (let i = 0; i < RUNNING; i++) submit();
  let now = 0;
  let warmup = 0;
  for (;;) {
    const r = rank.step(now);
    if (r === undefined) throw new Error("rank went idle during warm-up");
    now = r.endMs;
    warmup++;
    r.effects.finished.forEach(submit);
    if (rank.load().running === RUNNING && (outputTokens !== 1_000_000 || r.scheduledTokens === RUNNING)) break;
  }
  let tokens = 0;
  const t0 = performance.now();
  for (let s = 0; s < steps; s++) {
    const r = rank.step(now);
    tokens += r.scheduledTokens;
    now = r.endMs;
    r.effects.finished.forEach(submit);
  }
  const ms = performance.now() - t0;
  const m = rank.metrics();
  stdout.write(
    `${name}: ${RUNNING} running, ${steps} steps in ${ms.toFixed(1)} ms -> ${Math.round((steps / ms) * 1000).toLocaleString("en-US")} steps/s, ` +
      `${Math.round((tokens / ms) * 1000).toLocaleString("en-US")} scheduled tokens/s (warm-up ${warmup} passes; ${m.pagesUsed} pages used)\n`,
  );
}

// Pure decode: every pass schedules one token per request (the dominant steady state).
scenario("linear decode", {
  profile: linear,
  engine: { num_gpu_blocks: 80_000, block_size: 16, max_num_seqs: RUNNING, max_num_batched_tokens: 8192 },
  timing: { type: "polynomial" },
  promptTokens: 512,
  steps: 4000,
});
scenario("GLM-5.3-Flash decode (6 cache groups)", {
  profile: glm,
  engine: { num_gpu_blocks: 4096, max_num_seqs: RUNNING, max_num_batched_tokens: 8192 },
  timing: { type: "polynomial" },
  promptTokens: 2048,
  steps: 4000,
});
scenario("linear churn (512-token prompts, 64 outputs, finished requests replaced)", {
  profile: linear,
  engine: { num_gpu_blocks: 80_000, block_size: 16, max_num_seqs: RUNNING, max_num_batched_tokens: 8192 },
  timing: { type: "polynomial" },
  promptTokens: 512,
  outputTokens: 64,
  steps: 2000,
});
