import fc from "fast-check";

// Property tests run with a fixed seed so CI is reproducible. Override locally with
// FC_SEED=<n> to explore other seeds.
fc.configureGlobal({ seed: Number(process.env.FC_SEED ?? 20261129), numRuns: 100 });
