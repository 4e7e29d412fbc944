/**
 * The host's process table as the runner needs it (Linux /proc): every
 * process's parent, group, state and resident memory. Used to find what a step
 * or app left running: its process group (unconfined) or its descendants (a
 * sandbox: in a pid namespace orphans are re-parented to the namespace's init,
 * so the tree under the spawned bwrap is everything the sandbox runs).
 */
import { readdir, readFile } from "node:fs/promises";

export interface ProcInfo {
  pid: number;
  ppid: number;
  pgrp: number;
  state: string;
  rssBytes: number;
}

/** Linux's page size on x86_64 and most arm64 kernels; /proc/<pid>/stat reports RSS in pages. */
const PAGE_BYTES = 4096;

/** Every process in /proc (Linux; empty elsewhere). */
export async function readProcesses(): Promise<ProcInfo[]> {
  let names: string[];
  try {
    names = await readdir("/proc");
  } catch {
    return [];
  }
  const infos = await Promise.all(
    names
      .filter((name) => name.charCodeAt(0) >= 48 && name.charCodeAt(0) <= 57)
      .map(async (name): Promise<ProcInfo | undefined> => {
        try {
          const stat = await readFile(`/proc/${name}/stat`, "utf8");
          // "pid (comm) state ppid pgrp session … rss …": comm may hold spaces and parentheses.
          const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
          return { pid: Number(name), state: fields[0]!, ppid: Number(fields[1]), pgrp: Number(fields[2]), rssBytes: Number(fields[21]) * PAGE_BYTES };
        } catch {
          return undefined; // exited while we looked
        }
      }),
  );
  return infos.filter((info): info is ProcInfo => info !== undefined);
}

/** The live (not zombie) descendants of `root` in `all`, root excluded. */
export function descendantsOf(all: ProcInfo[], root: number): ProcInfo[] {
  const children = new Map<number, ProcInfo[]>();
  for (const p of all) {
    const list = children.get(p.ppid);
    if (list) list.push(p);
    else children.set(p.ppid, [p]);
  }
  const out: ProcInfo[] = [];
  const stack = [root];
  const seen = new Set([root]);
  // Iterative: a deep chain of forks must not overflow the stack; `seen` guards against pids reused mid-scan.
  while (stack.length > 0) {
    for (const child of children.get(stack.pop()!) ?? []) {
      if (seen.has(child.pid)) continue;
      seen.add(child.pid);
      if (child.state !== "Z") out.push(child);
      stack.push(child.pid);
    }
  }
  return out;
}
