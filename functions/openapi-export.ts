/**
 * Writes the OpenAPI document the app serves at /api/openapi.json to a file (or
 * stdout), for linting and client generation: `npm run openapi -- out.json`; `npm run lint:openapi` lints it.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { silentLogger } from "../shared/http/logger";
import { createApp } from "./app";

// The document is generated from the route definitions alone: no database is opened.
const app = createApp({ services: () => ({}) as never, logger: silentLogger });
const res = await app.request("http://127.0.0.1:8787/api/openapi.json");
const text = `${JSON.stringify(await res.json(), null, 2)}\n`;
const out = process.argv[2];
if (out) {
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, text);
} else process.stdout.write(text);
