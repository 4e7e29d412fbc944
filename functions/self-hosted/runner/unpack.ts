/**
 * Unpacks an upload deployment's artifact (a gzipped tarball) into its work
 * directory under the scan's hostile-archive rules.
 *
 * Two passes over the stored artifact: first the scan's own reader
 * (functions/projects/folder/tar-reader.ts, SCAN_LIMITS) reads the whole archive
 * and refuses absolute paths, `..`, links, devices, FIFOs, too many entries,
 * files or totals over the caps and gzip bombs, before anything is written; then
 * node-tar streams the members out, checked again one by one (the same rules, in
 * case the object changed in between).
 *
 * Writing never leaves the destination: each member's directory is reached from
 * the destination's descriptor one component at a time, created 0700 where
 * missing and opened with O_NOFOLLOW (shared/storage/confined.ts), so a link
 * anywhere on the way, made before or during the unpack, fails it; files are
 * created inside that descriptor with O_CREAT|O_EXCL|O_NOFOLLOW (an existing
 * path or a link is never written through), 0600 (0700 when the archive marks
 * them executable).
 *
 * Bounded work at a time: the archive is gunzipped on the thread pool and fed
 * to the parser a chunk (16 KiB) at a time, and every member that chunk yields
 * is written (awaited) before the next chunk is read; files whose data has all
 * arrived are written CONCURRENT_FILES at a time, a larger one alone. At most
 * CONCURRENT_FILES + 2 descriptors are open (the destination, the current
 * directory, the files), and no file-system call blocks the event loop,
 * whatever the number of entries.
 */
import { constants } from "node:fs";
import { type FileHandle, mkdir, open } from "node:fs/promises";
import { Readable } from "node:stream";
import type { ReadableStream as NodeWebStream } from "node:stream/web";
import { createGunzip } from "node:zlib";
import { Parser, type ReadEntry } from "tar";
import { at, isLinkOrNotDir, type OpenDir, openDir, openDirAt } from "../../../shared/storage/confined";
import type { ScanLimits } from "../../../shared/storage/limits";

export class UnpackError extends Error {}

const FILE_TYPES = new Set(["File", "OldFile", "ContiguousFile"]);
const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
/** Small files written at once (each one descriptor): creating files one by one through /proc is slow. */
const CONCURRENT_FILES = 8;
/** Trailing padding a tar writer may add past the members (records of 10 KiB, and some slack). */
const TRAILER_SLACK = 1024 * 1024;

/** `./a//b/` → `a/b`; null for an absolute path or one with `..` (either separator). */
function relativeOf(raw: string): string | null {
  if (raw.startsWith("/") || raw.startsWith("\\") || /^[A-Za-z]:[/\\]/.test(raw) || raw.includes("\0")) return null;
  const segments = raw.split(/[/\\]/);
  if (segments.includes("..")) return null;
  return segments.filter((s) => s !== "" && s !== ".").join("/");
}

type Job = { kind: "dir"; rel: string; shown: string } | { kind: "file"; rel: string; shown: string; entry: ReadEntry; mode: number };

/**
 * The directories members go to, reached from the destination's descriptor; the
 * last one stays open, as archives list a directory's members together.
 */
class Directories {
  private last: { rel: string; dir: OpenDir } | undefined;
  constructor(private readonly base: OpenDir) {}

  /** `rel` ("" for the destination) as an open directory, each missing component created. */
  async open(rel: string): Promise<OpenDir> {
    if (rel === "") return this.base;
    if (this.last?.rel === rel) return this.last.dir;
    await this.close();
    let current = this.base;
    try {
      for (const segment of rel.split("/")) {
        await mkdir(at(current, segment), { mode: 0o700 }).catch((e: NodeJS.ErrnoException) => {
          if (e.code !== "EEXIST") throw e;
        });
        const next = await openDirAt(current, segment);
        if (current !== this.base) await current.handle.close();
        current = next;
      }
    } catch (e) {
      if (current !== this.base) await current.handle.close();
      throw e;
    }
    this.last = { rel, dir: current };
    return current;
  }

  /** Whether `rel` is at hand without closing another directory. */
  isOpen(rel: string): boolean {
    return rel === "" || this.last?.rel === rel;
  }

  async close(): Promise<void> {
    const last = this.last;
    this.last = undefined;
    await last?.dir.handle.close();
  }
}

async function writeAll(handle: FileHandle, chunk: Buffer): Promise<void> {
  let written = 0;
  while (written < chunk.length) written += (await handle.write(chunk, written, chunk.length - written)).bytesWritten;
}

/**
 * Streams the tarball into `dest` (an existing, empty, private directory),
 * dropping `root` (the archive's single top-level folder, "" when none). Throws
 * UnpackError naming the offending entry; the caller removes `dest` then.
 */
export async function extractArchive(
  body: ReadableStream<Uint8Array>,
  dest: string,
  options: { root: string; limits: ScanLimits },
): Promise<{ files: number; bytes: number }> {
  const { limits, root } = options;
  let entries = 0;
  let files = 0;
  let bytes = 0;
  let failure: Error | undefined;
  const jobs: Job[] = [];

  const source = Readable.fromWeb(body as NodeWebStream<Uint8Array>);
  const parser = new Parser({ strict: true });

  const fail = (message: string) => {
    failure ??= new UnpackError(message);
  };

  // Runs synchronously inside parser.write(): checks the member and queues it; the writing happens in drain().
  parser.on("entry", (entry: ReadEntry) => {
    if (failure) return void entry.resume();
    const shown = JSON.stringify(entry.path.slice(0, 200));
    const isFile = FILE_TYPES.has(entry.type);
    if (!isFile && entry.type !== "Directory") {
      entry.resume();
      return fail(`The archive contains ${entry.type} ${shown}; only files and directories are accepted`);
    }
    let rel = relativeOf(entry.path);
    if (rel === null) {
      entry.resume();
      return fail(`The archive contains an unsafe path ${shown}`);
    }
    if (root) {
      const top = root.replace(/\/$/, "");
      if (rel === top) rel = "";
      else if (rel.startsWith(`${top}/`)) rel = rel.slice(top.length + 1);
      else {
        entry.resume();
        return fail(`The archive's member ${shown} is outside its folder ${root}`);
      }
    }
    if (++entries > limits.maxEntries) {
      entry.resume();
      return fail(`The archive has more than ${limits.maxEntries} entries`);
    }
    if (entry.size > limits.maxFileBytes || bytes + entry.size > limits.maxTotalBytes) {
      entry.resume();
      return fail(`The archive's member ${shown} is over the size limits`);
    }
    if (rel === "") return void entry.resume();
    if (!isFile) {
      entry.resume();
      return void jobs.push({ kind: "dir", rel, shown });
    }
    bytes += entry.size;
    // Left unread: the parser holds every later member back until this one's data is consumed.
    jobs.push({ kind: "file", rel, shown, entry, mode: (entry.mode ?? 0) & 0o100 ? 0o700 : 0o600 });
  });
  parser.on("error", (e: Error) => {
    failure ??= new UnpackError(`The archive is unreadable: ${e.message}`);
  });

  const base = await openDir(dest);
  const dirs = new Directories(base);
  /** The file being written whose data is still arriving. */
  let writing: { job: Extract<Job, { kind: "file" }>; handle: FileHandle } | undefined;

  const closeWriting = async () => {
    const current = writing;
    writing = undefined;
    await current?.handle.close();
  };

  /** Files written concurrently (their data all arrived); each holds the directory it is created in. */
  const inflight = new Set<Promise<void>>();
  const settle = () => Promise.all(inflight);

  const create = async (parent: OpenDir, job: Extract<Job, { kind: "file" }>): Promise<FileHandle | undefined> => {
    try {
      const handle = await open(at(parent, job.rel.slice(job.rel.lastIndexOf("/") + 1)), CREATE_FLAGS, job.mode);
      files++;
      return handle;
    } catch (e) {
      failed(job, e);
      return undefined;
    }
  };
  const failed = (job: Job, e: unknown) => {
    const code = (e as NodeJS.ErrnoException).code;
    if (job.kind === "file" && code === "EEXIST") fail(`The archive contains ${job.shown} twice`);
    else if (isLinkOrNotDir(e)) fail(`The archive's member ${job.shown} passes through a symbolic link or a file`);
    else fail(`Unpacking ${job.shown} failed: ${(e as Error).message}`);
  };

  /**
   * Writes the queued members in order; returns when the queue is empty or the
   * file being written awaits more data. A file whose data has all arrived is
   * written alongside others, CONCURRENT_FILES at most; anything else (a
   * directory, a change of directory, a file still arriving) waits for those first.
   */
  const drain = async () => {
    while (!failure) {
      if (writing) {
        const { entry } = writing.job;
        const chunk = entry.read() as Buffer | null;
        if (chunk?.length) await writeAll(writing.handle, chunk);
        if (entry.remain > 0 || entry.bufferLength > 0) return;
        await closeWriting();
        continue;
      }
      const job = jobs.shift();
      if (!job) return;
      const slash = job.rel.lastIndexOf("/");
      const dirRel = job.kind === "dir" ? job.rel : slash < 0 ? "" : job.rel.slice(0, slash);
      if (!dirs.isOpen(dirRel)) await settle();
      let parent: OpenDir;
      try {
        parent = await dirs.open(dirRel);
      } catch (e) {
        failed(job, e);
        continue;
      }
      if (job.kind === "dir") continue;
      if (job.entry.remain > 0) {
        await settle();
        const handle = await create(parent, job);
        if (handle) writing = { job, handle };
        continue;
      }
      // Read now, in order: consuming it lets the parser emit the members after it.
      const data = job.entry.read() as Buffer | null;
      while (inflight.size >= CONCURRENT_FILES) await Promise.race(inflight);
      const task = (async () => {
        const handle = await create(parent, job);
        if (!handle) return;
        try {
          if (data?.length) await writeAll(handle, data);
        } catch (e) {
          failed(job, e);
        } finally {
          await handle.close();
        }
      })().finally(() => inflight.delete(task));
      inflight.add(task);
    }
  };

  const input = source.pipe(createGunzip());
  source.on("error", (e) => input.destroy(e));
  let fed = 0;
  try {
    for await (const chunk of input as AsyncIterable<Buffer>) {
      fed += chunk.length;
      if (fed > limits.maxTotalBytes + TRAILER_SLACK) fail("The archive is over the size limits");
      if (failure) break;
      parser.write(chunk);
      await drain();
      if (failure) break;
    }
    if (!failure) {
      parser.end();
      await drain();
      await settle();
      if (!failure && (writing || jobs.length > 0)) fail("The archive ends in the middle of a member");
    }
  } catch (e) {
    failure ??= new UnpackError(
      (e as NodeJS.ErrnoException).code?.startsWith("Z_")
        ? `The archive is unreadable: ${(e as Error).message}`
        : `The artifact could not be read: ${(e as Error).message}`,
    );
  } finally {
    // A refused archive stops mid-member: what was open is closed, the caller removes the directory.
    input.destroy();
    source.destroy();
    await settle();
    await closeWriting();
    await dirs.close();
    await base.handle.close();
  }
  if (failure) throw failure;
  if (entries === 0) throw new UnpackError("The archive contains no files");
  return { files, bytes };
}
