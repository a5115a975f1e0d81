import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Profile, Spec } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";
import { describeTiming, specForDisplay } from "./run.js";

const ROOFLINE = fileURLToPath(new URL("../../examples/replay-roofline.yaml", import.meta.url));

/** A spec with only what describeTiming reads. */
const spec = (timing: object, profile: object = {}) => ({ timing, profile, engine: { gpu: "H100-SXM" } }) as unknown as Spec;
const none = new Map<string, Profile>();

describe("the timing model in the HTML report's header", () => {
  it("names each timing type and how far to trust it", () => {
    expect(describeTiming(spec({ type: "fixed", prefill_ms: 20, decode_ms: 5 }), none)).toBe(
      "fixed pass times (prefill 20 ms, decode 5 ms): illustrative, not a model of any GPU",
    );
    expect(describeTiming(spec({ type: "polynomial" }), none)).toBe("the upstream simulator's polynomial, not calibrated on this deployment");
    expect(
      describeTiming(
        spec({ type: "linear", step_ms: 6, per_sequence_ms: 0, per_kv_token_us: 0.02, per_prompt_token_us: 30, per_cached_token_us: 0, prompt_step_ms: 0 }),
        none,
      ),
    ).toBe("the linear step formula (step 6 ms, 0.02 us per KV token, 30 us per prompt token; kvsim calibrate fits it to a measured run)");
    // The provenance's first clause, up to its colon.
    const tables = spec({ type: "profile", outside_grid: "clamp" }, { forward_pass: { provenance: "Illustrative, not measured: generated from a formula" } });
    expect(describeTiming(tables, none)).toBe(
      "the profile's forward-pass tables (interpolated; outside the grid: clamp); their provenance: Illustrative, not measured ...",
    );
  });

  it("kvsim replay --html puts the roofline's caveat in the page's header", async () => {
    const html = join(mkdtempSync(join(tmpdir(), "kvsim-timing-")), "r.html");
    const io = captureIo();
    expect(await runCli(["replay", "--spec", ROOFLINE, "--set", "workload.synthetic.requests=20", "--html", html, "--quiet"], io)).toBe(0);
    const page = readFileSync(html, "utf8");
    const header = page.slice(page.indexOf("<header>"), page.indexOf("</header>"));
    expect(header).toContain(
      '<span class="label">timing:</span> roofline on H100-SXM&#39;s datasheet with the shipped efficiencies, not calibrated on this deployment',
    );
  });
});

describe("the resolved spec in the HTML report", () => {
  it("shows bandwidths with their units, not bandwidth_gbps or bytes per second", () => {
    // 400 Gbit/s = 50 GB/s = 5e10 B/s, kept internally as bandwidth_gbps 50.
    const pipe = { version: 1, kv_transfer: { bandwidth_gbps: 50, mode: "destination_missing", fallback_latency_ms: 0 } } as unknown as Spec;
    expect(specForDisplay(pipe)).toEqual({
      version: 1,
      kv_transfer: { bandwidth: "50 GB/s (400 Gbit/s)", mode: "destination_missing", fallback_latency_ms: 0 },
    });
    // NICs of 25 GB/s (2.5e10 B/s) and NVLink of 450 GB/s.
    const net = {
      kv_transfer: {
        mode: "full_prompt",
        fallback_latency_ms: 0,
        network: { nic: { send: 2.5e10, receive: 2.5e10 }, nodes: { gpus_per_node: 8, intra_node_bandwidth: 4.5e11, fill: "prefill_first" } },
      },
    } as unknown as Spec;
    expect(specForDisplay(net)).toEqual({
      kv_transfer: {
        mode: "full_prompt",
        fallback_latency_ms: 0,
        network: {
          nic: { send: "25 GB/s (200 Gbit/s)", receive: "25 GB/s (200 Gbit/s)" },
          nodes: { gpus_per_node: 8, intra_node_bandwidth: "450 GB/s (3600 Gbit/s)", fill: "prefill_first" },
        },
      },
    });
  });
});
