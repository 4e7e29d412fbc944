/**
 * The runner's sandbox: what confines every build step and app process
 * (bwrap.ts), the limits that hold (cgroups.ts) and the per-project uid
 * (uids.ts), put together once at start.
 *
 * - RUNNER_SANDBOX=on (default): bubblewrap and setpriv must be there and the
 *   server must run as root (it mounts and switches to project uids); a smoke
 *   run at start proves the kernel allows the namespaces. Otherwise the runner
 *   refuses to start, saying what is missing.
 * - RUNNER_SANDBOX=off: steps and apps run unconfined as the server's user
 *   (only for code you trust); a warning at start and in every deployment's
 *   first system line. Limits still hold through cgroups where writable.
 * - Limits: memory, processes and CPU through the cgroup controllers found
 *   writable; memory falls back to the sampling watchdog (processes.ts) when
 *   the memory controller is not writable; open files (RUNNER_NOFILE) and the
 *   largest file (diskGb) are rlimits set by the spawn prelude; disk use of the
 *   work directory is measured by disk.ts.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { accessSync, constants, existsSync, mkdtempSync, rmSync } from "node:fs";
import { chown, mkdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, relative, sep } from "node:path";
import { cacheEnv } from "../build-cache";
import { type BwrapLayout, bwrapArgv, SANDBOX_APP, SANDBOX_CACHE, SANDBOX_HOME, SANDBOX_NPMRC, SANDBOX_PATH } from "./bwrap";
import { type Cgroup, type CgroupLimits, type Cgroups, detectCgroups } from "./cgroups";
import type { UidRange } from "./uids";

export interface SandboxSettings {
  /** RUNNER_SANDBOX: on (default) or off. */
  enabled: boolean;
  /** RUNNER_UID_RANGE (default 200000-299999): the host uids given to projects. */
  uidRange: UidRange;
  /** RUNNER_PIDS_MAX (default 256): processes and threads of one step or app process. */
  pidsMax: number;
  /** RUNNER_NOFILE (default 4096): open files of each process. */
  nofile: number;
}

/** The limits of one step or app process. */
export interface ProcessLimits {
  memoryMb?: number;
  cpuCores?: number;
  /** The disk limit also caps the size of any one file (RLIMIT_FSIZE). */
  diskBytes?: number;
}

/** How processes.ts runs one command confined. */
export interface Jail {
  /** The program and arguments to spawn for `command` with the working directory `cwd` (a host path). */
  argv(command: string, cwd: string): string[];
  /** The host working directory to spawn in (the sandbox changes to its own). */
  spawnCwd(cwd: string): string;
  /** Variables the prelude reads and removes before anything of the deployment runs. */
  preludeEnv: Record<string, string>;
  /** In a pid namespace of its own: its processes are the spawned pid's descendants, and end when its command ends. */
  namespaced: boolean;
  cgroup?: Cgroup;
  /** Whether the kernel holds the memory limit (else the sampling watchdog does). */
  memoryHeld: boolean;
}

export interface Sandbox {
  readonly settings: SandboxSettings;
  readonly confined: boolean;
  readonly cgroups?: Cgroups;
  /** What holds here, one line (start log; every deployment's first system line). */
  describe(): string;
  /** The environment every step and app starts from (PATH, HOME, LANG; npm's global config when the machine has one; the build cache's variables when there is one). */
  baseEnv(workDir: string, cacheDir?: string): Record<string, string>;
  /** A new work directory's src/ and home/ (with home/.cache, where the build cache is mounted), owned by the project's uid, and the passwd/group files of its sandbox. */
  prepare(workDir: string, uid: number): Promise<void>;
  /** Gives what the server wrote under `dir` (an unpacked archive) to the project's uid, without following links. */
  chownTree(dir: string, uid: number): Promise<void>;
  /** A jail for one process: a fresh cgroup with its limits (the caller's spawn removes it). */
  jail(input: JailInput): Promise<Jail | undefined>;
  /** At stop, after every process ended: the runner's cgroups go. */
  close(): Promise<void>;
}

/** One process to confine: its cgroup's name, the project's uid, its work directory and build cache (build-cache.ts), its limits. */
export interface JailInput {
  name: string;
  uid: number;
  workDir: string;
  cacheDir?: string;
  limits: ProcessLimits;
}

export class SandboxUnavailable extends Error {}

/** The name of the runner's cgroups: short, stable per runner id, safe as a directory name. */
export const sandboxKey = (runnerId: string) => createHash("sha256").update(runnerId).digest("hex").slice(0, 12);

/** The spawn prelude (run by /bin/sh as the server, before anything of the deployment): cgroups, rlimits, then exec. */
const PRELUDE = [
  // A newline only: cgroup paths may hold spaces.
  'IFS="\n"',
  'for f in $WSP_CGROUP_PROCS; do echo $$ > "$f" || { echo "could not enter the cgroup $f" >&2; exit 126; }; done',
  'ulimit -n "$WSP_NOFILE" && ulimit -c 0 || exit 126',
  'if [ -n "$WSP_FSIZE_BLOCKS" ]; then ulimit -f "$WSP_FSIZE_BLOCKS" || exit 126; fi',
  "unset WSP_CGROUP_PROCS WSP_NOFILE WSP_FSIZE_BLOCKS IFS",
  'exec "$@"',
].join("\n");

const BASE_PATH = "/usr/local/bin:/usr/bin:/bin";
const MIB = 1024 * 1024;
/** The private /tmp's size cap (it is memory, charged to the memory limit as well). */
const TMP_BYTES = 512 * MIB;

/** `name` on the server's PATH (the system's directories when PATH is unset). */
function findExecutable(name: string, path: string | undefined): string | undefined {
  for (const dir of (path ?? "/usr/local/bin:/usr/bin:/bin:/usr/sbin").split(":")) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // next
    }
  }
  return undefined;
}

/** The global npmrc the machine's npm reads (its CA file, registry, proxy), made visible as /etc/npmrc inside. */
function machineNpmrc(env: NodeJS.ProcessEnv): string | undefined {
  const candidates = [env.npm_config_globalconfig, env.NPM_CONFIG_GLOBALCONFIG, "/usr/local/etc/npmrc", "/usr/etc/npmrc", "/etc/npmrc"];
  return candidates.find((p): p is string => !!p && existsSync(p));
}

export async function createSandbox(settings: SandboxSettings, key: string, env: NodeJS.ProcessEnv = process.env): Promise<Sandbox> {
  const cgroups = await detectCgroups(key);
  // Groups an earlier run of this runner left (a killed server): their processes died with it (--die-with-parent), the groups go.
  await cgroups?.sweep();
  const npmrc = machineNpmrc(env);
  const npmEnv: Record<string, string> = npmrc ? { npm_config_globalconfig: settings.enabled ? SANDBOX_NPMRC : npmrc } : {};
  const toolchain = dirname(process.execPath);

  let layoutBase: Omit<BwrapLayout, "uid" | "gid" | "src" | "home" | "passwd" | "group"> | undefined;
  if (settings.enabled) {
    const bwrap = findExecutable("bwrap", env.PATH);
    const setpriv = findExecutable("setpriv", env.PATH);
    const missing = !bwrap
      ? "bubblewrap (bwrap) is not installed (apt-get install bubblewrap)"
      : !setpriv
        ? "setpriv (util-linux) is not installed"
        : undefined;
    if (missing)
      throw new SandboxUnavailable(
        `The runner's sandbox cannot start: ${missing}. Set RUNNER_SANDBOX=off to run builds and apps unconfined (only code you trust).`,
      );
    if (process.getuid?.() !== 0)
      throw new SandboxUnavailable(
        "The runner's sandbox needs root (it mounts a private file system for each process and switches to a per-project uid). Run the runner as root, or set RUNNER_SANDBOX=off (only code you trust); see docs/runner.md#sandbox.",
      );
    layoutBase = { bwrap: bwrap!, setpriv: setpriv!, toolchain, npmrc, tmpBytes: TMP_BYTES };
    await smokeTest(layoutBase, settings.uidRange.first);
  }

  const layoutOf = (workDir: string, uid: number, cache: string | undefined): BwrapLayout => ({
    ...layoutBase!,
    uid,
    gid: uid,
    src: join(workDir, "src"),
    home: join(workDir, "home"),
    cache,
    passwd: join(workDir, "passwd"),
    group: join(workDir, "group"),
  });

  /** A host path inside the work directory's src/ or home/ as the sandbox sees it. */
  const inside = (workDir: string, hostPath: string): string => {
    for (const [host, mounted] of [
      [join(workDir, "src"), SANDBOX_APP],
      [join(workDir, "home"), SANDBOX_HOME],
    ] as const) {
      if (hostPath === host) return mounted;
      if (hostPath.startsWith(host + sep)) return `${mounted}/${relative(host, hostPath).split(sep).join("/")}`;
    }
    throw new Error(`${hostPath} is not inside the work directory`);
  };

  const held = cgroups?.controllers ?? [];
  const describe = () => {
    const parts = [
      settings.enabled
        ? `sandbox on (bubblewrap: own uid per project, private file system, pid/ipc/uts namespaces; host network)`
        : "WARNING: RUNNER_SANDBOX=off: builds and apps run unconfined as the server's user and can read everything it can (only for code you trust)",
      `memory ${held.includes("memory") ? "cgroup" : "watchdog (sampled RSS, fallback)"}`,
      `processes ${held.includes("pids") ? `cgroup (${settings.pidsMax})` : "not limited (no writable pids cgroup)"}`,
      `CPU ${held.includes("cpu") ? "cgroup quota" : "not limited (no writable cpu cgroup)"}`,
      `open files ${settings.nofile}`,
      "disk checked",
    ];
    return `Limits: ${parts.join("; ")}`;
  };

  return {
    settings,
    confined: settings.enabled,
    cgroups,
    describe,
    baseEnv(workDir, cacheDir) {
      const cache = cacheDir ? cacheEnv(settings.enabled ? SANDBOX_CACHE : cacheDir) : {};
      return settings.enabled
        ? { PATH: SANDBOX_PATH, HOME: SANDBOX_HOME, LANG: "C.UTF-8", ...npmEnv, ...cache }
        : { PATH: `${toolchain}:${env.PATH ?? BASE_PATH}`, HOME: join(workDir, "home"), LANG: "C.UTF-8", ...npmEnv, ...cache };
    },
    async prepare(workDir, uid) {
      const src = join(workDir, "src");
      const home = join(workDir, "home");
      await mkdir(src, { mode: 0o700 });
      await mkdir(home, { mode: 0o700 });
      // Made here, the project's: bwrap would make the build cache's mount point as root.
      await mkdir(join(home, ".cache"), { mode: 0o700 });
      if (!settings.enabled) return;
      await chown(src, uid, uid);
      await chown(home, uid, uid);
      await chown(join(home, ".cache"), uid, uid);
      // Names for the sandbox's user (tools that look up their user: npm, git, ssh); root-owned, read-only inside.
      await writeFile(join(workDir, "passwd"), `root:x:0:0::/nonexistent:/usr/sbin/nologin\napp:x:${uid}:${uid}::${SANDBOX_HOME}:/bin/sh\n`, { mode: 0o644 });
      await writeFile(join(workDir, "group"), `root:x:0:\napp:x:${uid}:\n`, { mode: 0o644 });
    },
    close: async () => cgroups?.close(),
    async chownTree(dir, uid) {
      if (!settings.enabled) return;
      // chown -R does not follow links (-P is its default); a child process keeps 100,000 entries off the event loop.
      await run("chown", ["-R", "-P", `${uid}:${uid}`, "--", dir]);
    },
    async jail({ name, uid, workDir, cacheDir, limits }) {
      if (!settings.enabled && !cgroups) return undefined;
      const cgroupLimits: CgroupLimits = {
        memoryBytes: limits.memoryMb ? limits.memoryMb * MIB : undefined,
        pidsMax: settings.pidsMax,
        cpuCores: limits.cpuCores,
      };
      const cgroup = cgroups ? await cgroups.create(name, cgroupLimits) : undefined;
      const preludeEnv: Record<string, string> = {
        WSP_CGROUP_PROCS: (cgroup?.procsFiles ?? []).join("\n"),
        WSP_NOFILE: String(settings.nofile),
        WSP_FSIZE_BLOCKS: limits.diskBytes ? String(Math.ceil(limits.diskBytes / 512)) : "",
      };
      const prelude = ["/bin/sh", "-c", PRELUDE, "wsp-prelude"];
      return {
        argv: (command, cwd) =>
          settings.enabled
            ? [...prelude, ...bwrapArgv(layoutOf(workDir, uid, cacheDir), inside(workDir, cwd), command)]
            : [...prelude, "/bin/sh", "-c", command],
        spawnCwd: (cwd) => (settings.enabled ? "/" : cwd),
        preludeEnv,
        namespaced: settings.enabled,
        cgroup,
        memoryHeld: !!cgroup?.controllers.includes("memory"),
      };
    },
  };
}

function run(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      if (stderr.length < 4096) stderr += chunk.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`${command} failed (${code}): ${stderr.trim()}`))));
  });
}

/** One confined `true` at start: proves bwrap, setpriv and the namespaces work on this kernel before a deployment depends on them. */
async function smokeTest(base: Omit<BwrapLayout, "uid" | "gid" | "src" | "home" | "passwd" | "group">, uid: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "wsp-sandbox-check-"));
  try {
    for (const sub of ["src", "home"]) await mkdir(join(dir, sub));
    await writeFile(join(dir, "passwd"), "");
    await writeFile(join(dir, "group"), "");
    const layout: BwrapLayout = {
      ...base,
      uid,
      gid: uid,
      src: join(dir, "src"),
      home: join(dir, "home"),
      passwd: join(dir, "passwd"),
      group: join(dir, "group"),
    };
    const [cmd, ...args] = bwrapArgv(layout, SANDBOX_APP, `test "$(id -u)" = ${uid}`);
    await run(cmd!, args);
  } catch (error) {
    throw new SandboxUnavailable(
      `The runner's sandbox does not work on this machine: ${(error as Error).message}. Set RUNNER_SANDBOX=off to run unconfined (only code you trust).`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
