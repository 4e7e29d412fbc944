/**
 * Hostile apps that try to read what is not theirs, on Postgres and on PGlite
 * (whose database files sit in DATA_DIR/pglite): the owner token and the key
 * file planted in the data directory, the database files, the upload store,
 * the server's source tree and its /proc entry, another organization's work
 * directory and its app's /proc/<pid>/environ. Each app (test/fixtures/hostile/
 * probe.js) reports what it read over HTTP and in its log; no canary may show
 * up in either, every attempt must be refused, and the same probe reading its
 * own files and its own /proc proves it could have seen them.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { useCleanups } from "../../support/cleanups";
import { seedTenant } from "../../support/harness";
import { hostileFiles, hostPidsOf, sandboxApps, useSandboxServer } from "../../support/sandbox-apps";

interface Probe {
  uid: number;
  pid: number;
  env: Record<string, string>;
  reads: Array<{ path: string; ok: boolean; error?: string; kind?: string; head?: string; entries?: string[] }>;
  proc: Array<{ pid: number; environ?: string; cmdline?: string }>;
  writes: Record<string, string>;
}

const PROBE = { startCommand: "node probe.js" };

for (const kind of ["postgres", "pglite"] as const) {
  describe(`sandbox (${kind}): a hostile app reads nothing of the server or of another project`, () => {
    const s = useSandboxServer({ kind, prefix: `sbx_reads_${kind}` });
    const a = sandboxApps(s);
    const { cleanups } = useCleanups("ws-sbx-reads-");

    /** Everything a probe said: its answer and its stored lines. */
    async function probeOf(projectId: string, deploymentId: string) {
      const answer = await a.ask(projectId);
      expect(answer.status).toBe(200);
      const report = JSON.parse(answer.body) as Probe;
      const { text } = await a.lines(deploymentId);
      return { report, all: `${answer.body}\n${text}` };
    }

    it("cannot read DATA_DIR (owner token, key file, database files, upload store), the source tree or the server's /proc entry (git source)", async () => {
      const t = await seedTenant(s.server);
      const paths = [
        s.dataDir,
        join(s.dataDir, "owner-token"),
        join(s.dataDir, "secret-keys"),
        join(s.dataDir, "pglite"),
        join(s.dataDir, "pglite", "PG_VERSION"),
        join(s.dataDir, "pglite", "global", "pg_control"),
        join(s.dataDir, "uploads"),
        join(s.dataDir, "deployments"),
        "/var/lib/postgresql",
        process.cwd(),
        join(process.cwd(), "package.json"),
        "/root",
        "/etc/shadow",
        "/work",
      ];
      const { projectId } = await a.gitProject(
        t,
        hostileFiles(),
        {},
        {
          options: PROBE,
          vars: [
            { key: "PROBE_PATHS", value: JSON.stringify(paths) },
            { key: "SERVER_PID", value: String(process.pid) },
          ],
        },
      );
      cleanups.push(() => a.retire(t, projectId));
      const queued = await a.deploy(t, projectId);
      const d = await a.settle(t, queued.id);
      expect(d.failureReason).toBeNull();
      expect(d.status).toBe("ready");

      const { report, all } = await probeOf(projectId, d.id);
      for (const path of paths) {
        const read = report.reads.find((r) => r.path === path)!;
        expect(read, path).toBeDefined();
        expect(read.ok, `${path} was readable: ${JSON.stringify(read).slice(0, 300)}`).toBe(false);
        expect(read.error, path).toMatch(/^(ENOENT|EACCES)$/);
      }
      // Not even in its /proc: the server's pid is not of its pid namespace.
      for (const file of ["environ", "cmdline"]) expect(report.reads.find((r) => r.path === `/proc/${process.pid}/${file}`)?.ok).toBe(false);
      // Its root holds only the sandbox's layout.
      const root = report.reads.find((r) => r.path === "/")!;
      expect(root.entries!.sort()).toEqual(expect.arrayContaining(["app", "usr", "etc", "proc", "dev", "tmp", "home", "opt"]));
      for (const absent of ["work", "root", "var", "srv", "mnt", "sys", "run", "data"]) expect(root.entries, absent).not.toContain(absent);
      expect(report.reads.find((r) => r.path === "/tmp")!.entries).toEqual([]);
      expect(report.reads.find((r) => r.path === "/home")!.entries).toEqual(["app"]);
      // /proc/1 (the sandbox's init, root's) and its root link give nothing away.
      expect(report.reads.find((r) => r.path === "/proc/1/root/")?.ok).toBe(false);
      // The canaries are nowhere in what it said.
      for (const secret of [s.canaries.ownerToken, s.canaries.secretKeys]) expect(all).not.toContain(secret);
      // It runs as the project's uid and may write only its own directories.
      expect(report.uid).toBe(await a.uidOf(projectId));
      expect(report.writes["/app/written-by-app.txt"]).toBe("ok");
      expect(report.writes["/home/app/written-by-app.txt"]).toBe("ok");
      for (const path of ["/usr/written-by-app.txt", "/etc/written-by-app.txt", "/opt/node/bin/written"])
        expect(report.writes[path], path).toMatch(/^(EROFS|EACCES|ENOENT)$/);
    }, 60_000);

    it("cannot read another organization's work directory or its app's /proc/<pid>/environ (local folder B, upload A)", async () => {
      const secret = `b-secret-${Math.random().toString(36).slice(2)}`;
      const fileSecret = `b-file-${Math.random().toString(36).slice(2)}`;
      const tb = await seedTenant(s.server);
      const b = await a.localDeploy(tb, hostileFiles({ "b-secret.txt": fileSecret }), {
        options: PROBE,
        vars: [
          { key: "B_SECRET", value: secret, isSecret: true },
          { key: "PROBE_PATHS", value: JSON.stringify(["/app/b-secret.txt"]) },
        ],
      });
      cleanups.push(() => a.retire(tb, b.projectId));
      const bReady = await a.settle(tb, b.deployment.id);
      expect(bReady.failureReason).toBeNull();
      // The probe sees what is its own: its file, its own environ with the secret (the controls of this test).
      const own = await probeOf(b.projectId, b.deployment.id);
      expect(own.report.reads.find((r) => r.path === "/app/b-secret.txt")).toMatchObject({ ok: true, head: fileSecret });
      expect(own.report.proc.some((p) => p.environ?.includes(secret))).toBe(true);
      const bPids = hostPidsOf(s, b.deployment.id);
      expect(bPids.length).toBeGreaterThan(0);

      const bWork = a.workDirOf(b.deployment.id);
      const paths = [
        bWork,
        join(bWork, "src"),
        join(bWork, "src", "b-secret.txt"),
        join(bWork, "home"),
        b.folder,
        join(b.folder, "b-secret.txt"),
        s.localRoot,
        ...bPids.flatMap((pid) => [`/proc/${pid}/environ`, `/proc/${pid}/cmdline`, `/proc/${pid}/root/app/b-secret.txt`]),
      ];
      const ta = await seedTenant(s.server);
      const attacker = await a.uploadDeploy(ta, hostileFiles(), { options: PROBE, vars: [{ key: "PROBE_PATHS", value: JSON.stringify(paths) }] });
      cleanups.push(() => a.retire(ta, attacker.projectId));
      const d = await a.settle(ta, attacker.deployment.id);
      expect(d.failureReason).toBeNull();
      expect(d.status).toBe("ready");
      const { report, all } = await probeOf(attacker.projectId, d.id);
      for (const path of paths) {
        const read = report.reads.find((r) => r.path === path)!;
        // A pid number of B may exist in A's own pid namespace (then it is one of A's processes): never B's.
        if (read.ok && path.startsWith("/proc/")) expect(read.head ?? "", path).not.toContain(secret);
        else expect(read.ok, `${path} was readable: ${JSON.stringify(read).slice(0, 300)}`).toBe(false);
      }
      // Its /proc holds its own sandbox's processes only (bwrap's init, setpriv's shell, node): none of B's.
      expect(report.proc.length).toBeLessThanOrEqual(4);
      for (const p of report.proc) expect(p.cmdline ?? "").not.toContain("b-secret");
      for (const leaked of [secret, fileSecret]) expect(all).not.toContain(leaked);
      // Two projects, two uids.
      const [uidA, uidB] = [await a.uidOf(attacker.projectId), await a.uidOf(b.projectId)];
      expect(uidA).toBeDefined();
      expect(uidA).not.toBe(uidB);
      expect(report.uid).toBe(uidA);
    }, 60_000);
  });
}
