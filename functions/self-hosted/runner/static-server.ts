/**
 * The static-site server of the self-hosted runner: a deployment with an output
 * directory and no start command is served from that directory by node:http on a
 * loopback port (the edge proxies to it like to any app).
 *
 * - GET and HEAD only (anything else: 405 with `Allow: GET, HEAD`).
 * - `/` and any directory: its `index.html`; no directory listings.
 * - Files are streamed (never read whole into memory), with a Content-Type for
 *   common extensions (else application/octet-stream) and Content-Length.
 * - Never serves outside the directory: the decoded path must not hold NUL, a
 *   backslash or a `..` segment (so `/../`, `%2e%2e/`, `%2f..` are refused), and
 *   the file's realpath must lie inside the directory's realpath (a symlink that
 *   leads outside is a 404). Refused paths get the same 404 as missing ones.
 * - Not found: the site's own `404.html` (status 404) if it has one, else a plain
 *   404. There is no SPA fallback to index.html: a single-page app that needs one
 *   can ship a 404.html that loads it.
 */
import { createReadStream } from "node:fs";
import { realpath, stat } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { extname, join, sep } from "node:path";

export interface StaticServer {
  readonly port: number;
  close(): Promise<void>;
}

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".htm": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".webmanifest": "application/manifest+json",
  ".txt": "text/plain; charset=utf-8",
  ".md": "text/markdown; charset=utf-8",
  ".xml": "application/xml; charset=utf-8",
  ".csv": "text/csv; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".avif": "image/avif",
  ".ico": "image/x-icon",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
  ".ttf": "font/ttf",
  ".otf": "font/otf",
  ".wasm": "application/wasm",
  ".pdf": "application/pdf",
  ".mp4": "video/mp4",
  ".webm": "video/webm",
  ".mp3": "audio/mpeg",
  ".wav": "audio/wav",
};

/** Paths longer than this are refused before any decoding (404). */
const MAX_PATH_CHARS = 4096;

export function contentTypeOf(path: string): string {
  return CONTENT_TYPES[extname(path).toLowerCase()] ?? "application/octet-stream";
}

/** Serves `dir` on 127.0.0.1 (port 0: a free one); resolves once listening. */
export async function startStaticServer(dir: string, port = 0): Promise<StaticServer> {
  const root = await realpath(dir);
  const server = createServer((req, res) => {
    handle(root, req, res).catch(() => {
      if (!res.headersSent) plain(res, 500, "Internal Server Error", req.method === "HEAD");
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function handle(root: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const head = req.method === "HEAD";
  if (req.method !== "GET" && !head) {
    res.setHeader("Allow", "GET, HEAD");
    return plain(res, 405, "Method Not Allowed", false);
  }
  const file = await resolveFile(root, req.url ?? "/");
  if (file) return send(res, file.path, file.size, 200, head);
  const notFound = await resolveFile(root, "/404.html");
  if (notFound) return send(res, notFound.path, notFound.size, 404, head);
  return plain(res, 404, "Not Found", head);
}

/** The regular file a request path names inside root (a directory: its index.html), or undefined. */
async function resolveFile(root: string, url: string): Promise<{ path: string; size: number } | undefined> {
  if (url.length > MAX_PATH_CHARS) return undefined;
  const rawPath = url.split("?", 1)[0]!.split("#", 1)[0]!;
  let decoded: string;
  try {
    decoded = decodeURIComponent(rawPath);
  } catch {
    return undefined;
  }
  if (!decoded.startsWith("/") || decoded.includes("\0") || decoded.includes("\\")) return undefined;
  const segments = decoded.split("/").filter((s) => s !== "" && s !== ".");
  if (segments.some((s) => s === "..")) return undefined;
  let candidate = join(root, ...segments);
  for (let depth = 0; depth < 2; depth++) {
    let real: string;
    try {
      real = await realpath(candidate);
    } catch {
      return undefined;
    }
    if (real !== root && !real.startsWith(root + sep)) return undefined;
    const info = await stat(real);
    if (info.isFile()) return { path: real, size: info.size };
    if (!info.isDirectory()) return undefined;
    candidate = join(real, "index.html");
  }
  return undefined;
}

function send(res: ServerResponse, path: string, size: number, status: number, head: boolean): void {
  res.writeHead(status, { "Content-Type": contentTypeOf(path), "Content-Length": size, "X-Content-Type-Options": "nosniff" });
  if (head) {
    res.end();
    return;
  }
  const stream = createReadStream(path);
  stream.on("error", () => res.destroy());
  res.on("close", () => stream.destroy());
  stream.pipe(res);
}

function plain(res: ServerResponse, status: number, text: string, head: boolean): void {
  const body = `${status} ${text}\n`;
  res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8", "Content-Length": Buffer.byteLength(body) });
  res.end(head ? undefined : body);
}
