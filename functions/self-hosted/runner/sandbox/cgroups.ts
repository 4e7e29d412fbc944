/**
 * Resource limits that hold: one cgroup (v1) per spawned step or app process,
 * in every writable controller among memory, pids, cpu and freezer.
 *
 * Why cgroups: an rlimit cannot express a Node app's memory (V8 reserves its
 * address space up front, see processes.ts), and a sampling watchdog misses
 * what allocates between two samples and whatever leaves the process group. A
 * process in a cgroup stays in it through fork, setsid and double forks; the
 * kernel enforces the limits and counts what it killed.
 *
 * Detection (`detectCgroups`, at start): /proc/self/mounts gives each v1
 * controller's mount point, /proc/self/cgroup the server's own group in it; the
 * runner's parent group `<own group>/wsp-<key>` is created in each controller
 * where `mkdir` works (as root on these machines; a delegated subtree elsewhere).
 * A controller that is missing or read-only is left out, and the limits it
 * would have held fall back (memory: the sampling watchdog) and are reported
 * as such. The cgroup v2 tree is not written (read-only here; a delegated v2
 * subtree is not supported yet).
 *
 * A group's processes are placed by the spawned shell prelude (processes.ts),
 * which writes its own pid to each `cgroup.procs` before it executes anything
 * of the deployment, so nothing of it ever runs outside the group.
 */
import { mkdir, readdir, readFile, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

export type Controller = "memory" | "pids" | "cpu" | "freezer";
const CONTROLLERS: Controller[] = ["memory", "pids", "cpu", "freezer"];

/** What one group enforces; an absent field is not limited. */
export interface CgroupLimits {
  memoryBytes?: number;
  pidsMax?: number;
  /** CPU cores as a CFS quota over a 100 ms period. */
  cpuCores?: number;
}

export interface Cgroup {
  /** The `cgroup.procs` files the prelude writes its pid to, one per controller. */
  readonly procsFiles: string[];
  /** The controllers this group enforces (what is not among them is not held by the kernel). */
  readonly controllers: Controller[];
  /** Host pids of every process in the group (empty once all exited). */
  pids(): Promise<number[]>;
  /** Whether the kernel's OOM killer acted in the group (its memory limit was reached). */
  memoryExceeded(): Promise<boolean>;
  /** Kills every process of the group with no window for a fork to escape (frozen first when the freezer is there). */
  killAll(): Promise<void>;
  /** Removes the group once empty; false while processes remain. */
  remove(): Promise<boolean>;
}

export interface Cgroups {
  readonly controllers: Controller[];
  create(name: string, limits: CgroupLimits): Promise<Cgroup>;
  /** Removes leftover groups of earlier runs of this runner (their processes killed first). */
  sweep(): Promise<void>;
  /** Removes the runner's parent groups (at stop, once its apps are stopped; a group still in use stays). */
  close(): Promise<void>;
}

const CFS_PERIOD_US = 100_000;

/** The writable v1 controllers and the runner's parent group in each, or undefined when none is writable. */
export async function detectCgroups(key: string): Promise<Cgroups | undefined> {
  let mounts: string;
  let own: string;
  try {
    [mounts, own] = await Promise.all([readFile("/proc/self/mounts", "utf8"), readFile("/proc/self/cgroup", "utf8")]);
  } catch {
    return undefined; // not Linux, or no /proc
  }
  const bases = new Map<Controller, string>();
  for (const controller of CONTROLLERS) {
    const mount = mounts
      .split("\n")
      .map((l) => l.split(" "))
      .find((f) => f[2] === "cgroup" && (f[3] ?? "").split(",").includes(controller))?.[1];
    if (!mount) continue;
    const ownPath =
      own
        .split("\n")
        .map((l) => l.split(":"))
        .find((f) => (f[1] ?? "").split(",").includes(controller))?.[2] ?? "/";
    const base = join(mount, ownPath, `wsp-${key}`);
    try {
      await mkdir(base, { recursive: true });
      bases.set(controller, base);
    } catch {
      // Read-only or not delegated: this controller's limit falls back.
    }
  }
  if (bases.size === 0) return undefined;
  const controllers = [...bases.keys()];

  const groupOf = (name: string): Cgroup => {
    const dirs = new Map([...bases].map(([c, base]) => [c, join(base, name)]));
    const file = (c: Controller, f: string) => join(dirs.get(c)!, f);
    const anyDir = dirs.get("pids") ?? dirs.get("memory") ?? [...dirs.values()][0]!;
    const pids = async () => {
      try {
        return (await readFile(join(anyDir, "cgroup.procs"), "utf8"))
          .split("\n")
          .filter((s) => s !== "")
          .map(Number);
      } catch {
        return [];
      }
    };
    return {
      procsFiles: [...dirs.values()].map((d) => join(d, "cgroup.procs")),
      controllers,
      pids,
      async memoryExceeded() {
        if (!dirs.has("memory")) return false;
        try {
          const oom = /oom_kill (\d+)/.exec(await readFile(file("memory", "memory.oom_control"), "utf8"));
          if (oom) return Number(oom[1]) > 0;
          return Number(await readFile(file("memory", "memory.failcnt"), "utf8")) > 0;
        } catch {
          return false;
        }
      },
      async killAll() {
        const frozen = dirs.has("freezer") && (await setFreezer(file("freezer", "freezer.state"), "FROZEN"));
        // Frozen, nothing forks between the read and the kills; unfrozen, a few rounds catch the children of a forking loop.
        for (let round = 0; round < (frozen ? 1 : 20); round++) {
          const list = await pids();
          if (list.length === 0) break;
          for (const pid of list) {
            try {
              process.kill(pid, "SIGKILL");
            } catch {
              // gone already
            }
          }
        }
        if (frozen) await setFreezer(file("freezer", "freezer.state"), "THAWED");
      },
      async remove() {
        if ((await pids()).length > 0) return false;
        let removed = true;
        for (const dir of dirs.values()) {
          try {
            await rmdir(dir);
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== "ENOENT") removed = false;
          }
        }
        return removed;
      },
    };
  };

  return {
    controllers,
    async create(name, limits) {
      for (const dir of [...bases.values()].map((b) => join(b, name))) await mkdir(dir, { recursive: true });
      const dir = (c: Controller) => join(bases.get(c)!, name);
      if (bases.has("memory") && limits.memoryBytes) {
        await writeFile(join(dir("memory"), "memory.limit_in_bytes"), String(limits.memoryBytes));
        // No swapping past the limit either (the file exists only with swap accounting on).
        await writeFile(join(dir("memory"), "memory.memsw.limit_in_bytes"), String(limits.memoryBytes)).catch(() => {});
      }
      if (bases.has("pids") && limits.pidsMax) await writeFile(join(dir("pids"), "pids.max"), String(limits.pidsMax));
      if (bases.has("cpu") && limits.cpuCores) {
        await writeFile(join(dir("cpu"), "cpu.cfs_period_us"), String(CFS_PERIOD_US));
        await writeFile(join(dir("cpu"), "cpu.cfs_quota_us"), String(Math.max(1000, Math.round(limits.cpuCores * CFS_PERIOD_US))));
      }
      return groupOf(name);
    },
    async close() {
      for (const base of bases.values()) await rmdir(base).catch(() => {});
    },
    async sweep() {
      const names = new Set<string>();
      for (const base of bases.values()) for (const n of await readdir(base, { withFileTypes: true }).catch(() => [])) if (n.isDirectory()) names.add(n.name);
      for (const name of names) {
        const group = groupOf(name);
        await group.killAll();
        for (let i = 0; i < 50 && !(await group.remove()); i++) await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
}

async function setFreezer(path: string, state: "FROZEN" | "THAWED"): Promise<boolean> {
  try {
    await writeFile(path, state);
    if (state === "THAWED") return true;
    for (let i = 0; i < 100; i++) {
      if ((await readFile(path, "utf8")).trim() === "FROZEN") return true;
      await new Promise((r) => setTimeout(r, 5));
    }
    return true;
  } catch {
    return false;
  }
}
