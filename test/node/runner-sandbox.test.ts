/**
 * The sandbox's primitives (functions/self-hosted/runner/sandbox/), with real
 * bubblewrap, setpriv and cgroups: what a confined process sees, who it is, and
 * that its limits and its stop hold for everything it starts (setsid included).
 * The end-to-end cases through deployments are in test/node/sandbox/.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpawnOptions, spawnProcess } from "../../functions/self-hosted/runner/processes";
import { createSandbox, type Sandbox, SandboxUnavailable } from "../../functions/self-hosted/runner/sandbox/sandbox";

const UID = 299_901;
const settings = { enabled: true, uidRange: { first: 299_900, last: 299_999 }, pidsMax: 64, nofile: 512 };
let sandbox: Sandbox;
let workDir: string;
const root = mkdtempSync(join(tmpdir(), "ws-sandbox-"));

beforeAll(async () => {
  sandbox = await createSandbox(settings, `test${process.pid}`);
  workDir = join(root, "work");
  mkdirSync(workDir, { mode: 0o700 });
  await sandbox.prepare(workDir, UID);
  writeFileSync(join(root, "server-secret"), "canary-server-secret", { mode: 0o600 });
});
afterAll(async () => {
  await sandbox?.close();
  rmSync(root, { recursive: true, force: true });
});

/** Runs `command` confined in the work directory's src/; its lines and exit. */
async function confined(command: string, opts: { memoryMb?: number; env?: Record<string, string>; stopAfterMs?: number } = {}) {
  const lines: string[] = [];
  const jail = await sandbox.jail({ name: `t${Date.now()}${Math.random().toString(36).slice(2, 6)}`, uid: UID, workDir, limits: { memoryMb: opts.memoryMb } });
  const spawnOptions: SpawnOptions = {
    command,
    cwd: join(workDir, "src"),
    env: { ...sandbox.baseEnv(workDir), ...opts.env },
    jail,
    memoryMb: opts.memoryMb,
    onLine: (_stream, text) => lines.push(text),
  };
  const proc = spawnProcess(spawnOptions);
  if (opts.stopAfterMs !== undefined) setTimeout(() => void proc.stop(500), opts.stopAfterMs);
  const exit = await proc.exited;
  await proc.stop(0);
  return { exit, lines, jail: jail!, pid: proc.pid };
}

describe("runner sandbox", () => {
  it("runs as the project's uid with no capabilities, in /app, seeing only its own file system and processes", async () => {
    const { exit, lines } = await confined(
      [
        "id -u; id -g; id -G; pwd; echo $HOME",
        "grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status",
        "ls /",
        `test -e ${root} && echo SEES_ROOT || echo NO_ROOT`,
        "ls /proc | grep -c '^[0-9]'",
        "cat /proc/1/environ >/dev/null 2>&1 && echo READ_INIT_ENV || echo NO_INIT_ENV",
        "node -e 'console.log(process.version)'",
        "touch written",
      ].join("; "),
    );
    expect(exit.code).toBe(0);
    expect(lines.slice(0, 5)).toEqual([String(UID), String(UID), String(UID), "/app", "/home/app"]);
    expect(lines).toContain("CapEff:\t0000000000000000");
    expect(lines).toContain("CapBnd:\t0000000000000000");
    expect(lines).toContain("NoNewPrivs:\t1");
    expect(lines).toContain("NO_ROOT");
    expect(lines).toContain("NO_INIT_ENV");
    expect(lines).toContain(process.version);
    const listed = lines.slice(lines.indexOf("/home/app") + 4, lines.indexOf("NO_ROOT"));
    expect(listed.sort()).toEqual(["app", "bin", "dev", "etc", "home", "lib", "lib64", "opt", "proc", "sbin", "tmp", "usr"]);
    // Only the sandbox's own processes (its init, the shell, ls, grep).
    expect(Number(lines[lines.indexOf("NO_ROOT") + 1])).toBeLessThan(8);
    const written = statSync(join(workDir, "src", "written"));
    expect([written.uid, written.gid]).toEqual([UID, UID]);
  });

  it("the environment is exactly what it is given: nothing of the server's", async () => {
    process.env.WSP_TEST_SERVER_CANARY = "canary-in-server-env";
    try {
      const { lines } = await confined("env", { env: { GIVEN: "yes" } });
      expect(lines).toContain("GIVEN=yes");
      expect(lines.join("\n")).not.toContain("canary-in-server-env");
      expect(lines.some((l) => l.startsWith("WSP_"))).toBe(false);
    } finally {
      delete process.env.WSP_TEST_SERVER_CANARY;
    }
  });

  it("a memory hog that left its session is killed by the kernel at the limit, and the exit says so", async () => {
    const { exit } = await confined(`setsid node -e 'const a=[];for(;;)a.push(Buffer.alloc(1<<20,1))' & wait`, { memoryMb: 96 });
    expect(exit.memoryExceeded).toBe(true);
  });

  it("a fork bomb stops at the pids limit and ends with its command", async () => {
    const started = Date.now();
    const { exit, lines } = await confined("for i in $(seq 1 200); do sleep 30 & done; echo done");
    expect(lines.join("\n")).toMatch(/fork|Resource temporarily unavailable/i);
    // The shell gives up at the first refused fork; its namespace, and every sleep in it, ends with it.
    expect(exit.code).not.toBeNull();
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it("stop ends everything it started, setsid and double-forked children included, and removes its cgroup", async () => {
    const { jail } = await confined("(setsid sh -c 'sleep 60 & sleep 60') & (sh -c 'sleep 60 &') ; sleep 60", { stopAfterMs: 500 });
    expect(await jail.cgroup!.pids()).toEqual([]);
    const groupDir = jail.cgroup!.procsFiles[0]!.replace(/\/cgroup\.procs$/, "");
    expect(() => statSync(groupDir)).toThrow();
  });

  it("open files are capped (RUNNER_NOFILE)", async () => {
    const { lines } = await confined("ulimit -n");
    expect(lines).toEqual(["512"]);
  });

  it("refuses to start without bubblewrap on PATH, saying how to fix it", async () => {
    await expect(createSandbox(settings, "nobwrap", { PATH: "/nonexistent" })).rejects.toThrow(SandboxUnavailable);
    await expect(createSandbox(settings, "nobwrap", { PATH: "/nonexistent" })).rejects.toThrow("apt-get install bubblewrap");
  });

  it("leaves no group behind once its processes ended", async () => {
    const dirs = readdirSync("/sys/fs/cgroup/pids").filter((n) => n.startsWith(`wsp-test${process.pid}`));
    expect(dirs).toHaveLength(1);
    for (const d of dirs) expect(readdirSync(join("/sys/fs/cgroup/pids", d), { withFileTypes: true }).filter((e) => e.isDirectory())).toEqual([]);
  });
});
