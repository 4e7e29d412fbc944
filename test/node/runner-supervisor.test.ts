/**
 * The runner's supervisor (functions/self-hosted/runner/supervisor.ts) and the
 * static-site server (static-server.ts), with real child processes from
 * test/fixtures/runner: launch until the app answers HTTP, the reasons of failed
 * launches, abort, crash restarts with backoff on the same port, giving up,
 * stop with grace, stopAll; and the static server's files, types, 404s,
 * traversal refusals, HEAD and 405. Every test checks by pid that nothing is left.
 */
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { NewLogLine } from "../../functions/logs/store";
import { startStaticServer } from "../../functions/self-hosted/runner/static-server";
import { createSupervisor } from "../../functions/self-hosted/runner/supervisor";
import type { AppSpec, ProcessSpec, RestartPolicy, Supervisor, SupervisorDeps } from "../../functions/self-hosted/runner/types";
import { useCleanups } from "../support/cleanups";
import { baseEnv, FIXTURES, isAlive, nodeCommand, waitFor } from "../fixtures/runner/helpers";

const { cleanups, tempDir } = useCleanups("ws-runner-");

const supervisors: Supervisor[] = [];
afterEach(async () => {
  await Promise.all(supervisors.splice(0).map((s) => s.stopAll()));
});

let counter = 0;
function setup(options: { healthTimeoutMs?: number; stopGraceMs?: number; restart?: RestartPolicy; smokeWindowMs?: number } = {}) {
  const lines: NewLogLine[] = [];
  const restarts: { attempt: number; reason: string }[] = [];
  const giveUps: string[] = [];
  const deps: SupervisorDeps = {
    log: (line) => lines.push(line) > 0,
    healthTimeoutMs: options.healthTimeoutMs ?? 15_000,
    smokeWindowMs: options.smokeWindowMs,
    stopGraceMs: options.stopGraceMs ?? 1000,
    onRestart: (_spec, attempt, reason) => restarts.push({ attempt, reason }),
    onGiveUp: (_spec, reason) => giveUps.push(reason),
    restart: options.restart,
  };
  const supervisor = createSupervisor(deps);
  supervisors.push(supervisor);
  /** Pids the supervisor reported starting ("Started web (pid N)"). */
  const pids = () => lines.flatMap((l) => (l.stream === "system" && /\(pid (\d+)\)/.test(l.message) ? [Number(/\(pid (\d+)\)/.exec(l.message)![1])] : []));
  return { supervisor, lines, restarts, giveUps, pids };
}

function appSpec(processes: Partial<ProcessSpec>[], extra: { memoryMb?: number; healthPath?: string } = {}): AppSpec {
  counter += 1;
  return {
    deploymentId: `dep-${counter}`,
    orgId: "org-1",
    projectId: "proj-1",
    environmentId: "env-1",
    kind: "processes",
    memoryMb: extra.memoryMb,
    healthPath: extra.healthPath,
    processes: processes.map((p, i) => ({
      name: i === 0 ? "web" : `svc${i}`,
      command: nodeCommand("http-app.mjs"),
      cwd: FIXTURES,
      env: baseEnv(),
      http: i === 0,
      ...p,
    })),
  };
}

async function get(port: number): Promise<any> {
  const res = await fetch(`http://127.0.0.1:${port}/`);
  return res.json();
}

const runtime = (lines: NewLogLine[]) => lines.filter((l) => l.stream !== "system").map((l) => [l.stream, l.message]);

describe("supervisor: launch", () => {
  it("resolves with a port that answers; the app sees its env and PORT; output is runtime lines in order", async () => {
    const { supervisor, lines, pids } = setup();
    const spec = appSpec([{ env: baseEnv({ GREETING: "hello" }) }]);
    const app = await supervisor.launch(spec);
    expect(app.deploymentId).toBe(spec.deploymentId);
    const body = await get(app.port);
    expect(body.greeting).toBe("hello");
    expect(body.home).toBeNull(); // nothing of the server's environment
    expect(supervisor.running()).toEqual([app]);
    await waitFor(() => runtime(lines).length >= 3, 5000, "three output lines");
    // In order within each stream (stdout and stderr are two pipes: their relative order is the OS's).
    expect(runtime(lines).filter(([s]) => s === "stdout")).toEqual([
      ["stdout", `listening on ${app.port}`],
      ["stdout", "second stdout line"],
    ]);
    expect(runtime(lines).filter(([s]) => s === "stderr")).toEqual([["stderr", "stderr says hello"]]);
    for (const l of lines) {
      expect(l).toMatchObject({ kind: "runtime", deploymentId: spec.deploymentId, projectId: "proj-1", orgId: "org-1" });
    }
    expect(lines.find((l) => l.stream === "stdout")!.fields).toEqual({ process: "web" });
    expect(lines.some((l) => l.stream === "system" && l.message === `Started web (pid ${pids()[0]}) with PORT=${app.port}`)).toBe(true);
    await supervisor.stop(spec.deploymentId);
    expect(supervisor.running()).toEqual([]);
    expect(isAlive(pids()[0]!)).toBe(false);
    await expect(fetch(`http://127.0.0.1:${app.port}/`)).rejects.toThrow();
  });

  it("rejects with the exit code when the app exits before answering", async () => {
    const { supervisor, lines, pids } = setup();
    const launch = supervisor.launch(appSpec([{ command: nodeCommand("exit-at-start.mjs") }]));
    await expect(launch).rejects.toThrow(/^the app exited with code 1 before answering on PORT \d+$/);
    expect(runtime(lines)).toContainEqual(["stderr", "Error: cannot find module 'missing'"]);
    expect(supervisor.running()).toEqual([]);
    expect(isAlive(pids()[0]!)).toBe(false);
  });

  it("names the memory limit when the app is killed for going over it", async () => {
    const { supervisor, pids } = setup();
    const launch = supervisor.launch(appSpec([{ command: nodeCommand("alloc.mjs"), env: baseEnv({ ALLOC_MB: "512" }) }], { memoryMb: 100 }));
    await expect(launch).rejects.toThrow(/^the app was killed: memory limit \(100 MiB\) exceeded before answering on PORT \d+$/);
    expect(isAlive(pids()[0]!)).toBe(false);
  });

  it("rejects after the health timeout when the app never answers, and stops it", async () => {
    const { supervisor, pids } = setup({ healthTimeoutMs: 800 });
    const t0 = Date.now();
    await expect(supervisor.launch(appSpec([{ command: nodeCommand("never-listen.mjs") }]))).rejects.toThrow(
      /^the app did not answer HTTP on PORT \d+ within 0\.8 s \(it must listen on the port given in the PORT environment variable\)$/,
    );
    expect(Date.now() - t0).toBeGreaterThanOrEqual(750);
    expect(isAlive(pids()[0]!)).toBe(false);
    expect(supervisor.running()).toEqual([]);
  });

  it("with a healthCheckPath, needs a 2xx or 3xx answer there: a 503 fails after the health timeout; without one any answer to / passes", async () => {
    const { supervisor, pids } = setup({ healthTimeoutMs: 1000 });
    const sick = supervisor.launch(appSpec([{ env: baseEnv({ FAIL_PATH: "/healthz" }) }], { healthPath: "/healthz" }));
    await expect(sick).rejects.toThrow(/^the app did not give a 2xx or 3xx answer to GET \/healthz \(the project.s healthCheckPath\) on PORT \d+ within 1 s$/);
    expect(isAlive(pids()[0]!)).toBe(false);
    const fine = await supervisor.launch(appSpec([{ env: baseEnv({ FAIL_PATH: "/healthz" }) }], { healthPath: "/ready" }));
    expect((await get(fine.port)).path).toBe("/");
    const any = await supervisor.launch(appSpec([{ env: baseEnv({ FAIL_PATH: "/" }) }]));
    expect(any.port).toBeGreaterThan(0);
  });

  it("a smoke window: an app that crashes after answering, within the window, fails the launch saying so; one that stays up resolves after it", async () => {
    const { supervisor, pids } = setup({ smokeWindowMs: 1500 });
    const t0 = Date.now();
    const crashing = supervisor.launch(appSpec([{ env: baseEnv({ CRASH_AFTER_MS: "600" }) }]));
    await expect(crashing).rejects.toThrow(/^the app exited with code 3 0\.\d+ s after it first answered, within the smoke window \(SMOKE_WINDOW, 1\.5 s\)$/);
    expect(Date.now() - t0).toBeLessThan(1500);
    expect(isAlive(pids()[0]!)).toBe(false);
    expect(supervisor.running()).toEqual([]);

    const t1 = Date.now();
    const steady = await supervisor.launch(appSpec([{}]));
    expect(Date.now() - t1).toBeGreaterThanOrEqual(1500);
    expect(supervisor.running().map((a) => a.deploymentId)).toEqual([steady.deploymentId]);
  });

  it("stops and rejects when the signal aborts during the launch, leaving no process", async () => {
    const { supervisor, pids } = setup({ healthTimeoutMs: 30_000 });
    const controller = new AbortController();
    const launch = supervisor.launch(appSpec([{ command: nodeCommand("never-listen.mjs") }]), { signal: controller.signal });
    await waitFor(() => pids().length === 1, 5000, "process started");
    const t0 = Date.now();
    controller.abort();
    await expect(launch).rejects.toThrow("the launch was canceled");
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(isAlive(pids()[0]!)).toBe(false);
    // An aborted signal before the launch starts nothing.
    await expect(supervisor.launch(appSpec([{}]), { signal: controller.signal })).rejects.toThrow("the launch was canceled");
    expect(pids().length).toBe(1);
  });

  it("runs compose services without PORT next to the web process, and stops them all", async () => {
    const { supervisor, lines, pids } = setup();
    const spec = appSpec([{}, { command: `echo "port=[$PORT]"; ${nodeCommand("idle.mjs")}` }]);
    const app = await supervisor.launch(spec);
    await waitFor(() => runtime(lines).some(([, m]) => m === "port=[]"), 5000, "service output");
    expect(lines.find((l) => l.message === "port=[]")!.fields).toEqual({ process: "svc1" });
    const servicePid = Number(/^pid (\d+)$/.exec(lines.find((l) => /^pid \d+$/.test(l.message))?.message ?? "")?.[1]);
    expect(isAlive(servicePid)).toBe(true);
    expect((await get(app.port)).pid).toBeGreaterThan(0);
    await supervisor.stop(spec.deploymentId);
    for (const pid of [...pids(), servicePid]) expect(isAlive(pid)).toBe(false);
  });

  it("serves a static site without a process and resolves at once", async () => {
    const { supervisor } = setup();
    const dir = tempDir();
    writeFileSync(join(dir, "index.html"), "<h1>static</h1>");
    const app = await supervisor.launch({ deploymentId: "static-1", orgId: "o", projectId: "p", environmentId: "e", kind: "static", dir });
    const res = await fetch(`http://127.0.0.1:${app.port}/`);
    expect(await res.text()).toBe("<h1>static</h1>");
    expect(supervisor.running()).toEqual([app]);
    await supervisor.stop("static-1");
    await expect(fetch(`http://127.0.0.1:${app.port}/`)).rejects.toThrow();
  });
});

describe("supervisor: crashes and stops", () => {
  it("restarts a crashed app on the same port after the backoff and calls onRestart", async () => {
    const { supervisor, lines, restarts, pids } = setup({ restart: { baseDelayMs: 300 } });
    const marker = join(tempDir(), "crashed");
    const app = await supervisor.launch(appSpec([{ env: baseEnv({ CRASH_AFTER_MS: "300", CRASH_MARKER: marker }) }]));
    const first = (await get(app.port)).pid;
    await waitFor(() => lines.some((l) => l.message.startsWith("Restarting web in 0.3 s (restart 1 of at most 5")), 5000, "restart scheduled");
    expect(restarts).toEqual([]); // not before the delay
    await waitFor(() => restarts.length === 1, 5000, "restart");
    expect(restarts[0]).toEqual({ attempt: 1, reason: "the app exited with code 3" });
    await waitFor(() => runtime(lines).filter(([, m]) => m === `listening on ${app.port}`).length === 2, 5000, "listening again");
    const second = (await get(app.port)).pid;
    expect(second).not.toBe(first);
    expect(isAlive(first)).toBe(false);
    expect(supervisor.running()).toEqual([app]);
    expect(runtime(lines)).toContainEqual(["stderr", "crashing now"]);
    expect(lines.some((l) => l.stream === "system" && l.message === "web exited with code 3")).toBe(true);
    await supervisor.stop(app.deploymentId);
    for (const pid of pids()) expect(isAlive(pid)).toBe(false);
  });

  it("gives up after the 6th crash within the window: onGiveUp, nothing left running", async () => {
    const { supervisor, lines, restarts, giveUps, pids } = setup({ restart: { baseDelayMs: 20, maxDelayMs: 80, windowMs: 60_000 } });
    const app = await supervisor.launch(appSpec([{ env: baseEnv({ CRASH_AFTER_MS: "150" }) }]));
    await waitFor(() => giveUps.length === 1, 20_000, "give up");
    expect(restarts.map((r) => r.attempt)).toEqual([1, 2, 3, 4, 5]);
    expect(giveUps[0]).toBe("the app exited with code 3; it crashed 6 times within 60 s");
    // Backoff doubles and is capped.
    const delays = lines.filter((l) => l.message.startsWith("Restarting")).map((l) => /in ([\d.]+) s/.exec(l.message)![1]);
    expect(delays).toEqual(["0.02", "0.04", "0.08", "0.08", "0.08"]);
    expect(lines.at(-1)!.message).toBe("Stopped");
    expect(supervisor.running()).toEqual([]);
    expect(pids().length).toBe(6);
    for (const pid of pids()) expect(isAlive(pid)).toBe(false);
    await expect(fetch(`http://127.0.0.1:${app.port}/`)).rejects.toThrow();
  });

  it("counts only the crashes inside the window", async () => {
    const { supervisor, restarts, giveUps } = setup({ restart: { baseDelayMs: 10, maxRestarts: 2, windowMs: 100 } });
    const app = await supervisor.launch(appSpec([{ env: baseEnv({ CRASH_AFTER_MS: "250" }) }]));
    await waitFor(() => restarts.length >= 4, 20_000, "four restarts");
    expect(giveUps).toEqual([]);
    expect(restarts.slice(0, 4).map((r) => r.attempt)).toEqual([1, 1, 1, 1]);
    await supervisor.stop(app.deploymentId);
  });

  it("stop sends SIGTERM, then SIGKILL after the grace to an app that ignores SIGTERM, and never restarts it", async () => {
    const { supervisor, lines, restarts, pids } = setup({ stopGraceMs: 700, restart: { baseDelayMs: 10 } });
    const app = await supervisor.launch(appSpec([{ env: baseEnv({ IGNORE_SIGTERM: "1" }) }]));
    const pid = (await get(app.port)).pid as number;
    const t0 = Date.now();
    await supervisor.stop(app.deploymentId);
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(650);
    expect(took).toBeLessThan(4000);
    expect(runtime(lines)).toContainEqual(["stdout", "ignoring SIGTERM"]);
    expect(isAlive(pid)).toBe(false);
    await new Promise((r) => setTimeout(r, 200));
    expect(restarts).toEqual([]);
    expect(pids().length).toBe(1);
    await supervisor.stop(app.deploymentId); // unknown now: a no-op
  });

  it("stopAll stops every app", async () => {
    const { supervisor, pids } = setup();
    const dir = tempDir();
    writeFileSync(join(dir, "index.html"), "hi");
    const a = await supervisor.launch(appSpec([{}]));
    const b = await supervisor.launch(appSpec([{ env: baseEnv({ IGNORE_SIGTERM: "1" }) }]));
    const c = await supervisor.launch({ deploymentId: "static-all", orgId: "o", projectId: "p", environmentId: "e", kind: "static", dir });
    expect(supervisor.running().map((r) => r.deploymentId)).toEqual([a.deploymentId, b.deploymentId, "static-all"]);
    await expect(supervisor.launch({ ...appSpec([{}]), deploymentId: a.deploymentId })).rejects.toThrow(/already running/);
    await supervisor.stopAll();
    expect(supervisor.running()).toEqual([]);
    for (const pid of pids()) expect(isAlive(pid)).toBe(false);
    for (const port of [a.port, b.port, c.port]) await expect(fetch(`http://127.0.0.1:${port}/`)).rejects.toThrow();
  });
});

/** A raw request: the path is sent as written (fetch would normalise `..`). */
function raw(port: number, path: string, method = "GET"): Promise<{ status: number; headers: Record<string, any>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, method, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => {
        body += d;
      });
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("static server", () => {
  async function site(with404 = false) {
    const base = tempDir();
    const root = join(base, "site");
    mkdirSync(join(root, "docs"), { recursive: true });
    mkdirSync(join(root, "empty"));
    writeFileSync(join(root, "index.html"), "<h1>home</h1>");
    writeFileSync(join(root, "docs", "index.html"), "<h1>docs</h1>");
    writeFileSync(join(root, "style.css"), "body{}");
    writeFileSync(join(root, "app.js"), "console.log(1)");
    writeFileSync(join(root, "data.bin"), Buffer.alloc(3 * 1024 * 1024, 7));
    writeFileSync(join(base, "secret.txt"), "top secret");
    mkdirSync(join(base, "outside"));
    writeFileSync(join(base, "outside", "index.html"), "outside index");
    symlinkSync(join(base, "secret.txt"), join(root, "link-out.txt"));
    symlinkSync(join(base, "outside"), join(root, "dir-out"));
    symlinkSync(join(root, "style.css"), join(root, "link-in.css"));
    if (with404) writeFileSync(join(root, "404.html"), "<h1>custom not found</h1>");
    const server = await startStaticServer(root);
    cleanups.push(() => server.close());
    return server.port;
  }

  it("serves index.html for / and directories, with content types, streaming large files", async () => {
    const port = await site();
    expect(await raw(port, "/")).toMatchObject({ status: 200, body: "<h1>home</h1>", headers: { "content-type": "text/html; charset=utf-8" } });
    expect(await raw(port, "/docs/")).toMatchObject({ status: 200, body: "<h1>docs</h1>" });
    expect(await raw(port, "/docs")).toMatchObject({ status: 200, body: "<h1>docs</h1>" });
    expect(await raw(port, "/style.css?v=1")).toMatchObject({ status: 200, body: "body{}", headers: { "content-type": "text/css; charset=utf-8" } });
    expect((await raw(port, "/app.js")).headers["content-type"]).toBe("text/javascript; charset=utf-8");
    const big = await raw(port, "/data.bin");
    expect(big.headers["content-type"]).toBe("application/octet-stream");
    expect(big.headers["content-length"]).toBe(String(3 * 1024 * 1024));
    expect(big.body.length).toBe(3 * 1024 * 1024);
  });

  it("answers 404 for missing files and directories without an index (no listings), or the site's 404.html", async () => {
    const port = await site();
    expect(await raw(port, "/nope.html")).toMatchObject({ status: 404, body: "404 Not Found\n" });
    expect(await raw(port, "/empty/")).toMatchObject({ status: 404, body: "404 Not Found\n" });
    const custom = await site(true);
    expect(await raw(custom, "/nope")).toMatchObject({
      status: 404,
      body: "<h1>custom not found</h1>",
      headers: { "content-type": "text/html; charset=utf-8" },
    });
  });

  it("refuses traversal: /../, encoded dots and slashes, backslashes, NUL, and symbolic links (leading outside or not)", async () => {
    const port = await site();
    for (const path of [
      "/../secret.txt",
      "/docs/../../secret.txt",
      "/%2e%2e/secret.txt",
      "/%2E%2E%2Fsecret.txt",
      "/docs/%2e%2e%2f%2e%2e%2fsecret.txt",
      "/..%5csecret.txt",
      "/index.html%00.css",
      "/%zz",
      "/link-out.txt",
      "/dir-out/",
      "/dir-out/index.html",
      "/link-in.css",
    ]) {
      const res = await raw(port, path);
      expect([path, res.status]).toEqual([path, 404]);
      expect(res.body).not.toContain("secret");
      expect(res.body).not.toContain("outside");
    }
  });

  it("answers HEAD without a body and 405 to other methods", async () => {
    const port = await site();
    const head = await raw(port, "/style.css", "HEAD");
    expect(head).toMatchObject({ status: 200, body: "", headers: { "content-length": "6", "content-type": "text/css; charset=utf-8" } });
    expect(await raw(port, "/missing", "HEAD")).toMatchObject({ status: 404, body: "" });
    for (const method of ["POST", "PUT", "DELETE"]) {
      const res = await raw(port, "/", method);
      expect(res.status).toBe(405);
      expect(res.headers.allow).toBe("GET, HEAD");
    }
  });
});
