/**
 * Who a project's processes are on the host, and what happens without the
 * sandbox. On Postgres and PGlite: what an app writes, and its unpacked or
 * checked-out source, belong to the project's own uid (sandbox_uids, from
 * RUNNER_UID_RANGE); two projects get two uids, neither 0 nor the server's; the
 * work directory itself stays the server's (0700). RUNNER_SANDBOX=off says so
 * in the first system line of every deployment (and the same probe then reads
 * DATA_DIR/owner-token: what the warning is about, and proof the probe would
 * see a leak). Without bubblewrap (hidden by a mount namespace of the test's,
 * no production code changed) the real server entry starts its API but not its
 * runner, saying why; with RUNNER_SANDBOX=off it starts and warns.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import { useCleanups } from "../../support/cleanups";
import { freshDatabase } from "../../support/fresh-database";
import { seedTenant } from "../../support/harness";
import { hostileFiles, sandboxApps, useSandboxServer } from "../../support/sandbox-apps";

const [FIRST, LAST] = [200_000, 299_999];
const PROBE = { startCommand: "node probe.js" };

for (const kind of ["postgres", "pglite"] as const) {
  describe(`sandbox (${kind}): each project its own uid`, () => {
    const s = useSandboxServer({ kind, prefix: `sbx_uids_${kind}` });
    const a = sandboxApps(s);
    const { cleanups } = useCleanups("ws-sbx-uids-");

    it("files an app writes and its source belong to the project's uid; two projects, two uids, neither 0 nor the server's", async () => {
      const [ta, tb] = [await seedTenant(s.server), await seedTenant(s.server)];
      const first = await a.uploadDeploy(ta, hostileFiles(), { options: PROBE });
      cleanups.push(() => a.retire(ta, first.projectId));
      const second = await a.gitProject(tb, hostileFiles(), {}, { options: PROBE });
      cleanups.push(() => a.retire(tb, second.projectId));
      const secondDeployment = await a.deploy(tb, second.projectId);
      const apps = [
        { t: ta, projectId: first.projectId, id: first.deployment.id },
        { t: tb, projectId: second.projectId, id: secondDeployment.id },
      ];
      const uids: number[] = [];
      for (const app of apps) {
        const d = await a.settle(app.t, app.id);
        expect(d.failureReason).toBeNull();
        const uid = (await a.uidOf(app.projectId))!;
        uids.push(uid);
        expect(uid).toBeGreaterThanOrEqual(FIRST);
        expect(uid).toBeLessThanOrEqual(LAST);
        expect(uid).not.toBe(0);
        expect(uid).not.toBe(process.getuid!());
        // Inside, it is that uid; on the host, what it wrote is that uid's.
        expect((JSON.parse((await a.ask(app.projectId)).body) as { uid: number }).uid).toBe(uid);
        const work = a.workDirOf(app.id);
        for (const path of ["src/written-by-app.txt", "home/written-by-app.txt", "src/probe.js", "src", "home"]) {
          const info = statSync(join(work, path));
          expect(info.uid, path).toBe(uid);
          expect(info.gid, path).toBe(uid);
        }
        for (const dir of ["src", "home"]) expect(statSync(join(work, dir)).mode & 0o777, dir).toBe(0o700);
        // The work directory and the sandbox's passwd are the server's: nothing of the project may change them.
        const top = statSync(work);
        expect(top.uid).toBe(process.getuid!());
        expect(top.mode & 0o777).toBe(0o700);
        expect(statSync(join(work, "passwd")).uid).toBe(process.getuid!());
      }
      expect(uids[0]).not.toBe(uids[1]);
    }, 60_000);
  });
}

describe("sandbox off (RUNNER_SANDBOX=off, postgres)", () => {
  const s = useSandboxServer({ kind: "postgres", prefix: "sbx_off", env: { RUNNER_SANDBOX: "off" } });
  const a = sandboxApps(s);
  const { cleanups } = useCleanups("ws-sbx-off-");

  it("warns in the first system line of a deployment; unconfined, the probe reads DATA_DIR/owner-token", async () => {
    const t = await seedTenant(s.server);
    const { projectId, deployment } = await a.uploadDeploy(t, hostileFiles(), {
      options: PROBE,
      vars: [{ key: "PROBE_PATHS", value: JSON.stringify([join(s.dataDir, "owner-token")]) }],
    });
    cleanups.push(() => a.retire(t, projectId));
    const d = await a.settle(t, deployment.id);
    expect(d.failureReason).toBeNull();
    const { rows } = await a.lines(d.id);
    const first = rows.find((r) => r.stream === "system")!;
    expect(rows.indexOf(first)).toBe(0);
    expect(first.message).toContain("WARNING: RUNNER_SANDBOX=off");
    expect(first.message).toMatch(/unconfined/);
    const report = JSON.parse((await a.ask(projectId)).body) as { reads: Array<{ path: string; ok: boolean; head?: string }> };
    expect(report.reads[0]).toMatchObject({ ok: true });
    expect(report.reads[0]!.head).toContain(s.canaries.ownerToken);
  }, 60_000);
});

describe("the server entry without bubblewrap", () => {
  const { cleanups } = useCleanups("ws-sbx-nobwrap-");

  /**
   * `node --import tsx functions/node.ts` (what `npm start` runs, uncompiled) in a mount namespace where
   * /usr/bin/bwrap (and /bin/bwrap, the same file) is /dev/null: not executable, so not found.
   * Resolves with its output once it listens (then stopped with SIGTERM) or exits.
   */
  async function startWithoutBwrap(env: Record<string, string>): Promise<{ output: string; listened: boolean; code: number | null }> {
    const db = await freshDatabase(inject("pgUrl"), "sbx_nobwrap", { migrate: true });
    cleanups.push(() => db.drop());
    const dataDir = mkdtempSync(join(tmpdir(), "sbx-nobwrap-data-"));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const entry = `exec ${JSON.stringify(process.execPath)} --import tsx functions/node.ts`;
    const child = spawn("unshare", ["--mount", "--propagation", "private", "sh", "-c", `mount --bind /dev/null /usr/bin/bwrap && ${entry}`], {
      cwd: process.cwd(),
      env: { PATH: "/usr/local/bin:/usr/bin:/bin", DATA_DIR: dataDir, PORT: "0", HOST: "127.0.0.1", DATABASE_URL: db.url, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    let listened = false;
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      if (!listened && output.includes("listening on")) {
        listened = true;
        child.kill("SIGTERM");
      }
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 50_000);
    const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
    clearTimeout(timer);
    return { output, listened, code };
  }

  it("RUNNER_SANDBOX=on (the default): the API starts, the runner does not, saying bubblewrap is missing", async () => {
    const { output, listened } = await startWithoutBwrap({});
    expect(output).toContain("bubblewrap (bwrap) is not installed");
    expect(output).toContain("runner_not_started");
    expect(listened, output).toBe(true);
  }, 60_000);

  it("RUNNER_SANDBOX=off: starts, and warns at start that builds and apps run unconfined", async () => {
    const { output, listened } = await startWithoutBwrap({ RUNNER_SANDBOX: "off" });
    expect(listened, output).toBe(true);
    expect(output).not.toContain("runner_not_started");
    expect(output).toContain("WARNING: RUNNER_SANDBOX=off");
  }, 60_000);
});
