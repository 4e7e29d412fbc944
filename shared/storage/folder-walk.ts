/**
 * Walks a folder for packing (Node only), honouring its ignore files:
 * `.gitignore` files at any depth (each applies to its own directory, as in git)
 * and the root `.dockerignore` (read with the same gitignore semantics). `.git/`
 * is always left out, and so are the directories the caller names (`exclude`).
 * Symbolic links and other special files are never followed nor opened (listed
 * as skipped); an ignore file that is a link is not read.
 *
 * The walk holds descriptors, not paths (shared/storage/confined.ts): each
 * directory and file is opened by name inside its parent's descriptor with
 * O_NOFOLLOW, so a directory swapped for a link while the walk runs is never
 * entered, and each directory's real path is checked to be where the walk
 * expects it. A name that vanishes, or turns into a link or another kind of
 * file, between the listing and its open is a FolderChangedError naming it;
 * nothing outside the folder is ever opened. Past `limits` the walk stops with
 * a FolderLimitError.
 */
import type { Dir, Dirent, Stats } from "node:fs";
import { type FileHandle, open, opendir } from "node:fs/promises";
import { posix } from "node:path";
import ignore, { type Ignore } from "ignore";
import { at, isLinkOrNotDir, listingPath, type OpenDir, openDir, openDirAt, READ_FLAGS, realPathOf } from "./confined";

/** An ignore file is read only when it is a regular file (a symbolic link is never followed) of at most this many bytes. */
export const MAX_IGNORE_FILE_BYTES = 1024 * 1024;

/** Directories nested deeper than this are refused: the walk holds one descriptor per level. */
export const MAX_NESTING = 128;

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

export interface ListOptions {
  /** Directories (relative to the root, posix) never descended into, e.g. the CLI's `.wsp`. */
  exclude?: readonly string[];
  limits?: ListLimits;
  /** `root` is a real path the caller checked: the directory opened must still be exactly it (a link swapped in since is refused). */
  realRoot?: boolean;
}

export class FolderLimitError extends Error {}

/** A file or directory of the folder vanished or changed kind while it was read (`path`: relative to the folder). */
export class FolderChangedError extends Error {
  constructor(
    readonly path: string,
    readonly how: "vanished" | "changed",
  ) {
    super(`${path} ${how === "vanished" ? "vanished" : "changed"} while the folder was read`);
  }
}

/** Called for each file packed, with its descriptor (opened without following links) and fstat; the walk closes it after. */
export type OnFile = (rel: string, handle: FileHandle, info: Stats) => Promise<void>;

interface Rules {
  /** Directory the patterns are relative to, relative to the root ("" for the root). */
  base: string;
  rules: Ignore;
}

function ignored(path: string, isDir: boolean, stack: Rules[]): boolean {
  for (const { base, rules } of stack) {
    const rel = base ? posix.relative(base, path) : path;
    if (rel && !rel.startsWith("..") && rules.ignores(isDir ? `${rel}/` : rel)) return true;
  }
  return false;
}

/** The ignore rules of `name` in `dir` when it is a regular file (never through a link), else null. */
async function rulesAt(dir: OpenDir, name: string, base: string): Promise<Rules | null> {
  let handle: FileHandle;
  try {
    handle = await open(at(dir, name), READ_FLAGS);
  } catch {
    return null;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) return null;
    const shown = base ? `${base}/${name}` : name;
    if (info.size > MAX_IGNORE_FILE_BYTES)
      throw new FolderLimitError(`${shown} is over ${MAX_IGNORE_FILE_BYTES / 1024 / 1024} MiB; ignore files that large are refused`);
    const text = (await handle.readFile()).toString("utf8");
    return { base, rules: ignore().add(text) };
  } finally {
    await handle.close();
  }
}

/** The directory's entries, sorted by name; at most `cap` of them. */
async function entriesOf(dir: OpenDir, rel: string, cap: number): Promise<Dirent[]> {
  const entries: Dirent[] = [];
  let handle: Dir;
  try {
    handle = await opendir(listingPath(dir), { bufferSize: 64 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") throw new FolderChangedError(rel || ".", "vanished");
    throw e;
  }
  // for-await closes the directory when the loop ends, breaks or throws.
  for await (const entry of handle) {
    if (entries.length >= cap) throw new FolderLimitError(`${rel || "The folder"} holds more than ${cap} names`);
    entries.push(entry);
  }
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** Opens a name the listing saw as `kind`; a FolderChangedError when it is gone or is no longer that. */
async function openAs(dir: OpenDir, name: string, rel: string, kind: "dir" | "file"): Promise<{ handle: FileHandle; info: Stats }> {
  let handle: FileHandle;
  try {
    handle = kind === "dir" ? (await openDirAt(dir, name)).handle : await open(at(dir, name), READ_FLAGS);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw new FolderChangedError(rel, "vanished");
    if (isLinkOrNotDir(e)) throw new FolderChangedError(rel, "changed");
    throw e;
  }
  const info = await handle.stat().catch(async (e) => {
    await handle.close();
    throw e;
  });
  if (kind === "dir" ? !info.isDirectory() : !info.isFile()) {
    await handle.close();
    throw new FolderChangedError(rel, "changed");
  }
  return { handle, info };
}

/** Walks `root` (see the header); `onFile` sees each file packed. */
export async function walkFolder(root: string, options: ListOptions = {}, onFile?: OnFile): Promise<Listing> {
  const files: string[] = [];
  const skipped: string[] = [];
  const exclude = new Set(options.exclude ?? []);
  const limits = options.limits;
  // A directory's listing is held in memory: bounded when the caller bounds the walk.
  const cap = limits ? limits.maxEntries * 2 : Number.POSITIVE_INFINITY;
  let entries = 0;
  let bytes = 0;

  const count = () => {
    if (limits && ++entries > limits.maxEntries) throw new FolderLimitError(`The folder has more than ${limits.maxEntries} files and directories`);
  };

  async function walk(dir: OpenDir, rel: string, stack: Rules[], depth: number): Promise<void> {
    for (const entry of await entriesOf(dir, rel, cap)) {
      const path = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        if (entry.name === ".git" || exclude.has(path) || ignored(path, true, stack)) continue;
        count();
        if (depth >= MAX_NESTING) throw new FolderLimitError(`${path} is nested more than ${MAX_NESTING} directories deep`);
        const { handle } = await openAs(dir, entry.name, path, "dir");
        const child = { handle, path: `${dir.path}/${entry.name}` };
        try {
          // The directory opened is the one the walk means: a rename meanwhile is a change too.
          const real = await realPathOf(handle);
          if (options.realRoot && real !== null && real !== `${root.endsWith("/") ? root : `${root}/`}${path}`) throw new FolderChangedError(path, "changed");
          const nested = await rulesAt(child, ".gitignore", path);
          await walk(child, path, nested ? [...stack, nested] : stack, depth + 1);
        } finally {
          await handle.close();
        }
      } else if (entry.isFile()) {
        if (ignored(path, false, stack)) continue;
        count();
        const { handle, info } = await openAs(dir, entry.name, path, "file");
        try {
          if (limits && info.size > limits.maxFileBytes) throw new FolderLimitError(`${path} is over the ${limits.maxFileBytes}-byte limit of one file`);
          bytes += info.size;
          if (limits && bytes > limits.maxTotalBytes) throw new FolderLimitError(`The folder holds more than ${limits.maxTotalBytes} bytes`);
          files.push(path);
          await onFile?.(path, handle, info);
        } finally {
          await handle.close();
        }
      } else if (!ignored(path, false, stack)) {
        skipped.push(path);
      }
    }
  }

  const top = await openDir(root, options.realRoot ? root : undefined);
  try {
    const rootRules = [await rulesAt(top, ".dockerignore", ""), await rulesAt(top, ".gitignore", "")].filter((r): r is Rules => r !== null);
    await walk(top, "", rootRules, 0);
  } finally {
    await top.handle.close();
  }
  return { files, skipped, bytes };
}
