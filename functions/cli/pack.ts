/**
 * Packs a folder into a gzipped tarball for a folder upload, honouring its
 * ignore files: `.gitignore` files at any depth (each applies to its own
 * directory, as in git) and the root `.dockerignore` (read with the same
 * gitignore semantics). `.git/` is always left out, and so is the folder's own
 * link to its project (`.wsp/`, see link.ts). Symbolic links and other
 * special files are skipped (the scan refuses them); empty directories are not kept.
 */
import { existsSync, readFileSync } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import { join, posix, relative, sep } from "node:path";
import ignore, { type Ignore } from "ignore";
import { create } from "tar";
import { LINK_DIR } from "./link";

interface Rules {
  /** Directory the patterns are relative to, relative to the root ("" for the root). */
  base: string;
  rules: Ignore;
}

const toPosix = (p: string) => p.split(sep).join(posix.sep);

function rulesFrom(file: string, base: string): Rules | null {
  if (!existsSync(file)) return null;
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
}

export async function listFolder(root: string): Promise<Listing> {
  const files: string[] = [];
  const skipped: string[] = [];
  const rootRules = [rulesFrom(join(root, ".dockerignore"), ""), rulesFrom(join(root, ".gitignore"), "")].filter((r): r is Rules => r !== null);

  async function walk(dir: string, stack: Rules[]) {
    const entries = (await readdir(dir)).sort();
    for (const name of entries) {
      const full = join(dir, name);
      const rel = toPosix(relative(root, full));
      const info = await lstat(full);
      if (info.isDirectory()) {
        if (name === ".git" || rel === LINK_DIR || ignored(rel, true, stack)) continue;
        const nested = rulesFrom(join(full, ".gitignore"), rel);
        await walk(full, nested ? [...stack, nested] : stack);
      } else if (info.isFile()) {
        if (!ignored(rel, false, stack)) files.push(rel);
      } else if (!ignored(rel, false, stack)) {
        skipped.push(rel);
      }
    }
  }
  await walk(root, rootRules);
  return { files, skipped };
}

/** Writes the tarball of the listing to `outFile` (portable headers: no owner names or ids). */
export async function packFolder(root: string, outFile: string, listing: Listing): Promise<void> {
  await create({ gzip: true, portable: true, cwd: root, file: outFile, follow: false, noDirRecurse: true }, listing.files);
}
