#!/usr/bin/env node
// The `wsp` command: runs the TypeScript CLI through tsx (a dependency of this package).
import { register } from "tsx/esm/api";

register();
const { main } = await import("./main.ts");
process.exitCode = await main(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  env: process.env,
  tty: Boolean(process.stderr.isTTY),
});
