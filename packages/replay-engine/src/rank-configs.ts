import {
  checkPdGate,
  checkPdTopology,
  parsePath,
  resolveEngine,
  type EngineOverrides,
  type EngineSettings,
  type KvCapacity,
  type Profile,
  type Spec,
} from "@kvsim/profile-schema";
import { checkRankConfig, type RankConfig, type RankConfigProblem, type RankRole } from "@kvsim/vllm-scheduler";
import { offloadProblems } from "./offload-tiers.js";

/**
 * The one place a spec and its profiles become each role's rank configuration, and the one list of
 * the rules that can refuse that combination: the P/D gate of each role's profile, the two roles'
 * layouts against each other, the engine settings resolved against the profile (a pool sized from
 * GPU memory must leave room for the KV cache), and everything a rank refuses (timing tables or
 * the model shape the timing needs, block sizes, bandwidth). The replay builds its ranks from it;
 * `kvsim validate` and `kvsim replay` report its problems at their files and lines before a replay
 * starts, so what one accepts the other runs.
 */

/** Where a problem lies: a field of the spec, or a field of the profile a role uses. */
export type SpecProblemPlace =
  { readonly in: "spec"; readonly path: readonly string[] } | { readonly in: "profile"; readonly role: RankRole; readonly path: string };

export interface SpecProblem {
  readonly at: SpecProblemPlace;
  readonly message: string;
}

/** The profile each role of the spec's topology uses; a role whose profile could not be loaded is left out. */
export interface RoleProfiles {
  readonly aggregated?: Profile | undefined;
  readonly prefill?: Profile | undefined;
  readonly decode?: Profile | undefined;
}

export interface RoleRankConfig {
  readonly role: RankRole;
  readonly config: RankConfig;
  /** The KV capacity resolved from GPU memory, when the engine gives memory instead of `num_gpu_blocks`. */
  readonly capacity: KvCapacity | undefined;
}

export interface SpecRankConfigs {
  /** One configuration per role whose profile and engine resolved (aggregated, or prefill then decode). */
  readonly configs: readonly RoleRankConfig[];
  /** Every problem found; empty when a replay may start. */
  readonly problems: readonly SpecProblem[];
}

export interface SpecRankConfigsOptions {
  /** What a rank refuses; a caller checking many variations of one spec may memoise it. */
  readonly checkRank?: (config: RankConfig) => readonly RankConfigProblem[];
}

/** Rank problems that say the spec's timing needs what the profile lacks entirely (reported at `timing.type`). */
const TIMING_NEEDS: ReadonlySet<string> = new Set(["profile.forward_pass", "profile.model_shape"]);

/** The roles of the spec's topology, in the order their ranks are built. */
function specRoles(spec: Spec): readonly RankRole[] {
  return spec.topology.kind === "aggregated" ? ["aggregated"] : ["prefill", "decode"];
}

/** Where the engine field `field` of a role is set: the role's own engine override, else the spec's engine. */
function enginePath(spec: Spec, role: RankRole, field: string): string[] {
  const override = role === "aggregated" ? undefined : spec[role]?.engine;
  return override !== undefined && Object.hasOwn(override, field) ? [role, "engine", field] : ["engine", field];
}

/** The spec field that chose the profiles of a P/D pair: the decode or prefill override, else the base profile. */
function pairPath(spec: Spec): string[] {
  return spec.decode?.profile !== undefined ? ["decode", "profile"] : spec.prefill?.profile !== undefined ? ["prefill", "profile"] : ["profile"];
}

/**
 * Each role's rank configuration and every problem with the spec and profiles together. The P/D
 * gate and the layout check run first; the engines and ranks are checked only when they pass
 * (their problems would repeat the gate's).
 */
export function specRankConfigs(spec: Spec, profiles: RoleProfiles, options: SpecRankConfigsOptions = {}): SpecRankConfigs {
  const problems: SpecProblem[] = [];
  const roles = specRoles(spec);
  for (const role of roles) {
    const profile = profiles[role];
    if (role !== "aggregated" && profile !== undefined) {
      for (const p of checkPdGate(profile, role)) problems.push({ at: { in: "profile", role, path: p.path }, message: p.message });
    }
  }
  if (spec.topology.kind === "disaggregated" && profiles.prefill !== undefined && profiles.decode !== undefined) {
    for (const p of checkPdTopology(profiles.prefill, profiles.decode)) {
      // A problem without a field is about two layouts, not one: it points at the spec's choice of profiles.
      problems.push(
        p.path === ""
          ? { at: { in: "spec", path: pairPath(spec) }, message: p.message }
          : { at: { in: "profile", role: "decode", path: p.path }, message: p.message },
      );
    }
  }
  const configs: RoleRankConfig[] = [];
  if (problems.length > 0) return { configs, problems };
  const checkRank = options.checkRank ?? checkRankConfig;
  for (const role of roles) {
    const profile = profiles[role];
    if (profile === undefined) continue;
    const overrides: EngineOverrides | undefined = role === "aggregated" ? undefined : spec[role]?.engine;
    const resolved = resolveEngine(profile, { ...spec.engine, ...overrides });
    if (!resolved.ok) {
      for (const i of resolved.issues) problems.push({ at: { in: "spec", path: enginePath(spec, role, i.path) }, message: `${role} rank: ${i.message}` });
      continue;
    }
    const config = rankConfig(spec, role, profile, resolved.settings);
    const offload = offloadProblems(spec, role, profile, resolved.settings);
    for (const o of offload)
      problems.push({ at: o.inProfile ? { in: "profile", role, path: o.path.join(".") } : { in: "spec", path: o.path }, message: o.message });
    const refused = checkRank(config);
    for (const p of refused) {
      if (TIMING_NEEDS.has(p.path)) {
        // The timing the spec chose needs a table or shape the profile lacks: one problem at the choice, not one per role.
        if (!problems.some((q) => q.message === p.message)) problems.push({ at: { in: "spec", path: ["timing", "type"] }, message: p.message });
        continue;
      }
      const message = p.message.startsWith(role) ? p.message : `${role} rank: ${p.message}`;
      if (p.path.startsWith("engine.")) problems.push({ at: { in: "spec", path: enginePath(spec, role, p.path.slice("engine.".length)) }, message });
      else if (p.path.startsWith("kv_transfer.")) problems.push({ at: { in: "spec", path: parsePath(p.path).map(String) }, message });
      else if (p.path.startsWith("profile.")) problems.push({ at: { in: "profile", role, path: p.path.slice("profile.".length) }, message });
      // Anything else is a P/D gate path, reported above.
    }
    if (refused.length === 0 && offload.length === 0) configs.push({ role, config, capacity: resolved.capacity });
  }
  return { configs, problems };
}

/** A role's rank configuration from the spec and the role's resolved engine settings. */
function rankConfig(spec: Spec, role: RankRole, profile: Profile, engine: EngineSettings): RankConfig {
  if (role !== "prefill") return { role, profile, engine, timing: spec.timing };
  const { mode, bandwidth_gbps } = spec.kv_transfer;
  return { role, profile, engine, timing: spec.timing, kvTransfer: { mode, ...(bandwidth_gbps === undefined ? {} : { bandwidthGbps: bandwidth_gbps }) } };
}

/** A problem's place as one field path relative to the spec: `decode.profile: <field>` for a field of the decode role's profile. */
export function specProblemPath(spec: Spec, at: SpecProblemPlace): string {
  if (at.in === "spec") return at.path.join(".");
  const owner = at.role !== "aggregated" && spec[at.role]?.profile !== undefined ? `${at.role}.profile` : "profile";
  return at.path === "" ? owner : `${owner}: ${at.path}`;
}
