/**
 * The disk limit (a project's `diskGb`): what a deployment's work directory
 * holds, measured by `du` in a child process (a node_modules of 50,000 files is
 * walked off the server's event loop) every few seconds while a build runs
 * (DISK_BUILD_CHECK_MS) and while its app runs (DISK_APP_CHECK_MS). There are
 * no per-uid quotas on these file systems, so this is a check, not a wall: a
 * writer can exceed the limit by what it writes between two checks (one file
 * can never exceed it: RLIMIT_FSIZE is the same figure), and is then stopped
 * with the reason recorded.
 */
import { spawn } from "node:child_process";

export const DISK_BUILD_CHECK_MS = 2_000;
export const DISK_APP_CHECK_MS = 10_000;

/** Bytes the directories use (allocated blocks, hard links once), links not followed, one file system. */
export function diskUsage(paths: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn("du", ["-s", "-x", "-k", "-c", "--", ...paths], { stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      if (out.length < 65_536) out += chunk.toString();
    });
    child.on("error", reject);
    // du exits 1 when a file vanished mid-walk: its total still counts what it saw.
    child.on("close", () => {
      const total = out.trimEnd().split("\n").at(-1)?.split("\t")[0];
      if (total && /^\d+$/.test(total)) resolve(Number(total) * 1024);
      else reject(new Error("du gave no total"));
    });
  });
}

/** Checks `paths` every `everyMs` and calls onExceeded once with the usage over `limitBytes`; returns the stop. */
export function watchDisk(paths: string[], limitBytes: number, everyMs: number, onExceeded: (usedBytes: number) => void): () => void {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const tick = async () => {
    if (stopped) return;
    const used = await diskUsage(paths).catch(() => 0);
    if (stopped) return;
    if (used > limitBytes) {
      stopped = true;
      onExceeded(used);
      return;
    }
    timer = setTimeout(tick, everyMs);
    timer.unref();
  };
  timer = setTimeout(tick, everyMs);
  timer.unref();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

export const formatGb = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(bytes >= 10 * 1024 ** 3 ? 0 : 1)} GB`;
