#!/usr/bin/env node
// The `wsp` command: runs the TypeScript CLI through tsx (a dependency of this package).
import { createInterface } from "node:readline/promises";
import { register } from "tsx/esm/api";

register();
const { main } = await import("./main.ts");
// Ctrl-C stops a followed log stream cleanly; a second one exits at once.
const stop = new AbortController();
process.once("SIGINT", () => {
  stop.abort();
  process.once("SIGINT", () => process.exit(130));
});
// One reader for every question: piped answers arrive together and each question takes the next line.
let reader;
let lines;
process.exitCode = await main(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  env: process.env,
  tty: Boolean(process.stderr.isTTY),
  signal: stop.signal,
  cwd: process.cwd(),
  // Questions go to stderr (stdout may be a pipe to a script); the answer is one line of stdin, piped or typed.
  prompt: async (question) => {
    process.stderr.write(question);
    reader ??= createInterface({ input: process.stdin, terminal: false });
    lines ??= reader[Symbol.asyncIterator]();
    const { value } = await lines.next();
    return value ?? "";
  },
});
reader?.close();
