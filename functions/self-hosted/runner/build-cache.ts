/**
 * A project's build cache: DATA_DIR/cache/<projectId>/, kept across its
 * deployments, shown to every build step and app of the project as
 * ~/.cache (/home/app/.cache in the sandbox). It holds npm's package cache
 * (npm_config_cache) and Node's compile cache (NODE_COMPILE_CACHE): without
 * them every deployment starts from an empty home, downloads every package
 * again and compiles npm and the app's modules from source at every npm
 * invocation (about 60 ms for each `npm` run, 150 ms for an install, on a
 * small app here).
 *
 * - One project's cache: owned by the project's sandbox uid, 0700, never
 *   mounted into another project's sandbox (one project could otherwise plant
 *   a poisoned package or compiled code for another).
 * - Bounded: at the start of every build, a cache holding more than half of
 *   the project's disk limit (diskGb) is emptied first; while a build or app
 *   runs, the cache counts towards diskGb like the work directory.
 * - Gone with the project: the runner removes the caches of deleted projects
 *   at start (sweep).
 */
import { readdirSync } from "node:fs";
import { chown, mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { inArray } from "drizzle-orm";
import { projects } from "../../../shared/db/schema";
import type { Db } from "../../../shared/db/types";
import { diskUsage } from "./sandbox/disk";

/** DATA_DIR/cache: one directory per project. */
export const cacheRootOf = (dataDir: string) => join(dataDir, "cache");
export const cacheDirOf = (dataDir: string, projectId: string) => join(cacheRootOf(dataDir), projectId);

/** The variables that point npm and Node at the cache (`dir`: the cache as the process sees it). */
export function cacheEnv(dir: string): Record<string, string> {
  return { npm_config_cache: `${dir}/npm`, NODE_COMPILE_CACHE: `${dir}/node-compile-cache` };
}

/**
 * Makes the cache ready for a build: created (owned by `uid` when `chownTo` is
 * set), or emptied first when it holds more than `capBytes`. Resolves with the
 * bytes it held when it was emptied, else undefined.
 */
export async function readyCache(dir: string, capBytes: number, chownTo: number | undefined): Promise<number | undefined> {
  let cleared: number | undefined;
  const used = await diskUsage([dir]).catch(() => 0);
  if (used > capBytes) {
    await rm(dir, { recursive: true, force: true });
    cleared = used;
  }
  await makeCache(dir, chownTo);
  return cleared;
}

/** The cache directory exists (an app restored after an upgrade or a sweep needs its mount point too). */
export async function makeCache(dir: string, chownTo: number | undefined): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  if (chownTo !== undefined) await chown(dir, chownTo, chownTo);
}

/** Removes the caches of projects that no longer exist. */
export async function sweepCaches(db: Db, dataDir: string): Promise<void> {
  await sweepCachesOf(dataDir, async (ids) => (await db.select({ id: projects.id }).from(projects).where(inArray(projects.id, ids))).map((r) => r.id));
}

/** sweepCaches with the question "which of these projects still exist" asked of `projectsAlive` (the runner asks its control plane). */
export async function sweepCachesOf(dataDir: string, projectsAlive: (projectIds: string[]) => Promise<string[]>): Promise<void> {
  let names: string[];
  try {
    names = readdirSync(cacheRootOf(dataDir)).filter((n) => /^[a-z]+_[0-9a-z]+$/.test(n));
  } catch {
    return; // no cache yet
  }
  for (let i = 0; i < names.length; i += 500) {
    const batch = names.slice(i, i + 500);
    const alive = new Set(await projectsAlive(batch));
    for (const name of batch) if (!alive.has(name)) await rm(cacheDirOf(dataDir, name), { recursive: true, force: true });
  }
}
