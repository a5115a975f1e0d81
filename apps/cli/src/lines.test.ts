import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { splitLines, type Line } from "./lines.js";

async function lines(chunks: readonly (string | Uint8Array)[], max = 1024): Promise<Line[]> {
  const out: Line[] = [];
  for await (const l of splitLines(Readable.from(chunks), max)) out.push(l);
  return out;
}

describe("splitLines", () => {
  it("splits at \\n only: a CR inside a line stays in it (JSON blank space), CRLF keeps its CR", async () => {
    expect(await lines(['{"a":\r1}\n{"b":2}\r\n'])).toEqual([{ text: '{"a":\r1}' }, { text: '{"b":2}\r' }]);
  });
  it("joins a line across chunks, a multi-byte character split between them included", async () => {
    const euro = Buffer.from("€"); // 3 bytes: e2 82 ac
    expect(await lines([Buffer.from("ab"), euro.subarray(0, 1), Buffer.concat([euro.subarray(1), Buffer.from("c\nd")])])).toEqual([
      { text: "ab€c" },
      { text: "d" },
    ]);
  });
  it("yields blank lines and a last line without \\n", async () => {
    expect(await lines(["\n\nx"])).toEqual([{ text: "" }, { text: "" }, { text: "x" }]);
  });
  it("drops a line longer than the limit as it arrives and reports its size, then goes on", async () => {
    // 4 bytes fit a limit of 4; 5 bytes in two chunks (3 + 2) do not.
    expect(await lines(["abcd\nefg", "hi\nj\n"], 4)).toEqual([{ text: "abcd" }, { tooLong: true, bytes: 5 }, { text: "j" }]);
    expect(await lines(["abcdefgh"], 4)).toEqual([{ tooLong: true, bytes: 8 }]);
  });
});
