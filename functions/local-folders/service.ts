/**
 * The Node-only implementation of the local-folders service (the interface is
 * shared/storage/local-folders.ts), built by the Node adapter from LOCAL_ROOTS.
 *
 * Path rules (resolve): an absolute path without a `..` segment, lexically under
 * a root (compared with the roots' real paths) before anything is touched; its
 * real path (every symbolic link resolved) must be under a root too, and a
 * directory. Otherwise 400 naming `path`, and nothing in the folder is read.
 *
 * Reads are bounded: the scan walks breadth-first, never into `.git` or
 * `node_modules`, at most MAX_WALK_ENTRIES entries and 4 levels (what the
 * detectors look at), reading directories as streams (a directory of 100,000
 * entries is not listed whole); over the cap the walk stops and the result says
 * `truncated`. Only root-level manifests the detector needs are read, regular
 * files only (O_NOFOLLOW), each at most the upload scan's manifest cap. Symbolic
 * links are never followed: not listed by the scan, not packed by a snapshot.
 *
 * The folder can change while it is read (a member's editor, or an attacker
 * swapping a directory for a link to the data directory right after the path
 * check). So both the scan and the snapshot work from descriptors
 * (shared/storage/confined.ts): the folder is opened once and must still be the
 * real path that was checked, and every directory and file below is opened by
 * name inside its parent's descriptor with O_NOFOLLOW, never by a path looked up
 * again; nothing outside the folder is ever read. The snapshot packs from those
 * descriptors (shared/storage/pack-node.ts, snapshotFolder); a file or directory
 * that vanishes or changes kind mid-walk is a 409 naming it ("changed while it
 * was read … deploy again"), never a 500.
 */
import { createReadStream, type Dir } from "node:fs";
import { lstat, mkdtemp, open, opendir, realpath, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { isAbsolute, join, resolve as resolvePath, sep } from "node:path";
import { Readable } from "node:stream";
import { ApiError, badRequest } from "../../shared/http/errors";
import { at, isLinkOrNotDir, listingPath, type OpenDir, openDir, openDirBelow, READ_FLAGS } from "../../shared/storage/confined";
import type { LocalFolderRead, LocalFolders, LocalSnapshot } from "../../shared/storage/local-folders";
import { MAX_UPLOAD_BYTES, PRESIGN_TTL_SECONDS, SCAN_LIMITS } from "../../shared/storage/limits";
import { FolderChangedError, FolderLimitError, snapshotFolder } from "../../shared/storage/pack-node";
import type { UploadStorage } from "../../shared/storage/types";
import { LOCAL_ROOTS_OFF, MAX_WALK_ENTRIES } from "./schema";

/** Levels below the folder the scan lists (the tar reader's depth). */
const MAX_DEPTH = 4;
const NOT_WALKED = new Set([".git", "node_modules"]);

const mib = (n: number) => `${Math.round(n / 1024 / 1024)} MiB`;

type Checked = { ok: true; real: string } | { ok: false; missing: boolean; reason: string };

const within = (root: string, p: string) => p === root || p.startsWith(root.endsWith(sep) ? root : root + sep);

export function createLocalFolders(input: { roots: readonly string[]; uploads?: UploadStorage }): LocalFolders {
  const roots = [...input.roots];
  const underRoot = (p: string) => roots.some((r) => within(r, p));

  async function check(path: string): Promise<Checked> {
    if (!isAbsolute(path)) return { ok: false, missing: false, reason: "must be an absolute path" };
    if (path.split(/[\\/]/).includes("..")) return { ok: false, missing: false, reason: "must not contain '..'" };
    if (!underRoot(resolvePath(path))) return { ok: false, missing: false, reason: `is outside every allowed root (LOCAL_ROOTS: ${roots.join(", ")})` };
    let real: string;
    try {
      real = await realpath(path);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ENOTDIR") return { ok: false, missing: true, reason: "does not exist" };
      return { ok: false, missing: false, reason: `cannot be read (${code ?? "error"})` };
    }
    if (!underRoot(real)) return { ok: false, missing: false, reason: "leads out of the allowed roots through a symbolic link" };
    if (!(await stat(real)).isDirectory()) return { ok: false, missing: false, reason: "is a file, not a folder" };
    return { ok: true, real };
  }

  async function resolve(path: string): Promise<string> {
    if (roots.length === 0) throw new ApiError("conflict", LOCAL_ROOTS_OFF);
    const c = await check(path);
    if (!c.ok) throw badRequest("path", `${path} ${c.reason}`);
    return c.real;
  }

  async function readManifest(file: string, name: string): Promise<string> {
    const handle = await open(file, READ_FLAGS);
    try {
      const info = await handle.stat();
      if (!info.isFile()) throw new ApiError("conflict", `${name} changed while the folder was read; try again`);
      const { size } = info;
      if (size > SCAN_LIMITS.maxManifestBytes)
        throw badRequest(undefined, `${name} is ${mib(size)}; manifests over ${mib(SCAN_LIMITS.maxManifestBytes)} are refused`);
      const buffer = Buffer.alloc(Math.min(size, SCAN_LIMITS.maxManifestBytes));
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      return buffer.subarray(0, bytesRead).toString("utf8");
    } finally {
      await handle.close();
    }
  }

  async function read(path: string, manifestNames: ReadonlySet<string>): Promise<LocalFolderRead> {
    const real = await resolve(path);
    let top: OpenDir;
    try {
      top = await openDir(real, real);
    } catch (e) {
      if (isLinkOrNotDir(e) || (e as NodeJS.ErrnoException).code === "ENOENT")
        throw new ApiError("conflict", `The folder ${path} changed while it was read; try again`);
      throw e;
    }
    const paths = new Set<string>();
    const manifests = new Map<string, string>();
    let files = 0;
    let entries = 0;
    let truncated = false;
    const queue: Array<{ segments: string[]; depth: number }> = [{ segments: [], depth: 1 }];
    try {
      walk: while (queue.length > 0) {
        const { segments, depth } = queue.shift()!;
        const rel = segments.length ? `${segments.join("/")}/` : "";
        let dir: OpenDir;
        let handle: Dir;
        try {
          // From the folder's descriptor down, a component at a time: a directory swapped for a link is not entered.
          dir = await openDirBelow(top, segments);
        } catch {
          continue; // vanished, unreadable or turned into a link meanwhile: what was seen stays
        }
        try {
          handle = await opendir(listingPath(dir), { bufferSize: 64 });
          // for-await closes the directory when the loop ends, breaks or throws.
          for await (const entry of handle) {
            if (entries >= MAX_WALK_ENTRIES) {
              truncated = true;
              break walk;
            }
            const name = `${rel}${entry.name}`;
            if (entry.isDirectory()) {
              entries++;
              paths.add(`${name}/`);
              if (depth < MAX_DEPTH && !NOT_WALKED.has(entry.name)) queue.push({ segments: [...segments, entry.name], depth: depth + 1 });
            } else if (entry.isFile()) {
              entries++;
              files++;
              paths.add(name);
              if (rel === "" && manifestNames.has(entry.name)) manifests.set(entry.name, await readManifest(at(top, entry.name), entry.name));
            }
            // Symbolic links, sockets, devices: neither listed nor followed.
          }
        } catch (e) {
          if (e instanceof ApiError) throw e;
          // vanished or unreadable meanwhile: what was seen stays
        } finally {
          if (dir !== top) await dir.handle.close();
        }
      }
    } finally {
      await top.handle.close();
    }
    return { path: real, paths, manifests, files, entries, truncated };
  }

  async function exists(path: string): Promise<boolean> {
    if (roots.length === 0) return false;
    return (await check(path)).ok;
  }

  async function store(file: string, key: string, size: number, now: Date): Promise<void> {
    const uploads = input.uploads;
    if (!uploads) throw new ApiError("internal", "Folder uploads are not configured on this instance");
    const body = () => Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>;
    if (uploads.kind === "relay") {
      await uploads.receive(key, body(), MAX_UPLOAD_BYTES);
      return;
    }
    const target = await uploads.presign({ key, sizeBytes: size, now, expiresInSeconds: PRESIGN_TTL_SECONDS });
    const res = await fetch(target.absoluteUrl, { method: target.method, headers: target.headers, body: body(), duplex: "half" } as RequestInit);
    if (!res.ok) throw new ApiError("internal", `The upload store refused the snapshot (${res.status})`);
  }

  async function snapshot({ path, key, now }: { path: string; key: string; now: Date }): Promise<LocalSnapshot> {
    if (roots.length === 0) throw new ApiError("conflict", LOCAL_ROOTS_OFF);
    const c = await check(path);
    if (!c.ok) {
      throw new ApiError("conflict", c.missing ? `The project's folder ${path} no longer exists` : `The project's folder ${path} ${c.reason}`);
    }
    const tmp = await mkdtemp(join(tmpdir(), "ws-local-snapshot-"));
    try {
      const file = join(tmp, "snapshot.tar.gz");
      let listing: Awaited<ReturnType<typeof snapshotFolder>>;
      try {
        listing = await snapshotFolder(c.real, file, {
          realRoot: true,
          limits: { maxEntries: SCAN_LIMITS.maxEntries, maxFileBytes: SCAN_LIMITS.maxFileBytes, maxTotalBytes: SCAN_LIMITS.maxTotalBytes },
        });
      } catch (e) {
        if (e instanceof FolderLimitError) throw new ApiError("conflict", `The project's folder is too large to deploy: ${e.message}`);
        if (e instanceof FolderChangedError)
          throw new ApiError("conflict", `The project's folder ${path} changed while it was read: ${e.path} ${e.how}; deploy again`);
        if (["ENOENT", "ENOTDIR", "ELOOP"].includes((e as NodeJS.ErrnoException).code ?? ""))
          throw new ApiError("conflict", `The project's folder ${path} changed while it was read; deploy again`);
        throw e;
      }
      if (listing.files.length === 0) throw new ApiError("conflict", `The project's folder ${path} has no files to deploy (after .gitignore/.dockerignore)`);
      const { size } = await lstat(file);
      if (size > MAX_UPLOAD_BYTES) throw new ApiError("conflict", `The project's folder packs to ${mib(size)}; the limit is ${mib(MAX_UPLOAD_BYTES)}`);
      await store(file, key, size, now);
      return { files: listing.files.length, bytes: listing.bytes, sizeBytes: size, skipped: listing.skipped.length };
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }

  return { roots, resolve, read, exists, snapshot };
}
