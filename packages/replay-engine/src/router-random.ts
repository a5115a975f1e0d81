import { uniformFloat64 } from "pure-rand/distribution/uniformFloat64";
import type { RandomGenerator } from "pure-rand/types/RandomGenerator";
import { seededGenerator } from "./workload.js";

/** A router's seeded random draws: the same seed gives the same sequence, so placements replay exactly. */
export class RouterRandom {
  private readonly rng: RandomGenerator;
  constructor(seed: number) {
    this.rng = seededGenerator(seed);
  }
  /** Uniform in [0, 1). */
  next(): number {
    return uniformFloat64(this.rng);
  }
  /** Uniform integer in [0, n). */
  below(n: number): number {
    return Math.min(n - 1, Math.floor(this.next() * n));
  }
}
