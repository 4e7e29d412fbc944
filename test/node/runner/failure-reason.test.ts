/**
 * The failure reason's composer (functions/self-hosted/runner/failure-reason.ts)
 * and the escape stripper it uses (shared/text/ansi.ts): a Vite-like build error
 * keeps its `file:line:col` line ahead of the stack trace, without escape bytes,
 * within 1 KB; huge and hostile outputs take linear time and bounded memory.
 */
import { performance } from "node:perf_hooks";
import { describe, expect, it } from "vitest";
import { createFailureDigest, looksLikeError, MAX_REASON_BYTES } from "../../../functions/self-hosted/runner/failure-reason";
import { stripAnsi, stripAnsiDeep } from "../../../shared/text/ansi";

const ESC = "\u001b";
const red = (s: string) => `${ESC}[31m${s}${ESC}[39m`;
const bold = (s: string) => `${ESC}[1m${s}${ESC}[22m`;
const bytes = (s: string) => Buffer.byteLength(s, "utf8");

/** What rolldown-vite prints for a syntax error in src/main.js, coloured, then its stack. */
function viteLikeFailure(stackLines = 30): string[] {
  return [
    `${ESC}[36mvite v7.1.0 ${ESC}[32mbuilding for production...${ESC}[39m`,
    "transforming...",
    `${ESC}[32m✓${ESC}[39m 3 modules transformed.`,
    `${red("✗")} Build failed in 41ms`,
    red("error during build:"),
    red(`${bold("[PARSE_ERROR]")} Unexpected token`),
    `   ${ESC}[38;5;246m╭─[${ESC}[0m src/main.js:61:17 ${ESC}[38;5;246m]${ESC}[0m`,
    `${ESC}[38;5;246m61 │${ESC}[0m   const total = items.reduce((a, b) => a + b, 0;`,
    `${ESC}[38;5;246m   │${ESC}[0m                 ${ESC}[38;5;12m┬${ESC}[0m`,
    ...Array.from({ length: stackLines }, (_, i) => `    at frame${i} (file:///app/node_modules/rolldown/dist/shared/src-${i}.mjs:${100 + i}:${i + 3})`),
  ];
}

const reasonOf = (headline: string, lines: Iterable<string>) => {
  const digest = createFailureDigest();
  for (const line of lines) digest.add(line);
  return digest.reason(headline);
};

describe("failure reason", () => {
  it("a Vite-like build error: the step, the exit code, the file:line:col line, no escape byte, at most 1 KB", () => {
    const reason = reasonOf("build failed (exit code 1): npm run build", viteLikeFailure());
    expect(reason).toMatch(/^build failed \(exit code 1\): npm run build; first error lines:\n/);
    expect(reason).toContain("[PARSE_ERROR] Unexpected token");
    expect(reason).toContain("src/main.js:61:17");
    expect(reason).toContain("61 │   const total = items.reduce((a, b) => a + b, 0;");
    // The last lines follow, after the error lines.
    expect(reason).toMatch(/\nlast lines:\n(.|\n)*frame29 /);
    expect(reason.indexOf("src/main.js:61:17")).toBeLessThan(reason.indexOf("last lines:"));
    expect(reason).not.toContain(ESC);
    expect(bytes(reason)).toBeLessThanOrEqual(MAX_REASON_BYTES);
  });

  it("without error-shaped lines: the last lines, as before", () => {
    const reason = reasonOf("build failed (exit code 3): npm run build", ["one", "two", "three"]);
    expect(reason).toBe("build failed (exit code 3): npm run build; last lines:\none\ntwo\nthree");
    expect(reasonOf("start failed: the app exited", [])).toBe("start failed: the app exited");
  });

  it("recognizes the usual error shapes of Node toolchains, not a stack frame or plain words", () => {
    for (const line of [
      "error TS2304: Cannot find name 'x'.",
      "TypeError: Cannot read properties of undefined",
      "npm ERR! code ELIFECYCLE",
      "[UNRESOLVED_IMPORT] Could not resolve './x'",
      "src/components/App.tsx:12:5 - something",
      "  ╭─[ src/main.js:61:17 ]",
      "Build failed with 1 error:",
      "ERROR in ./src/index.js",
    ])
      expect(looksLikeError(line), line).toBe(true);
    for (const line of [
      "    at Object.<anonymous> (/app/src/x.js:3:9)",
      "found 0 errors",
      "listening on http://localhost:3000",
      "[INFO] building",
      "12:30:45 compiled",
      "terror.js",
    ])
      expect(looksLikeError(line), line).toBe(false);
  });

  it("keeps at most 1 KB whatever the lines: long lines, multi-byte characters, a long command", () => {
    const long = "é".repeat(5000);
    const reason = reasonOf(`build failed (exit code 2): ${"x".repeat(2000)}`, [
      `error: ${long}`,
      ...Array.from({ length: 40 }, (_, i) => `error ${i}: ${"€".repeat(300)}`),
      `tail ${"😀".repeat(400)}`,
    ]);
    expect(bytes(reason)).toBeLessThanOrEqual(MAX_REASON_BYTES);
    expect(reason).toMatch(/^build failed \(exit code 2\): x+…; first error lines:\nerror: é+…/);
    expect(reason).toContain("last lines:\n");
    // No character cut in half: the text survives a UTF-8 round trip unchanged.
    expect(Buffer.from(reason, "utf8").toString("utf8")).toBe(reason);
    expect(reason).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
  });

  it("200,000 lines: quick, and only a bounded number of them held", () => {
    const digest = createFailureDigest();
    const before = process.memoryUsage().heapUsed;
    const started = performance.now();
    for (let i = 0; i < 200_000; i++) {
      digest.add(
        i === 150_000 ? red("src/late.js:1:2 error here") : `${ESC}[2mline ${i} of a long and chatty build output with some padding ${"x".repeat(60)}${ESC}[0m`,
      );
    }
    const reason = digest.reason("build failed (exit code 1): npm run build");
    const took = performance.now() - started;
    const grown = process.memoryUsage().heapUsed - before;
    console.log(`200,000 lines: ${took.toFixed(0)} ms, heap +${(grown / 1e6).toFixed(1)} MB`);
    expect(took).toBeLessThan(2_000);
    // The input alone would be ~30 MB if it were kept.
    expect(grown).toBeLessThan(20e6);
    expect(reason).toContain("src/late.js:1:2 error here");
    expect(reason).toContain("line 199999 ");
    expect(bytes(reason)).toBeLessThanOrEqual(MAX_REASON_BYTES);
  });

  it("hostile lines in linear time: 1 MB of `[`, of ESC, of an unterminated escape, of path characters", () => {
    const mb = 1024 * 1024;
    const hostile = [
      "[".repeat(mb),
      "[A".repeat(mb / 2),
      `[${"A_".repeat(mb / 2)}`,
      ESC.repeat(mb),
      `${ESC}[`.repeat(mb / 2),
      `${ESC}]`.repeat(mb / 2),
      `${ESC}]8;;${"x".repeat(mb)}`,
      "a.b".repeat(mb / 3),
      "a.b:1".repeat(mb / 5),
      "a.js:".repeat(mb / 5),
      "error".repeat(mb / 5),
      "\r".repeat(mb),
    ];
    for (const line of hostile) {
      const started = performance.now();
      const reason = reasonOf("build failed (exit code 1): x", [line, line]);
      const stripped = stripAnsi(line);
      const took = performance.now() - started;
      expect(took, JSON.stringify(line.slice(0, 12))).toBeLessThan(500);
      expect(reason).not.toContain(ESC);
      expect(stripped).not.toContain(ESC);
      expect(bytes(reason)).toBeLessThanOrEqual(MAX_REASON_BYTES);
    }
  });
});

describe("stripAnsi", () => {
  it("removes CSI, OSC (BEL and ST), two-character escapes, C1 controls and lone ESC; keeps the rest", () => {
    expect(stripAnsi(`${ESC}[1;31mred${ESC}[0m plain`)).toBe("red plain");
    expect(stripAnsi(`${ESC}]8;;https://x.test\u0007link${ESC}]8;;\u0007`)).toBe("link");
    expect(stripAnsi(`${ESC}]0;title${ESC}\\after`)).toBe("after");
    expect(stripAnsi(`${ESC}(Bcharset ${ESC}7saved${ESC}8`)).toBe("charset saved");
    expect(stripAnsi(`\u009b32mC1 csi\u009b0m`)).toBe("C1 csi");
    expect(stripAnsi(`lone ${ESC}`)).toBe("lone ");
    expect(stripAnsi(`a${ESC}\nb`)).toBe("a\nb");
    expect(stripAnsi(`cut ${ESC}[31`)).toBe("cut ");
    expect(stripAnsi("line 1\nline 2\ttab é 😀")).toBe("line 1\nline 2\ttab é 😀");
  });

  it("strips every string of a JSON value, keys included", () => {
    expect(stripAnsiDeep({ a: red("x"), [red("k")]: [1, red("y"), null, { b: true }] })).toEqual({ a: "x", k: [1, "y", null, { b: true }] });
  });
});
