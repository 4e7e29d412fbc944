/**
 * Child processes of the self-hosted runner: install/build steps and the apps
 * themselves. Each runs as `/bin/sh -c <command>` in its own process group
 * (detached: setsid), with exactly the environment it is given (nothing of the
 * server's own environment), its output split into lines, an optional memory
 * limit, and a stop that ends the whole group.
 *
 * Lines: stdout and stderr are decoded as UTF-8 and split on "\n" as they arrive
 * (linear time; at most MAX_LINE_CHARS characters held per stream). "\r" and ANSI
 * escapes are passed as sent. A line longer than MAX_LINE_CHARS (16 KiB, the log
 * store's limit) is emitted once, as its first MAX_LINE_CHARS characters followed
 * by TRUNCATED_MARKER; the rest of that line is read and dropped. A final line
 * without "\n" is emitted when the stream ends.
 *
 * Memory limit (what works here, measured on this machine's Linux 6.18 with Node
 * 20 and 24): rlimits cannot express an app's memory limit for Node.
 *   - RLIMIT_AS (`prlimit --as`): Node 24 does not even start below ~1.5 GiB
 *     (V8 reserves its address space up front: "Failed to reserve virtual memory
 *     for CodeRange"); Node 20 below ~1 GiB.
 *   - RLIMIT_DATA (`prlimit --data`): Node 24 needs ~580 MiB just to start (the
 *     CodeRange reservation counts as data), so a 256 or 512 MiB limit kills
 *     every Node app at start.
 *   - cgroups (`systemd-run --scope -p MemoryMax=`): no systemd here (not PID 1,
 *     no bus) and the cgroup tree is read-only: unavailable.
 * So the limit is enforced by a watchdog: every MEMORY_SAMPLE_MS the runner sums
 * the resident set size (RSS, from /proc/<pid>/stat) of every live process in the
 * group, and SIGKILLs the whole group once the sum exceeds `memoryMb`; the exit
 * then carries `memoryExceeded: true`. What this does NOT enforce: it is sampled,
 * so a process can exceed the limit for up to one interval (and allocate fast
 * enough in that time to push the machine into swap or the kernel OOM killer);
 * processes that leave the group (a new setsid/setpgid) are not counted; shared
 * pages are counted once per process (the sum can over-count); virtual memory
 * that is reserved but not touched is not counted (that is the point). Linux only
 * (/proc); elsewhere `memoryMb` is ignored.
 *
 * Not a sandbox: the processes run as the server's user, can read what that user
 * can read, and use the network.
 */
import { spawn } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { StringDecoder } from "node:string_decoder";
import { MAX_LINE_CHARS, TRUNCATED_MARKER } from "../../logs/store";

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the memory watchdog killed the group (its RSS went over `memoryMb`). */
  memoryExceeded?: boolean;
  /** Set when the process could not be started at all (e.g. the cwd does not exist). */
  error?: string;
}

export interface SpawnedProcess {
  /** The group leader's pid (also the process group id); -1 when the spawn failed. */
  readonly pid: number;
  /**
   * Resolves when the process (group leader) exited and its output was fully read
   * (both pipes closed, or at most EXIT_DRAIN_MS after the exit when a process left in
   * the group still holds them: its later lines still reach onLine until it ends or is stopped).
   */
  readonly exited: Promise<ProcessExit>;
  /**
   * SIGTERM to the whole process group, SIGKILL to the group after graceMs if any of it
   * is still alive; resolves when the leader exited and the group is empty. Also ends
   * what a finished leader left behind in its group. Safe to call more than once.
   */
  stop(graceMs: number): Promise<ProcessExit>;
}

export interface SpawnOptions {
  /** Run with /bin/sh -c, detached (own process group). */
  command: string;
  cwd: string;
  /** The whole environment; nothing inherited from the server (include PATH). */
  env: Record<string, string>;
  /** Memory limit in MiB: the group's total RSS, enforced by a sampling watchdog (see the module comment). */
  memoryMb?: number;
  /** One call per line, without the newline. */
  onLine(stream: "stdout" | "stderr", text: string): void;
}

/** How often the memory watchdog samples the groups it watches. */
export const MEMORY_SAMPLE_MS = 200;
/** How long `exited` waits for the pipes to close after the leader exited. */
const EXIT_DRAIN_MS = 1000;
const POLL_MS = 25;
/** After SIGKILL, how long stop() waits for the group to disappear before giving up waiting. */
const KILL_WAIT_MS = 5000;
/** Linux's page size on x86_64 and most arm64 kernels; /proc/<pid>/stat reports RSS in pages. */
const PAGE_BYTES = 4096;

export function spawnProcess(options: SpawnOptions): SpawnedProcess {
  let child: ReturnType<typeof spawn>;
  let spawnError: Error | undefined;
  try {
    child = spawn("/bin/sh", ["-c", options.command], {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (error) {
    spawnError = error as Error;
    return failed(spawnError);
  }

  let exitInfo: ProcessExit | undefined;
  let memoryExceeded = false;
  let resolveExited!: (exit: ProcessExit) => void;
  const exited = new Promise<ProcessExit>((resolve) => {
    resolveExited = resolve;
  });

  const out = lineSplitter((text) => options.onLine("stdout", text));
  const err = lineSplitter((text) => options.onLine("stderr", text));
  let openPipes = 2;
  let exitSeen = false;
  let settled = false;
  const settle = () => {
    if (settled || !exitSeen) return;
    settled = true;
    unwatchMemory(pid);
    resolveExited({ ...exitInfo!, ...(memoryExceeded ? { memoryExceeded: true } : {}) });
  };
  const pipeClosed = () => {
    openPipes -= 1;
    if (openPipes === 0) settle();
  };
  child.stdout!.on("data", (chunk: Buffer) => out.write(chunk));
  child.stdout!.on("close", () => {
    out.end();
    pipeClosed();
  });
  child.stderr!.on("data", (chunk: Buffer) => err.write(chunk));
  child.stderr!.on("close", () => {
    err.end();
    pipeClosed();
  });
  child.on("error", (error) => {
    // Only spawn failures reach here (we never send input); no exit event follows them.
    if (exitSeen) return;
    exitSeen = true;
    exitInfo = { code: null, signal: null, error: error.message };
    settle();
  });
  child.on("exit", (code, signal) => {
    if (exitSeen) return;
    exitSeen = true;
    exitInfo = { code, signal };
    if (openPipes === 0) settle();
    else setTimeout(settle, EXIT_DRAIN_MS).unref();
  });

  const pid = child.pid ?? -1;
  if (pid > 0 && options.memoryMb !== undefined && options.memoryMb > 0 && process.platform === "linux") {
    watchMemory(pid, options.memoryMb * 1024 * 1024, () => {
      memoryExceeded = true;
      signalGroup(pid, "SIGKILL");
    });
  }

  let stopping: Promise<ProcessExit> | undefined;
  const stop = (graceMs: number): Promise<ProcessExit> => {
    stopping ??= (async () => {
      if (pid <= 0) return exited;
      if (await groupAlive(pid)) {
        signalGroup(pid, "SIGTERM");
        const deadline = Date.now() + Math.max(0, graceMs);
        while (Date.now() < deadline && (!exitSeen || (await groupAlive(pid)))) await sleep(POLL_MS);
        if (!exitSeen || (await groupAlive(pid))) {
          signalGroup(pid, "SIGKILL");
          const killDeadline = Date.now() + KILL_WAIT_MS;
          while (Date.now() < killDeadline && (!exitSeen || (await groupAlive(pid)))) await sleep(POLL_MS);
        }
      }
      return exited;
    })();
    return stopping;
  };

  return { pid, exited, stop };
}

function failed(error: Error): SpawnedProcess {
  const exit: ProcessExit = { code: null, signal: null, error: error.message };
  return { pid: -1, exited: Promise.resolve(exit), stop: async () => exit };
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Splits a byte stream into lines (see the module comment): linear, and holds at
 * most MAX_LINE_CHARS characters of an unfinished line.
 */
function lineSplitter(emit: (text: string) => void) {
  const decoder = new StringDecoder("utf8");
  let pending = "";
  /** Inside an over-long line whose head was already emitted: drop until the next "\n". */
  let dropping = false;

  const take = (text: string) => {
    let start = 0;
    while (start <= text.length) {
      const newline = text.indexOf("\n", start);
      const end = newline === -1 ? text.length : newline;
      if (!dropping) {
        const room = MAX_LINE_CHARS - pending.length;
        if (end - start > room) {
          let cut = start + room;
          // Do not split a surrogate pair at the cut.
          if (room > 0 && isHighSurrogate(text.charCodeAt(cut - 1))) cut -= 1;
          emit(pending + text.slice(start, cut) + TRUNCATED_MARKER);
          pending = "";
          dropping = true;
        } else {
          pending += text.slice(start, end);
        }
      }
      if (newline === -1) return;
      if (dropping) dropping = false;
      else {
        emit(pending);
        pending = "";
      }
      start = newline + 1;
    }
  };

  return {
    write(chunk: Buffer) {
      take(decoder.write(chunk));
    },
    end() {
      take(decoder.end());
      if (!dropping && pending.length > 0) emit(pending);
      pending = "";
      dropping = false;
    },
  };
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

interface ProcInfo {
  pid: number;
  pgrp: number;
  state: string;
  rssBytes: number;
}

/** Every process in /proc with its group, state and RSS (Linux). */
async function readProcesses(): Promise<ProcInfo[]> {
  let names: string[];
  try {
    names = await readdir("/proc");
  } catch {
    return [];
  }
  const infos = await Promise.all(
    names
      .filter((name) => /^\d+$/.test(name))
      .map(async (name): Promise<ProcInfo | undefined> => {
        try {
          const stat = await readFile(`/proc/${name}/stat`, "utf8");
          // "pid (comm) state ppid pgrp session … rss …": comm may hold spaces and parentheses.
          const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
          return { pid: Number(name), state: fields[0]!, pgrp: Number(fields[2]), rssBytes: Number(fields[21]) * PAGE_BYTES };
        } catch {
          return undefined; // exited while we looked
        }
      }),
  );
  return infos.filter((info): info is ProcInfo => info !== undefined);
}

/**
 * Whether the group still has a live process. Zombies do not count: orphans are
 * reaped by PID 1, which here takes ~1.6 s, and a zombie holds no resources.
 */
async function groupAlive(pgid: number): Promise<boolean> {
  try {
    process.kill(-pgid, 0);
  } catch {
    return false;
  }
  if (process.platform !== "linux") return true;
  const all = await readProcesses();
  return all.some((p) => p.pgrp === pgid && p.state !== "Z");
}

// One shared watchdog for every group with a memory limit: one /proc scan per tick.
const watched = new Map<number, { limitBytes: number; onExceeded: () => void }>();
let watchTimer: ReturnType<typeof setInterval> | undefined;
let sampling = false;

function watchMemory(pgid: number, limitBytes: number, onExceeded: () => void): void {
  watched.set(pgid, { limitBytes, onExceeded });
  watchTimer ??= setInterval(sampleMemory, MEMORY_SAMPLE_MS);
  watchTimer.unref();
}

function unwatchMemory(pgid: number): void {
  watched.delete(pgid);
  if (watched.size === 0 && watchTimer) {
    clearInterval(watchTimer);
    watchTimer = undefined;
  }
}

async function sampleMemory(): Promise<void> {
  if (sampling) return;
  sampling = true;
  try {
    const totals = new Map<number, number>();
    for (const p of await readProcesses()) {
      if (p.state === "Z" || !watched.has(p.pgrp)) continue;
      totals.set(p.pgrp, (totals.get(p.pgrp) ?? 0) + p.rssBytes);
    }
    for (const [pgid, total] of totals) {
      const watch = watched.get(pgid);
      if (watch && total > watch.limitBytes) {
        watched.delete(pgid);
        watch.onExceeded();
      }
    }
  } finally {
    sampling = false;
  }
}
