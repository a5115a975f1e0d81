import { describe, expect, it } from "vitest";
import type { PointTask } from "@kvsim/sweep";
import { checkQueueUrl, jobIdFor, QueueError, SWEEP_ID } from "./index.js";

const task = (point: number, spec: unknown = { version: 1 }): PointTask => ({
  point,
  settings: { "engine.max_num_seqs": 64 },
  spec,
  trace: { path: "/t.jsonl", sha256: "ab" },
});

describe("job ids", () => {
  it("name the sweep and the point, and change when the point's inputs change", () => {
    const id = jobIdFor("s1", task(3));
    expect(id).toMatch(/^s1\.3\.[0-9a-f]{16}$/);
    // The same inputs give the same id (a restart finds the job); other inputs another id.
    expect(jobIdFor("s1", task(3))).toBe(id);
    expect(jobIdFor("s1", task(3, { version: 2 }))).not.toBe(id);
    expect(jobIdFor("s2", task(3)).slice(3)).toBe(id.slice(3));
  });

  it("sweep ids are 1 to 64 letters, digits, _ or -", () => {
    expect(["a", "sweep_1-x", "x".repeat(64)].every((s) => SWEEP_ID.test(s))).toBe(true);
    expect(["", "a.b", "a:b", "x".repeat(65), "a b"].some((s) => SWEEP_ID.test(s))).toBe(false);
  });
});

describe("queue URLs", () => {
  it("are redis:// or rediss:// with a host and an optional database number", () => {
    expect(() => {
      checkQueueUrl("redis://127.0.0.1:6379/0");
    }).not.toThrow();
    expect(() => {
      checkQueueUrl("rediss://cache.internal");
    }).not.toThrow();
    expect(() => {
      checkQueueUrl("http://x:6379");
    }).toThrow(new QueueError('--queue must be a redis:// or rediss:// URL, got "http://x:6379"'));
    expect(() => {
      checkQueueUrl("redis://x/db");
    }).toThrow(new QueueError('--queue\'s path must be a database number, such as /0, got "/db"'));
    expect(() => {
      checkQueueUrl("127.0.0.1:6379");
    }).toThrow(QueueError);
  });
});
