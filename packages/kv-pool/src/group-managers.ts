import type { CacheGroup } from "@kvsim/profile-schema";
import { isMambaTypeGroup, prefillCheckpointBlocks } from "@kvsim/profile-schema";
import type { PoolOps } from "./block-pool.js";
import { rangeFailure } from "./errors.js";
import { FullAttentionManager } from "./full-attention-manager.js";
import { MambaManager } from "./mamba-manager.js";
import { SingleBlockStateManager } from "./single-block-state-manager.js";
import type { SingleTypeManager } from "./single-type-manager.js";
import { WindowManager } from "./window-manager.js";

/** Groups of identical spec, searched together (vLLM merges them into one type). */
export interface HitType {
  readonly manager: SingleTypeManager;
  readonly groups: number[];
  readonly fullAttention: boolean;
}

export function checkCount(name: string, v: number, min: number): void {
  if (!Number.isSafeInteger(v) || v < min) throw rangeFailure("{0} must be an integer >= {1}, got {2}", name, min, v);
}

/** The manager of cache group `i` (`caching`: prefix caching is on). */
export function managerFor(pool: PoolOps, g: CacheGroup, i: number, caching: boolean, vllmVersion: string): SingleTypeManager {
  checkCount(`groups[${i}].block_size_tokens`, g.block_size_tokens, 1);
  switch (g.kind) {
    case "full_attention":
      return new FullAttentionManager(pool, i, g, caching && g.prefix_cacheable !== false);
    case "sliding_window":
    case "convolution":
      return new WindowManager(pool, i, g, caching && g.prefix_cacheable !== false);
    case "state":
      // Without prefix caching a Mamba-type state is vLLM's "none" mode: one block, never cached.
      if (isMambaTypeGroup(g) && caching) {
        return new MambaManager(pool, i, g, prefillCheckpointBlocks(g, vllmVersion, caching));
      }
      return new SingleBlockStateManager(pool, i, g);
  }
}

/** The hit types of a pool's managers: full attention first (its hit set is downward-closed), otherwise group order. */
export function hitTypes(managers: readonly SingleTypeManager[]): HitType[] {
  const types: HitType[] = [];
  const byKey = new Map<string, HitType>();
  for (const m of managers) {
    if (m.hitTypeKey === undefined) continue;
    const t = byKey.get(m.hitTypeKey);
    // Surviving mutants: KP-90 (MUTANTS.md).
    if (t !== undefined) t.groups.push(m.groupIndex);
    else {
      // Stryker disable next-line ConditionalExpression: KP-91
      const nt = { manager: m, groups: [m.groupIndex], fullAttention: m.kind === "full_attention" };
      byKey.set(m.hitTypeKey, nt);
      types.push(nt);
    }
  }
  // Stryker disable next-line MethodExpression: KP-92
  return [...types.filter((t) => t.fullAttention), ...types.filter((t) => !t.fullAttention)];
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** The least common multiple of the hit types' block sizes: a hybrid hit ends on it. */
export function hitAlignment(types: readonly HitType[]): number {
  return types.reduce((a, t) => (a / gcd(a, t.manager.blockSize)) * t.manager.blockSize, 1);
}
