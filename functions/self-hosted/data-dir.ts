/**
 * The self-hosted data directory: the embedded database, the secrets keyring and
 * the first owner token live here. One process owns it at a time (PGlite does not
 * notice a second one opening the same files).
 */
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { join, resolve } from "node:path";
import { generateKeySpec } from "../../shared/crypto/keyring";

export class DataDirLockedError extends Error {}

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
  mkdirSync(dir, { recursive: true, mode: 0o700 });
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
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const spec = generateKeySpec("k1");
  writeFileSync(path, spec + "\n", { mode: 0o600, flag: "wx" });
  return spec;
}

export function writeOwnerToken(dir: string, token: string): string {
  const path = join(dir, "owner-token");
  writeFileSync(path, token + "\n", { mode: 0o600 });
  return path;
}
