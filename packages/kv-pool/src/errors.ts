/**
 * Errors thrown by checks on hot paths. Once a function is inlined into a hot loop, V8's optimizing
 * compiler may convert the numbers of a template literal in its `throw` eagerly, on the path that
 * does not throw (perf showed NumberToString, and a new string, per block freed). Such checks pass
 * their values here instead: `{0}`..`{3}` in the message are replaced only when it is thrown.
 */
function format(message: string, a: unknown, b: unknown, c: unknown, d: unknown): string {
  const values = [a, b, c, d];
  return message.replace(/\{([0-3])\}/g, (_m, k: string) => String(values[Number(k)]));
}

/** An Error whose message is built from `message` and the values, only when called. */
export function failure(message: string, a?: unknown, b?: unknown, c?: unknown, d?: unknown): Error {
  return new Error(format(message, a, b, c, d));
}

/** A RangeError built the same way. */
export function rangeFailure(message: string, a?: unknown, b?: unknown, c?: unknown, d?: unknown): RangeError {
  return new RangeError(format(message, a, b, c, d));
}
