/**
 * Backup and restore of a self-hosted instance (functions/operations/backup/):
 * a populated instance (a project with a secret variable and a stored upload, a
 * queued deployment, a webhook channel with its signing secret, settings with a
 * clone token, request log lines) is backed up with `npm run backup`'s command,
 * restored with `npm run restore`'s into an empty data directory (embedded
 * database) or an empty Postgres database, and started with the same keys: every
 * API read answers as before. With other keys the start is refused naming
 * SECRET_KEYS; a non-empty target is refused; no secret is in the archive in the
 * clear. A running server's scheduled backups keep BACKUP_KEEP archives.
 */
import { execFile } from "node:child_process";
import { request as httpRequest } from "node:http";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { gunzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../functions/self-hosted/start";
import { generateKeySpec } from "../../shared/crypto/keyring";
import { useCleanups } from "../support/cleanups";
import { eventually } from "../support/harness";
import { freshDatabase } from "../support/fresh-database";
import { TEST_SECRET_KEYS } from "../support/test-keys";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "..", "..");
const { cleanups, tempDir } = useCleanups("ws-backup-");
const TOKEN = "backup-owner-token-0123456789abcdef0123456789abcdef";
const ADMIN_URL = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const SECRET_VALUE = "canary-secret-env-5f1c9a";
const SIGNING_SECRET = `whsec_${Buffer.from("canary-signing-secret-77d0e3-ab12cd34").toString("base64")}`;
const CLONE_TOKEN = "ghp_canaryclonetoken9b2e";

interface Instance {
  DATA_DIR: string;
  DATABASE_URL?: string;
  SECRET_KEYS: string;
}

function start(i: Instance, extra: Record<string, string> = {}): Promise<RunningServer> {
  const env: Record<string, string> = {
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: i.DATA_DIR,
    SECRET_KEYS: i.SECRET_KEYS,
    WORKSPACE_OWNER_TOKEN: TOKEN,
    LOG_LEVEL: "silent",
    SHARED_DOMAIN: "apps.test",
    RUNNER: "off",
    ...extra,
  };
  if (i.DATABASE_URL) env.DATABASE_URL = i.DATABASE_URL;
  return startSelfHosted(loadNodeConfig(env), () => {});
}

/** `npm run backup|restore -- <file>`'s command, as a process with the instance's environment. */
async function cli(command: "backup" | "restore", file: string, i: Instance): Promise<{ code: number; out: string }> {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: i.DATA_DIR, SECRET_KEYS: i.SECRET_KEYS };
  if (i.DATABASE_URL) env.DATABASE_URL = i.DATABASE_URL;
  try {
    const { stdout, stderr } = await run(process.execPath, ["--import", "tsx", "functions/operations/backup/cli.ts", command, file], { cwd: ROOT, env });
    return { code: 0, out: stdout + stderr };
  } catch (e) {
    const failed = e as { code: number; stdout: string; stderr: string };
    return { code: failed.code, out: failed.stdout + failed.stderr };
  }
}

async function api<T>(server: RunningServer, method: string, path: string, json?: unknown): Promise<T> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(json ? { "content-type": "application/json" } : {}) },
    body: json ? JSON.stringify(json) : undefined,
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Fills an instance through its API and the `wsp deploy` command (an upload: a stored artifact). */
async function populate(server: RunningServer): Promise<string> {
  const folder = join(tempDir(), "app");
  mkdirSync(folder);
  writeFileSync(join(folder, "package.json"), JSON.stringify({ name: "backed-up", scripts: { start: "node index.js" } }));
  writeFileSync(join(folder, "index.js"), "require('node:http').createServer((q, s) => s.end('hi')).listen(process.env.PORT);\n");
  await run(process.execPath, [join(ROOT, "functions/cli/wsp.mjs"), "deploy", folder, "--no-wait", "--name", "Backed Up"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: tempDir(), WORKSPACE_API_URL: server.url, WORKSPACE_TOKEN: TOKEN },
  });
  const { items } = await api<{ items: Array<{ id: string; slug: string }> }>(server, "GET", "/api/projects");
  const project = items.find((p) => p.slug === "backed-up")!;
  await api(server, "PATCH", `/api/projects/${project.id}/env`, {
    upserts: [
      { key: "PLAIN", value: "visible" },
      { key: "API_SECRET", value: SECRET_VALUE, isSecret: true },
    ],
  });
  await api(server, "POST", "/api/notifications/channels", {
    kind: "webhook",
    label: "hook",
    config: { url: "https://hooks.example.com/backup", signingSecret: SIGNING_SECRET },
  });
  await api(server, "PATCH", "/api/settings/clone-credentials", { token: CLONE_TOKEN, asDefault: true });
  // A request line in the server log: the edge answers "nothing deployed" (the runner is off) and logs it.
  await new Promise<void>((done, fail) => {
    // node:http: fetch does not let a request set its Host.
    const req = httpRequest(`${server.url}/hello`, { headers: { host: `${project.slug}.apps.test` } }, (res) => res.resume().on("end", done));
    req.on("error", fail);
    req.end();
  });
  await eventually(async () => {
    const recent = await api<{ items: unknown[] }>(server, "GET", `/api/projects/${project.id}/server-logs/recent`);
    expect(recent.items.length).toBeGreaterThan(0);
  }, 5_000);
  return project.id;
}

/** Every read a user of the instance relies on. */
async function reads(server: RunningServer, projectId: string) {
  const paths = [
    "/api/projects",
    `/api/projects/${projectId}`,
    `/api/projects/${projectId}/info`,
    `/api/projects/${projectId}/env`,
    `/api/projects/${projectId}/environments`,
    `/api/projects/${projectId}/deployments`,
    `/api/projects/${projectId}/server-logs/recent`,
    "/api/settings",
    "/api/notifications/channels",
    "/api/me",
  ];
  const out: Record<string, unknown> = {};
  for (const path of paths) out[path] = await api(server, "GET", path);
  return out;
}

/** The archive's bytes, unzipped: what anyone holding the file could read. */
const archiveText = (file: string) => gunzipSync(readFileSync(file)).toString("latin1");

describe.each([
  ["embedded database", false],
  ["Postgres", true],
])("backup and restore (%s)", (_label, onPostgres) => {
  const dbs: Array<{ drop(): Promise<void> }> = [];
  afterAll(async () => {
    for (const db of dbs) await db.drop().catch(() => {});
  });
  const instance = async (keys = TEST_SECRET_KEYS): Promise<Instance> => {
    const i: Instance = { DATA_DIR: join(tempDir(), "data"), SECRET_KEYS: keys };
    if (onPostgres) {
      const db = await freshDatabase(ADMIN_URL, "backup", { migrate: false });
      dbs.push(db);
      i.DATA_DIR = tempDir();
      i.DATABASE_URL = db.url;
    }
    return i;
  };

  it("restores every read into an empty instance with the same keys, and refuses other keys and a non-empty target", async () => {
    const source = await instance();
    const server = await start(source);
    let closed = false;
    cleanups.push(() => (closed ? undefined : server.close()));
    const projectId = await populate(server);
    const before = await reads(server, projectId);
    // The embedded database belongs to its one process: backed up once the server stopped (Postgres: while it runs).
    if (!onPostgres) {
      await server.close();
      closed = true;
    }
    const file = join(tempDir(), "instance.tar.gz");
    const backedUp = await cli("backup", file, source);
    expect(backedUp.out).toContain("NOT INCLUDED: the secret keys");
    expect(backedUp.code).toBe(0);
    if (onPostgres) {
      await server.close();
      closed = true;
    }

    const text = archiveText(file);
    expect(text).toContain('"format": "workspace-service-backup/1"');
    for (const canary of [SECRET_VALUE, SIGNING_SECRET, CLONE_TOKEN, TOKEN, ...TEST_SECRET_KEYS.split(",").map((k) => k.split(":")[1]!)]) {
      expect(text).not.toContain(canary);
    }
    // The stored upload travels with it.
    expect(text).toMatch(/artifacts\/uploads\/artifacts\//);

    const target = await instance();
    const restored = await cli("restore", file, target);
    expect(restored.out).toMatch(/Restored \d+ rows/);
    expect(restored.code).toBe(0);

    const again = await start(target);
    cleanups.push(() => again.close());
    expect(await reads(again, projectId)).toEqual(before);
    // The secret is readable where the API shows secrets to builds: through the stored ciphertext with the same keys
    // (the env read masks it); the settings' clone token is still set.
    expect(JSON.stringify(before)).not.toContain(SECRET_VALUE);
    await again.close();

    // Other keys: refused at start, naming SECRET_KEYS (not garbage later).
    await expect(start({ ...target, SECRET_KEYS: generateKeySpec("t2") })).rejects.toThrow(/SECRET_KEYS/);

    // A non-empty target: refused, nothing merged.
    const refused = await cli("restore", file, target);
    expect(refused.code).toBe(1);
    expect(refused.out).toMatch(/not empty/);
  }, 300_000);
});

describe("scheduled backups", () => {
  it("a running server backs itself up every BACKUP_SCHEDULE and keeps BACKUP_KEEP archives", async () => {
    const dir = join(tempDir(), "backups");
    const server = await start(
      { DATA_DIR: join(tempDir(), "data"), SECRET_KEYS: TEST_SECRET_KEYS },
      { BACKUP_SCHEDULE: "1s", BACKUP_DIR: dir, BACKUP_KEEP: "2" },
    );
    cleanups.push(() => server.close());
    await eventually(async () => {
      expect(existsSync(dir) && readdirSync(dir).filter((n) => n.endsWith(".tar.gz")).length).toBe(2);
    }, 15_000);
    // Still two after more turns: the oldest go.
    await new Promise((r) => setTimeout(r, 2_500));
    const names = readdirSync(dir).filter((n) => n.endsWith(".tar.gz"));
    expect(names).toHaveLength(2);
    expect(archiveText(join(dir, names[1]!))).toContain('"database": "pglite"');
  }, 60_000);

  it("refuses a schedule it cannot read, naming the setting", () => {
    expect(() => loadNodeConfig({ BACKUP_SCHEDULE: "daily" })).toThrow(/BACKUP_SCHEDULE/);
    expect(() => loadNodeConfig({ BACKUP_SCHEDULE: "1h", BACKUP_KEEP: "0" })).toThrow(/BACKUP_KEEP/);
  });
});
