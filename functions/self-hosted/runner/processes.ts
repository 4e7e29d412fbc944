/**
 * Child processes of the self-hosted runner: install/build steps and the apps
 * themselves. Each runs as `/bin/sh -c <command>` with exactly the environment
 * it is given (nothing of the server's own environment), its output split into
 * lines, and a stop that ends everything it started.
 *
 * Confined (a Jail from sandbox/sandbox.ts, the default): the spawned program is
 * a shell prelude that puts itself into the process's cgroup and sets its
 * rlimits, then bubblewrap, then setpriv, then the command (see
 * sandbox/bwrap.ts). Its processes live in a pid namespace of their own: they
 * are the spawned pid's descendants, they all end when the command ends (the
 * namespace's init exits), and the memory, process and CPU limits are the
 * kernel's (a setsid child is still in the cgroup, counted and killed).
 * Unconfined (RUNNER_SANDBOX=off, or the unit tests): the command runs in its
 * own process group (detached: setsid), under the cgroup when one is given.
 *
 * Lines: stdout and stderr are decoded as UTF-8 and split on "\n" as they arrive
 * (linear time; at most MAX_LINE_CHARS characters held per stream). "\r" and ANSI
 * escapes are passed as sent. A line longer than MAX_LINE_CHARS (16 KiB, the log
 * store's limit) is emitted once, as its first MAX_LINE_CHARS characters followed
 * by TRUNCATED_MARKER; the rest of that line is read and dropped. A final line
 * without "\n" is emitted when the stream ends.
 *
 * Memory limit without a writable memory cgroup (the fallback): rlimits cannot
 * express it for Node (RLIMIT_AS: V8 reserves ~1.5 GiB of address space at
 * start; RLIMIT_DATA: Node 24 needs ~580 MiB of it to start), so a watchdog
 * samples, every MEMORY_SAMPLE_MS, the resident set size of every process of
 * the group (or of the sandbox's tree) and kills it all over `memoryMb`. It is
 * sampled (a fast allocator can overshoot for one interval), counts shared
 * pages once per process, and, unconfined, misses processes that leave the
 * group. With the memory cgroup, the kernel's OOM killer holds the limit and
 * the exit says `memoryExceeded` when it acted.
 */
import { spawn } from "node:child_process";
import { constants as osConstants } from "node:os";
import { StringDecoder } from "node:string_decoder";
import { MAX_LINE_CHARS, TRUNCATED_MARKER } from "../../logs/store";
import { descendantsOf, type ProcInfo, readProcesses } from "./proc-table";
import type { Jail } from "./sandbox/sandbox";

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the memory limit was reached: the kernel's OOM killer acted in the cgroup, or the watchdog killed the processes. */
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
  /** A host path (confined: inside the work directory's src/ or home/, where the sandbox changes to). */
  cwd: string;
  /** Confinement and limits (sandbox/sandbox.ts); none: unconfined, the memory limit by the watchdog. */
  jail?: Jail;
  /** Written to a pipe the process reads as fd 3, then closed (a credential: never in its environment or argv). */
  secret?: string;
  /** The whole environment; nothing inherited from the server (include PATH). */
  env: Record<string, string>;
  /** Memory limit in MiB; without a jail holding it, enforced by the sampling watchdog (see the module comment). */
  memoryMb?: number;
  /**
   * One call per line, without the newline. `false`: over the log limit. The
   * process's output is then not read for THROTTLE_MS (its writes block once the
   * pipe is full: it is slowed, not just muted) and the rest of what was already
   * read is counted in onSkipped without being split into lines.
   */
  onLine(stream: "stdout" | "stderr", text: string): unknown;
  /** Lines skipped unread while over the log limit. */
  onSkipped?(lines: number): void;
}

/** How often the memory watchdog samples the groups it watches. */
export const MEMORY_SAMPLE_MS = 200;
/** How long a process's output is left unread once it went over the log limit. */
export const THROTTLE_MS = 100;
/** How long `exited` waits for the pipes to close after the leader exited. */
const EXIT_DRAIN_MS = 1000;
const POLL_MS = 25;
/** After SIGKILL, how long stop() waits for the group to disappear before giving up waiting. */
const KILL_WAIT_MS = 5000;

export function spawnProcess(options: SpawnOptions): SpawnedProcess {
  const { jail } = options;
  let child: ReturnType<typeof spawn>;
  try {
    const [program, ...args] = jail ? jail.argv(options.command, options.cwd) : ["/bin/sh", "-c", options.command];
    child = spawn(program!, args, {
      cwd: jail ? jail.spawnCwd(options.cwd) : options.cwd,
      env: jail ? { ...options.env, ...jail.preludeEnv } : options.env,
      detached: true,
      stdio: options.secret === undefined ? ["ignore", "pipe", "pipe"] : ["ignore", "pipe", "pipe", "pipe"],
    });
    if (options.secret !== undefined) {
      const pipe = child.stdio[3] as NodeJS.WritableStream & { on(e: "error", f: () => void): void };
      pipe.on("error", () => {}); // the process may exit without reading it
      pipe.end(options.secret);
    }
  } catch (error) {
    void jail?.cgroup?.remove();
    return failed(error as Error);
  }

  let exitInfo: ProcessExit | undefined;
  let memoryExceeded = false;
  let resolveExited!: (exit: ProcessExit) => void;
  const exited = new Promise<ProcessExit>((resolve) => {
    resolveExited = resolve;
  });

  // Over the log limit: neither pipe is read for a while, so the process blocks on its writes.
  let throttled = false;
  const throttle = () => {
    if (throttled) return;
    throttled = true;
    child.stdout!.pause();
    child.stderr!.pause();
    setTimeout(() => {
      throttled = false;
      child.stdout!.resume();
      child.stderr!.resume();
    }, THROTTLE_MS).unref();
  };
  const skipped = (lines: number) => options.onSkipped?.(lines);
  const out = lineSplitter((text) => options.onLine("stdout", text), throttle, skipped);
  const err = lineSplitter((text) => options.onLine("stderr", text), throttle, skipped);
  let openPipes = 2;
  let exitSeen = false;
  let settled = false;
  const settle = async () => {
    if (settled || !exitSeen) return;
    settled = true;
    unwatchMemory(pid);
    if (jail?.cgroup && (await jail.cgroup.memoryExceeded())) memoryExceeded = true;
    resolveExited({ ...exitInfo!, ...(memoryExceeded ? { memoryExceeded: true } : {}) });
  };
  const pipeClosed = () => {
    openPipes -= 1;
    if (openPipes === 0) void settle();
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
    void settle();
  });
  child.on("exit", (code, signal) => {
    if (exitSeen) return;
    exitSeen = true;
    exitInfo = jail?.namespaced ? unwrapSandboxExit(code, signal) : { code, signal };
    if (openPipes === 0) void settle();
    else setTimeout(() => void settle(), EXIT_DRAIN_MS).unref();
  });

  const pid = child.pid ?? -1;
  /** What of it is alive now: the sandbox's tree, else the process group; plus whatever the cgroup holds. */
  const members = async (options: { withoutInit?: boolean } = {}): Promise<number[]> => {
    const found = new Set<number>();
    if (jail?.namespaced) {
      // Once bwrap exited, what is left of the sandbox (a namespace still being torn down) is in its cgroup: one file, not /proc.
      if (exitSeen && jail.cgroup) return jail.cgroup.pids();
      // bwrap's init (the spawned bwrap's child) is left out for a SIGTERM: it would end the namespace at once.
      if (pid > 0) for (const p of descendantsOf(await readProcesses(), pid)) if (!(options.withoutInit && p.ppid === pid)) found.add(p.pid);
      return [...found];
    }
    // Unconfined: the process group, and what left it but not the cgroup.
    if (pid > 0 && (await groupAlive(pid))) found.add(-pid);
    for (const p of (await jail?.cgroup?.pids()) ?? []) found.add(p);
    return [...found];
  };
  const signalAll = (list: number[], signal: NodeJS.Signals) => {
    for (const target of list) signalPid(target, signal);
  };

  if (pid > 0 && options.memoryMb !== undefined && options.memoryMb > 0 && process.platform === "linux" && !jail?.memoryHeld) {
    watchMemory(pid, jail?.namespaced ? "tree" : "group", options.memoryMb * 1024 * 1024, () => {
      memoryExceeded = true;
      void members().then((list) => signalAll([...list, pid], "SIGKILL"));
    });
  }

  let stopping: Promise<ProcessExit> | undefined;
  const stop = (graceMs: number): Promise<ProcessExit> => {
    stopping ??= (async () => {
      if (pid <= 0) return exited;
      const leftovers = async () => !exitSeen || (await members()).length > 0;
      if (await leftovers()) {
        // Confined, SIGTERM goes to the app's processes, not to bwrap (which would not pass it on).
        signalAll(await members({ withoutInit: true }), "SIGTERM");
        const deadline = Date.now() + Math.max(0, graceMs);
        while (Date.now() < deadline && (await leftovers())) await sleep(POLL_MS);
        if (await leftovers()) {
          signalAll([jail?.namespaced ? pid : -pid, ...(await members())], "SIGKILL");
          await jail?.cgroup?.killAll();
          const killDeadline = Date.now() + KILL_WAIT_MS;
          while (Date.now() < killDeadline && (await leftovers())) await sleep(POLL_MS);
        }
      }
      const exit = await exited;
      await removeCgroup(jail);
      return exit;
    })();
    return stopping;
  };

  return { pid, exited, stop };
}

/** bwrap exits with its command's code, or 128 + the signal that killed it: the exit as the command's. */
function unwrapSandboxExit(code: number | null, signal: NodeJS.Signals | null): ProcessExit {
  if (code !== null && code > 128 && code <= 128 + 64) {
    const name = Object.entries(osConstants.signals).find(([, n]) => n === code - 128)?.[0];
    if (name) return { code: null, signal: name as NodeJS.Signals };
  }
  return { code, signal };
}

/** The group is empty right after its last process ended; a few tries cover the kernel's bookkeeping. */
async function removeCgroup(jail: Jail | undefined): Promise<void> {
  if (!jail?.cgroup) return;
  for (let i = 0; i < 100; i++) {
    if (await jail.cgroup.remove()) return;
    await sleep(POLL_MS);
  }
}

function failed(error: Error): SpawnedProcess {
  const exit: ProcessExit = { code: null, signal: null, error: error.message };
  return { pid: -1, exited: Promise.resolve(exit), stop: async () => exit };
}

/** A pid, or a process group as -pgid. */
function signalPid(target: number, signal: NodeJS.Signals): void {
  try {
    process.kill(target, signal);
  } catch {
    // ESRCH: already gone.
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Splits a byte stream into lines (see the module comment): linear, and holds at
 * most MAX_LINE_CHARS characters of an unfinished line.
 */
function lineSplitter(emit: (text: string) => unknown, onRefused: () => void, onSkipped: (lines: number) => void) {
  const decoder = new StringDecoder("utf8");
  let pending = "";
  /** Inside an over-long line whose head was already emitted: drop until the next "\n". */
  let dropping = false;
  /** Inside a line skipped unread (over the log limit): it is counted when its "\n" comes. */
  let skipping = false;

  /** Counts the lines of text[from…] without making them (over the log limit). */
  const skipRest = (text: string, from: number) => {
    let lines = 0;
    let next = text.indexOf("\n", from);
    let after = from;
    while (next !== -1) {
      lines++;
      after = next + 1;
      next = text.indexOf("\n", after);
    }
    skipping = after < text.length;
    if (lines > 0) onSkipped(lines);
  };

  const take = (text: string) => {
    let start = 0;
    if (skipping) {
      const newline = text.indexOf("\n");
      if (newline === -1) return;
      skipping = false;
      onSkipped(1);
      start = newline + 1;
    }
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
        const kept = emit(pending);
        pending = "";
        if (kept === false) {
          onRefused();
          skipRest(text, newline + 1);
          return;
        }
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
      if (!dropping && !skipping && pending.length > 0) emit(pending);
      pending = "";
      dropping = false;
      skipping = false;
    },
  };
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
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

// One shared watchdog for every process with a memory limit the kernel does not hold: one /proc scan per tick.
const watched = new Map<number, { scope: "group" | "tree"; limitBytes: number; onExceeded: () => void }>();
let watchTimer: ReturnType<typeof setInterval> | undefined;
let sampling = false;

function watchMemory(pid: number, scope: "group" | "tree", limitBytes: number, onExceeded: () => void): void {
  watched.set(pid, { scope, limitBytes, onExceeded });
  watchTimer ??= setInterval(sampleMemory, MEMORY_SAMPLE_MS);
  watchTimer.unref();
}

function unwatchMemory(pid: number): void {
  watched.delete(pid);
  if (watched.size === 0 && watchTimer) {
    clearInterval(watchTimer);
    watchTimer = undefined;
  }
}

async function sampleMemory(): Promise<void> {
  if (sampling) return;
  sampling = true;
  try {
    const all = await readProcesses();
    for (const [pid, watch] of watched) {
      const members: ProcInfo[] = watch.scope === "tree" ? descendantsOf(all, pid) : all.filter((p) => p.pgrp === pid && p.state !== "Z");
      const total = members.reduce((sum, p) => sum + p.rssBytes, 0);
      if (total > watch.limitBytes) {
        watched.delete(pid);
        watch.onExceeded();
      }
    }
  } finally {
    sampling = false;
  }
}
