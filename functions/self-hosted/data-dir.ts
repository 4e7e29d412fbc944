/**
 * The self-hosted data directory: the embedded database, the secrets keyring and
 * the first owner token live here. One process owns it at a time (PGlite does not
 * notice a second one opening the same files).
 */
import {
  chmodSync,
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  type Stats,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join, resolve } from "node:path";
import { randomUUID } from "node:crypto";
import { generateKeySpec } from "../../shared/crypto/keyring";

export class DataDirLockedError extends Error {}
export class DataDirPermissionsError extends Error {}

/**
 * Refuses a DATA_DIR that other users can write to (they could swap the database,
 * the keyring or the owner token). Creates nothing: a missing directory is fine here.
 */
export function checkDataDir(dir: string): void {
  let info: Stats;
  try {
    info = statSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return;
    throw e;
  }
  if (!info.isDirectory()) throw new DataDirPermissionsError(`DATA_DIR ${dir} is not a directory.`);
  if (info.mode & 0o022) {
    const who = info.mode & 0o002 ? "every user" : "its group";
    throw new DataDirPermissionsError(
      `Data directory ${dir} is writable by ${who} (mode ${(info.mode & 0o777).toString(8)}); make it private first: chmod 700 ${dir}`,
    );
  }
}

/** Creates `dir` (and missing parents) if needed; a folder this creates is 0700 whatever the umask. */
export function ensurePrivateDir(dir: string): void {
  if (existsSync(dir)) return;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/**
 * Makes every folder under `dir` 0700 and every file 0600 (the embedded database
 * creates its files 0666 whatever the umask). Symbolic links are left alone.
 */
export function makeTreePrivate(dir: string): void {
  const pending = [dir];
  while (pending.length > 0) {
    const current = pending.pop()!;
    const info = lstatSync(current);
    if (info.isSymbolicLink()) continue;
    const mode = info.isDirectory() ? 0o700 : 0o600;
    if ((info.mode & 0o777) !== mode) chmodSync(current, mode);
    if (info.isDirectory()) for (const name of readdirSync(current)) pending.push(join(current, name));
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

// Locks this process holds: a lock file naming our own pid is stale unless listed
// here (in a container the pid is often 1 on every start).
const held = new Set<string>();

/** Takes `DATA_DIR/.lock` (holding our pid); a lock left by a dead process is replaced. */
export function lockDataDir(dir: string): () => void {
  ensurePrivateDir(dir);
  const path = resolve(dir, ".lock");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, "wx", 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      held.add(path);
      return () => {
        held.delete(path);
        rmSync(path, { force: true });
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      const holder = Number(readFileSync(path, "utf8").trim());
      const alive = holder === process.pid ? held.has(path) : Number.isInteger(holder) && holder > 0 && processAlive(holder);
      if (alive) {
        throw new DataDirLockedError(
          `Data directory ${dir} is in use by another workspace-service process (pid ${holder}). Stop it first, or set DATA_DIR to another directory.`,
        );
      }
      rmSync(path, { force: true }); // stale lock
    }
  }
  throw new DataDirLockedError(`Could not lock data directory ${dir}`);
}

/** The keyring spec: SECRET_KEYS when given, else `DATA_DIR/secret-keys`, generated (0600) on first start. */
export function loadOrCreateKeySpec(dir: string, fromEnv?: string): string {
  if (fromEnv) return fromEnv;
  const path = join(dir, "secret-keys");
  if (existsSync(path)) return readFileSync(path, "utf8").trim();
  ensurePrivateDir(dir);
  const spec = generateKeySpec("k1");
  writeFileSync(path, `${spec}\n`, { mode: 0o600, flag: "wx" });
  return spec;
}

/**
 * Writes `DATA_DIR/owner-token` (0600, creating the folder if needed) through a
 * temporary file, so a leftover file of a failed start is replaced, never half-written.
 */
export function writeOwnerToken(dir: string, token: string): string {
  ensurePrivateDir(dir);
  const path = join(dir, "owner-token");
  const temp = `${path}.${randomUUID()}.tmp`;
  try {
    writeFileSync(temp, `${token}\n`, { mode: 0o600, flag: "wx" });
    renameSync(temp, path);
  } catch (e) {
    rmSync(temp, { force: true });
    throw e;
  }
  return path;
}
