/**
 * The web console's static files (console/ at the repository root) served by the
 * Node adapter at `/`; the Worker serves the same folder as static assets
 * (wrangler.toml `[assets]`). There is no build step: what is in console/ is what
 * the browser gets.
 *
 * The folder is read once, on the first request: every regular file directly in
 * it (no sub-folders, nothing starting with `.` or `_`) becomes one exact URL path,
 * so a request can only ever name one of those files (no path is joined onto the
 * disk, hence no traversal). Headers for every file come from console/_headers,
 * the file the Worker's asset server reads, so both runtimes send the same CSP.
 */
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { extname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Hono } from "hono";
import type { AppEnv } from "../../shared/http/context";

export const CONSOLE_DIR = resolve(fileURLToPath(import.meta.url), "../../../console");

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".txt": "text/plain; charset=utf-8",
};

interface StaticFile {
  body: Uint8Array;
  headers: Record<string, string>;
  etag: string;
}

/** The `/*` block of a Cloudflare `_headers` file: `Name: value` lines indented under the pattern. */
export function parseHeadersFile(text: string): Record<string, string> {
  const headers: Record<string, string> = {};
  let inAll = false;
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === "" || line.trimStart().startsWith("#")) continue;
    if (!/^\s/.test(line)) {
      inAll = line.trim() === "/*";
      continue;
    }
    const colon = line.indexOf(":");
    if (inAll && colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return headers;
}

async function loadFiles(dir: string): Promise<Map<string, StaticFile>> {
  const common = parseHeadersFile(await readFile(join(dir, "_headers"), "utf8").catch(() => ""));
  const files = new Map<string, StaticFile>();
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (!entry.isFile() || /^[._]/.test(entry.name)) continue;
    const type = CONTENT_TYPES[extname(entry.name)];
    if (!type) continue;
    const body = new Uint8Array(await readFile(join(dir, entry.name)));
    const etag = `"${createHash("sha256").update(body).digest("hex").slice(0, 16)}"`;
    // No hashed file names (no build step): the browser keeps each file but asks again every time, a 304 when unchanged.
    const headers = { ...common, "content-type": type, "cache-control": "no-cache", etag };
    files.set(`/${entry.name}`, { body, headers, etag });
    if (entry.name === "index.html") files.set("/", { body, headers, etag });
  }
  return files;
}

/** Mounts the console's files on `app` (GET and HEAD; anything else falls through to the 404). */
export function mountConsole(app: Hono<AppEnv>, dir = CONSOLE_DIR): void {
  let files: Promise<Map<string, StaticFile>> | undefined;
  app.get("*", async (c, next) => {
    if (c.req.path.startsWith("/api/") || c.req.path === "/api") return next();
    files ??= loadFiles(dir).catch((e) => {
      files = undefined;
      throw e;
    });
    const file = (await files).get(c.req.path);
    if (!file) return next();
    if (c.req.header("if-none-match") === file.etag) return c.body(null, 304, file.headers);
    return c.body(file.body as Uint8Array<ArrayBuffer>, 200, file.headers);
  });
}
