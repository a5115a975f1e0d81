// Writes example-mooncake.jsonl: a small synthetic Mooncake-format trace for `kvsim replay`'s
// bundled example. Deterministic (a fixed-seed xorshift), so re-running it reproduces the file.
//
// 48 requests, Poisson arrivals at about 8 per second. Each request starts with one of four
// shared "system prompts" of 16 hash ids (8,192 tokens at 512 tokens per id), then 2 to 12 ids of
// its own; output lengths 32 to 256 tokens.
/* global URL */
import { writeFileSync } from "node:fs";

let state = 0x2545f491;
const rand = () => {
  state ^= state << 13;
  state ^= state >>> 17;
  state ^= state << 5;
  return (state >>> 0) / 2 ** 32;
};
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

const BLOCK = 512;
const systemPrompts = [0, 1, 2, 3].map((g) => Array.from({ length: 16 }, (_, i) => g * 16 + i));
let nextId = 64;
let t = 0;
const lines = [];
for (let i = 0; i < 48; i++) {
  if (i > 0) t += Math.round((-Math.log(1 - rand()) / 8) * 1000);
  const own = Array.from({ length: int(2, 12) }, () => nextId++);
  const hashIds = [...systemPrompts[int(0, 3)], ...own];
  const inputLength = hashIds.length * BLOCK - int(0, BLOCK - 1);
  lines.push(JSON.stringify({ timestamp: t, input_length: inputLength, output_length: int(32, 256), hash_ids: hashIds }));
}
writeFileSync(new URL("./example-mooncake.jsonl", import.meta.url), lines.join("\n") + "\n");
