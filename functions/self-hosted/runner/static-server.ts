/**
 * The static-site server of the self-hosted runner: a deployment with an output
 * directory and no start command is served from that directory by node:http on a
 * loopback port (the edge proxies to it like to any app).
 *
 * - GET and HEAD only (anything else: 405 with `Allow: GET, HEAD`).
 * - `/` and any directory: its `index.html`; no directory listings.
 * - Files are streamed (never read whole into memory), with a Content-Type for
 *   common extensions (else application/octet-stream) and Content-Length.
 * - Never serves outside the directory, whatever a build left in it or changes
 *   in it later: the decoded path must not hold NUL, a backslash or a `..`
 *   segment (so `/../`, `%2e%2e/`, `%2f..` are refused), and every request
 *   walks from the directory's descriptor, opened once at start, one component
 *   at a time with O_NOFOLLOW (shared/storage/confined.ts), so a symbolic link
 *   at any component is a 404, even one made after the server started; the
 *   file is served from the descriptor that was checked (a regular file by
 *   fstat), never reopened by name. At start, the directory itself is reached
 *   the same way from `base` (the work directory's source), so an output
 *   directory that is, or passes through, a link refuses to start.
 * - Refused paths get the same 404 as missing ones. Not found: the site's own
 *   `404.html` (status 404) if it has one, else a plain 404. There is no SPA
 *   fallback to index.html: a single-page app that needs one can ship a
 *   404.html that loads it.
 * - Only async file-system calls: a slow disk never stalls the server's event loop.
 */
import type { FileHandle } from "node:fs/promises";
import { open } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { extname, isAbsolute, relative, resolve, sep } from "node:path";
import { at, isLinkOrNotDir, type OpenDir, openDir, openDirBelow, READ_FLAGS } from "../../../shared/storage/confined";

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

/** The served directory, opened from `base` without a link at any component; a clear error naming the offending part otherwise. */
async function openRoot(dir: string, base: string | undefined): Promise<OpenDir> {
  if (!base) {
    try {
      return await openDir(resolve(dir));
    } catch (e) {
      if (isLinkOrNotDir(e)) throw new Error(`the output directory ${dir} is a symbolic link or not a directory`);
      throw e;
    }
  }
  const rel = relative(resolve(base), resolve(dir));
  if (rel.startsWith("..") || isAbsolute(rel)) throw new Error(`the output directory ${dir} is outside ${base}`);
  const top = await openDir(resolve(base));
  try {
    return await openDirBelow(top, rel ? rel.split(sep) : []);
  } catch (e) {
    if (isLinkOrNotDir(e)) throw new Error(`the output directory ${rel} is, or passes through, a symbolic link (or is not a directory)`);
    throw e;
  } finally {
    if (rel) await top.handle.close();
  }
}

/**
 * Serves `dir` on 127.0.0.1 (port 0: a free one); resolves once listening.
 * `base`: the directory `dir` lies in that is trusted (the work directory's
 * source); no component from it to `dir` may be a link. Without it, only `dir`
 * itself is checked not to be one.
 */
export async function startStaticServer(dir: string, base?: string, port = 0): Promise<StaticServer> {
  const root = await openRoot(dir, base);
  const server = createServer((req, res) => {
    handle(root, req, res).catch(() => {
      if (!res.headersSent) plain(res, 500, "Internal Server Error", req.method === "HEAD");
      else res.destroy();
    });
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (e) {
    await root.handle.close();
    throw e;
  }
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }).then(() => root.handle.close()),
  };
}

async function handle(root: OpenDir, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const head = req.method === "HEAD";
  if (req.method !== "GET" && !head) {
    res.setHeader("Allow", "GET, HEAD");
    return plain(res, 405, "Method Not Allowed", false);
  }
  const segments = segmentsOf(req.url ?? "/");
  const file = segments && (await openFile(root, segments));
  if (file) return send(res, file, 200, head);
  const notFound = await openFile(root, ["404.html"]);
  if (notFound) return send(res, notFound, 404, head);
  return plain(res, 404, "Not Found", head);
}

/** The request path's segments, or undefined when it is refused (too long, undecodable, NUL, backslash, `..`). */
function segmentsOf(url: string): string[] | undefined {
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
  return segments.some((s) => s === "..") ? undefined : segments;
}

interface OpenFile {
  handle: FileHandle;
  name: string;
  size: number;
}

/** The regular file the segments name below root (a directory: its index.html), open; undefined for anything missing, a link at any component, or not a file. */
async function openFile(root: OpenDir, segments: readonly string[]): Promise<OpenFile | undefined> {
  const names = segments.length ? [...segments] : ["index.html"];
  const last = names.pop()!;
  let dir: OpenDir;
  try {
    dir = await openDirBelow(root, names);
  } catch {
    return undefined;
  }
  try {
    for (const name of [last, "index.html"]) {
      let handle: FileHandle;
      try {
        handle = await open(at(dir, name), READ_FLAGS);
      } catch {
        return undefined;
      }
      const info = await handle.stat().catch(() => undefined);
      if (info?.isFile()) return { handle, name, size: info.size };
      if (!info?.isDirectory() || name === "index.html") {
        await handle.close();
        return undefined;
      }
      // A directory: its index.html, looked up inside the descriptor just checked.
      if (dir !== root) await dir.handle.close();
      dir = { handle, path: `${dir.path}/${name}` };
    }
    return undefined;
  } finally {
    if (dir !== root) await dir.handle.close();
  }
}

function send(res: ServerResponse, file: OpenFile, status: number, head: boolean): void {
  res.writeHead(status, { "Content-Type": contentTypeOf(file.name), "Content-Length": file.size, "X-Content-Type-Options": "nosniff" });
  if (head || file.size === 0) {
    res.end();
    void file.handle.close();
    return;
  }
  // The descriptor checked, never the name again; no more than the announced length even if the file grows.
  const stream = file.handle.createReadStream({ start: 0, end: file.size - 1, autoClose: true });
  stream.on("error", () => res.destroy());
  res.on("close", () => stream.destroy());
  stream.pipe(res);
}

function plain(res: ServerResponse, status: number, text: string, head: boolean): void {
  const body = `${status} ${text}\n`;
  res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8", "Content-Length": Buffer.byteLength(body) });
  res.end(head ? undefined : body);
}
