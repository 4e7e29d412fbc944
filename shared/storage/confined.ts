/**
 * Opening files beneath a directory without ever leaving it through a symbolic
 * link (Node only), for the runner's static server and unpacker and the
 * local-folder snapshot, which run as the server's user over trees that a build
 * or a member can change while they are read.
 *
 * Node has no openat(2). On Linux, `/proc/self/fd/<fd>` is a link to the open
 * file itself, not a name looked up again: `/proc/self/fd/<dirfd>/<name>` is
 * resolved inside that very directory, however its path is renamed or swapped
 * for a link afterwards, and opened with O_NOFOLLOW it is
 * openat(dirfd, name, O_NOFOLLOW). Walking a relative path one component at a
 * time this way refuses a link at every component, whenever it was created, and
 * never opens anything outside the first directory.
 *
 * Where /proc is absent (macOS, where only the CLI's folder upload runs) the
 * same calls go by path: a link is still refused at each component opened, but
 * a swap between two opens is not caught.
 */
import { constants, existsSync } from "node:fs";
import { type FileHandle, open, readlink } from "node:fs/promises";

const PROC_FD = "/proc/self/fd";

/** Whether open files are named under /proc/self/fd (Linux). */
export const hasProcFd = existsSync(PROC_FD);

/** A directory: never through a link at its last component (ENOTDIR or ELOOP then). */
export const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** A file to read: never through a link, never blocking on a FIFO, never a controlling terminal. */
export const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

/** A directory held open, with the path it stands for (messages, and the fallback without /proc). */
export interface OpenDir {
  handle: FileHandle;
  path: string;
}

/** Error codes meaning "not a directory, or a link, at that name". */
export const isLinkOrNotDir = (e: unknown) => ["ENOTDIR", "ELOOP"].includes((e as NodeJS.ErrnoException).code ?? "");

/** The path naming `name` (one component) inside `dir`: through the open descriptor where /proc allows. */
export function at(dir: OpenDir, name: string): string {
  if (name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\0")) {
    throw new Error(`not a single path component: ${JSON.stringify(name.slice(0, 200))}`);
  }
  return hasProcFd ? `${PROC_FD}/${dir.handle.fd}/${name}` : `${dir.path}/${name}`;
}

/** The path that lists `dir` itself (for opendir/readdir): its descriptor where /proc allows. */
export const listingPath = (dir: OpenDir): string => (hasProcFd ? `${PROC_FD}/${dir.handle.fd}` : dir.path);

/** Opens `path` as a directory (a link at its last component refused); `real`: what was opened must have exactly that real path. */
export async function openDir(path: string, real?: string): Promise<OpenDir> {
  const handle = await open(path, DIR_FLAGS);
  const dir = { handle, path };
  if (real !== undefined) {
    const actual = await realPathOf(handle);
    if (actual !== null && actual !== real) {
      await handle.close();
      throw Object.assign(new Error(`${path} is no longer ${real}`), { code: "ELOOP" });
    }
  }
  return dir;
}

/** Opens the directory `name` inside `dir`, never through a link. */
export async function openDirAt(dir: OpenDir, name: string): Promise<OpenDir> {
  return { handle: await open(at(dir, name), DIR_FLAGS), path: `${dir.path}/${name}` };
}

/** Opens `segments` below `dir` one component at a time (each a directory, none a link); `dir` itself for none. The caller closes what is returned unless it is `dir`. */
export async function openDirBelow(dir: OpenDir, segments: readonly string[]): Promise<OpenDir> {
  let current = dir;
  for (const segment of segments) {
    let next: OpenDir;
    try {
      next = await openDirAt(current, segment);
    } finally {
      if (current !== dir) await current.handle.close();
    }
    current = next;
  }
  return current;
}

/** The real path of an open file (its /proc entry); null where /proc is absent. */
export async function realPathOf(handle: FileHandle): Promise<string | null> {
  return hasProcFd ? readlink(`${PROC_FD}/${handle.fd}`) : null;
}
