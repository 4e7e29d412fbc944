/**
 * Packs a folder into a gzipped tarball (Node only), honouring its ignore files:
 * `.gitignore` files at any depth (each applies to its own directory, as in git)
 * and the root `.dockerignore` (read with the same gitignore semantics). `.git/`
 * is always left out, and so are the directories the caller names (`exclude`).
 * Symbolic links and other special files are never followed nor packed (listed
 * as skipped), an ignore file that is a link is not read; empty directories are not kept.
 *
 * Used by the CLI's folder upload (functions/cli/pack.ts) and by the self-hosted
 * snapshot of a local-folder project (functions/local-folders/service.ts), which
 * also passes `limits`: past them the listing stops with a FolderLimitError.
 */
import { lstatSync, readFileSync } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import { join, posix, relative, sep } from "node:path";
import ignore, { type Ignore } from "ignore";
import { create } from "tar";

interface Rules {
  /** Directory the patterns are relative to, relative to the root ("" for the root). */
  base: string;
  rules: Ignore;
}

const toPosix = (p: string) => p.split(sep).join(posix.sep);

/** An ignore file is read only when it is a regular file (a symbolic link is never followed) of at most this many bytes. */
export const MAX_IGNORE_FILE_BYTES = 1024 * 1024;

function rulesFrom(file: string, base: string): Rules | null {
  const info = lstatSync(file, { throwIfNoEntry: false });
  if (!info?.isFile()) return null;
  if (info.size > MAX_IGNORE_FILE_BYTES)
    throw new FolderLimitError(`${file} is over ${MAX_IGNORE_FILE_BYTES / 1024 / 1024} MiB; ignore files that large are refused`);
  return { base, rules: ignore().add(readFileSync(file, "utf8")) };
}

function ignored(path: string, isDir: boolean, stack: Rules[]): boolean {
  for (const { base, rules } of stack) {
    const rel = base ? posix.relative(base, path) : path;
    if (rel && !rel.startsWith("..") && rules.ignores(isDir ? `${rel}/` : rel)) return true;
  }
  return false;
}

export interface Listing {
  /** Files to pack, relative to the root, in a stable order. */
  files: string[];
  /** Symbolic links and special files left out. */
  skipped: string[];
  /** Sum of the files' sizes. */
  bytes: number;
}

export interface ListLimits {
  /** Files and directories walked (ignored ones are not counted). */
  maxEntries: number;
  /** One file. */
  maxFileBytes: number;
  /** All the files together. */
  maxTotalBytes: number;
}

export class FolderLimitError extends Error {}

export interface ListOptions {
  /** Directories (relative to the root, posix) never descended into, e.g. the CLI's `.wsp`. */
  exclude?: readonly string[];
  limits?: ListLimits;
}

export async function listFolder(root: string, options: ListOptions = {}): Promise<Listing> {
  const files: string[] = [];
  const skipped: string[] = [];
  const exclude = new Set(options.exclude ?? []);
  const limits = options.limits;
  let entries = 0;
  let bytes = 0;
  const rootRules = [rulesFrom(join(root, ".dockerignore"), ""), rulesFrom(join(root, ".gitignore"), "")].filter((r): r is Rules => r !== null);

  const count = () => {
    if (limits && ++entries > limits.maxEntries) throw new FolderLimitError(`The folder has more than ${limits.maxEntries} files and directories`);
  };

  async function walk(dir: string, stack: Rules[]) {
    const names = (await readdir(dir)).sort();
    for (const name of names) {
      const full = join(dir, name);
      const rel = toPosix(relative(root, full));
      const info = await lstat(full);
      if (info.isDirectory()) {
        if (name === ".git" || exclude.has(rel) || ignored(rel, true, stack)) continue;
        count();
        const nested = rulesFrom(join(full, ".gitignore"), rel);
        await walk(full, nested ? [...stack, nested] : stack);
      } else if (info.isFile()) {
        if (ignored(rel, false, stack)) continue;
        count();
        if (limits && info.size > limits.maxFileBytes) throw new FolderLimitError(`${rel} is over the ${limits.maxFileBytes}-byte limit of one file`);
        bytes += info.size;
        if (limits && bytes > limits.maxTotalBytes) throw new FolderLimitError(`The folder holds more than ${limits.maxTotalBytes} bytes`);
        files.push(rel);
      } else if (!ignored(rel, false, stack)) {
        skipped.push(rel);
      }
    }
  }
  await walk(root, rootRules);
  return { files, skipped, bytes };
}

/** Writes the tarball of the listing to `outFile` (portable headers: no owner names or ids; links never followed). */
export async function packFolder(root: string, outFile: string, listing: Pick<Listing, "files">): Promise<void> {
  await create({ gzip: true, portable: true, cwd: root, file: outFile, follow: false, noDirRecurse: true }, listing.files);
}
