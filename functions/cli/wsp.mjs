#!/usr/bin/env node
// The `wsp` command: runs the TypeScript CLI through tsx (a dependency of this package).
import { register } from "tsx/esm/api";

register();
const { main } = await import("./main.ts");
// Ctrl-C stops a followed log stream cleanly; a second one exits at once.
const stop = new AbortController();
process.once("SIGINT", () => {
  stop.abort();
  process.once("SIGINT", () => process.exit(130));
});
process.exitCode = await main(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  env: process.env,
  tty: Boolean(process.stderr.isTTY),
  signal: stop.signal,
});
