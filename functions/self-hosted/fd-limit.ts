/**
 * Raises this process's open-file limit (RLIMIT_NOFILE) at start, best effort.
 *
 * Every connection is a descriptor, so the soft limit bounds how many clients
 * the listener (API and edge) can hold at once. Node has no setrlimit; util-linux's
 * `prlimit --pid` sets it on a running process. The soft limit is raised to the
 * hard limit (allowed to any process); when running as root, the hard limit too,
 * up to RAISED_HARD_LIMIT (and the kernel's fs.nr_open), as systemd's
 * LimitNOFILE would. Apps and builds the runner starts inherit the limit.
 * Linux only: elsewhere, or without prlimit, the limit is left as it is.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

/** The hard limit a root process raises itself to (when the kernel allows it). */
export const RAISED_HARD_LIMIT = 1_048_576;

export interface FdLimits {
  soft: number;
  hard: number;
}

/** `Max open files  20000  20000  files` in /proc/<pid>/limits; null when unreadable or unlimited. */
export function readFdLimits(pid: number | "self" = "self"): FdLimits | null {
  try {
    const line = readFileSync(`/proc/${pid}/limits`, "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const m = line?.match(/^Max open files\s+(\d+)\s+(\d+)/);
    return m ? { soft: Number(m[1]), hard: Number(m[2]) } : null;
  } catch {
    return null;
  }
}

function nrOpen(): number {
  try {
    const n = Number(readFileSync("/proc/sys/fs/nr_open", "utf8").trim());
    return Number.isSafeInteger(n) && n > 0 ? n : 0;
  } catch {
    return 0;
  }
}

function setLimits(pid: number, soft: number, hard: number): string | null {
  try {
    execFileSync("prlimit", [`--pid=${pid}`, `--nofile=${soft}:${hard}`], { stdio: ["ignore", "ignore", "pipe"], timeout: 5_000 });
    return null;
  } catch (e) {
    const err = e as NodeJS.ErrnoException & { stderr?: Buffer };
    if (err.code === "ENOENT") return "prlimit (util-linux) is not installed";
    return err.stderr?.toString().trim().split("\n")[0] || err.message;
  }
}

/**
 * Raises the limit of `pid` (default: this process) when it can be raised; returns one line to print when it
 * changed, or when a soft limit under the hard one could not be raised; else null (quiet: already at the most
 * allowed, e.g. root without CAP_SYS_RESOURCE in a container whose hard limit is the soft one).
 */
export function raiseFdLimit(pid = process.pid): string | null {
  if (process.platform !== "linux") return null;
  const before = readFdLimits(pid);
  if (!before) return null;
  const root = process.getuid?.() === 0;
  const ceiling = Math.min(RAISED_HARD_LIMIT, nrOpen() || RAISED_HARD_LIMIT);
  const targets: FdLimits[] = [];
  if (root && before.hard < ceiling) targets.push({ soft: ceiling, hard: ceiling });
  if (before.soft < before.hard) targets.push({ soft: before.hard, hard: before.hard });
  let failure: string | null = null;
  for (const t of targets) {
    failure = setLimits(pid, t.soft, t.hard);
    if (failure === null) break;
  }
  const after = readFdLimits(pid) ?? before;
  if (after.soft > before.soft) return `Open-file limit raised from ${before.soft} to ${after.soft} (hard ${after.hard}).`;
  if (before.soft < before.hard) return `Open-file limit stays ${before.soft} (hard ${before.hard}): could not raise it (${failure ?? "unchanged"}).`;
  return null;
}
