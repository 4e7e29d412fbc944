/**
 * Unpacks an upload deployment's artifact (a gzipped tarball) into its work
 * directory under the scan's hostile-archive rules.
 *
 * Two passes over the stored artifact: first the scan's own reader
 * (functions/projects/folder/tar-reader.ts, SCAN_LIMITS) reads the whole archive
 * and refuses absolute paths, `..`, links, devices, FIFOs, too many entries,
 * files or totals over the caps and gzip bombs, before anything is written; then
 * node-tar streams the members out, checked again one by one (the same rules, in
 * case the object changed in between): every target path is resolved and must
 * stay inside the destination, files are created with O_CREAT|O_EXCL|O_NOFOLLOW
 * (an existing path or a symbolic link is never written through), directories
 * 0700, files 0600 (0700 when the archive marks them executable).
 */
import { constants, createWriteStream, mkdirSync, openSync } from "node:fs";
import { dirname, resolve, sep } from "node:path";
import { Readable } from "node:stream";
import type { ReadableStream as NodeWebStream } from "node:stream/web";
import { Parser, type ReadEntry } from "tar";
import type { ScanLimits } from "../../../shared/storage/limits";

export class UnpackError extends Error {}

const FILE_TYPES = new Set(["File", "OldFile", "ContiguousFile"]);

/** `./a//b/` → `a/b`; null for an absolute path or one with `..` (either separator). */
function relativeOf(raw: string): string | null {
  if (raw.startsWith("/") || raw.startsWith("\\") || /^[A-Za-z]:[/\\]/.test(raw) || raw.includes("\0")) return null;
  const segments = raw.split(/[/\\]/);
  if (segments.includes("..")) return null;
  return segments.filter((s) => s !== "" && s !== ".").join("/");
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
  const base = resolve(dest);
  const { limits, root } = options;
  let entries = 0;
  let files = 0;
  let bytes = 0;
  let failure: Error | undefined;
  const writes: Array<Promise<void>> = [];
  const outs: Array<ReturnType<typeof createWriteStream>> = [];

  const source = Readable.fromWeb(body as NodeWebStream<Uint8Array>);
  const parser = new Parser({ strict: true });

  const fail = (message: string) => {
    failure ??= new UnpackError(message);
    source.destroy();
  };

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
    const target = resolve(base, rel);
    if (!target.startsWith(base + sep)) {
      entry.resume();
      return fail(`The archive's member ${shown} resolves outside the work directory`);
    }
    try {
      if (!isFile) {
        mkdirSync(target, { recursive: true, mode: 0o700 });
        return void entry.resume();
      }
      mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
      const mode = (entry.mode ?? 0) & 0o100 ? 0o700 : 0o600;
      const fd = openSync(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
      files++;
      bytes += entry.size;
      const out = createWriteStream("", { fd, autoClose: true });
      writes.push(
        new Promise<void>((done) => {
          out.on("close", () => done());
          out.on("error", (e) => {
            fail(`Writing ${shown} failed: ${e.message}`);
            done();
          });
        }),
      );
      outs.push(out);
      entry.pipe(out);
    } catch (e) {
      entry.resume();
      const code = (e as NodeJS.ErrnoException).code;
      fail(code === "EEXIST" ? `The archive contains ${shown} twice` : `Unpacking ${shown} failed: ${(e as Error).message}`);
    }
  });

  await new Promise<void>((done) => {
    parser.on("error", (e: Error) => {
      failure ??= new UnpackError(`The archive is unreadable: ${e.message}`);
      done();
    });
    parser.on("close", () => done());
    source.on("error", (e) => {
      failure ??= new UnpackError(`The artifact could not be read: ${e.message}`);
      done();
    });
    source.on("close", () => {
      if (failure) done();
    });
    source.pipe(parser);
  });
  // A refused archive stops mid-member: what was open is closed, the caller removes the directory.
  if (failure) for (const out of outs) out.destroy();
  await Promise.all(writes);
  if (failure) throw failure;
  if (entries === 0) throw new UnpackError("The archive contains no files");
  return { files, bytes };
}
