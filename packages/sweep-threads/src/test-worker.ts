// The worker threads' entry in the tests: points read the in-memory trace.
import { pointWorker } from "./worker.js";
import { memoryHost } from "./test-host.js";

export default pointWorker(memoryHost);
