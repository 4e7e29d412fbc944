/**
 * The cloud, for tests that need one over real HTTP (a self-hosted instance linked to it):
 * the Worker bundled by `wrangler deploy --dry-run`, run by workerd through Miniflare on a
 * loopback port, on a Postgres database of its own reached through the Neon driver and the
 * run's WebSocket proxy, with presigned folder uploads on the run's S3 server, under a
 * keyring of its own (CLOUD_SECRET_KEYS, not the self-hosted tests' TEST_SECRET_KEYS, so a
 * secret the cloud re-encrypted provably was).
 *
 * Miniflare rather than `wrangler dev` as a child: the bundle is built once per source
 * state and reused (cached in the temp dir under a hash of the Worker's sources), and
 * workerd then starts in well under a second; Miniflare ends workerd on dispose() and when
 * the test process exits. Cron triggers do not fire by themselves: call `scheduled()`.
 *
 * The returned object has the Harness shape (test/support/harness.ts), so seedTenant,
 * seedMember, expectBody and folderClient work on it unchanged.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, beforeEach, inject } from "vitest";
import type { Role } from "../../shared/auth/permissions";
import { createKeyring, type Keyring } from "../../shared/crypto/keyring";
import { openPostgres } from "../../shared/db/postgres";
import type { Db } from "../../shared/db/types";
import { databaseTarget, startWsProxy } from "../../shared/db/ws-proxy";
import { createS3Storage } from "../../shared/storage/s3";
import type { PresignedStorage } from "../../shared/storage/types";
import { freshDatabase } from "./fresh-database";
import { buildRequest, type Harness, type Member, PostgresUnavailable, type RequestOptions, seedMember, seedTenant } from "./harness";

/** The cloud's keyring (tests only): deliberately not TEST_SECRET_KEYS. */
export const CLOUD_SECRET_KEYS = "c1:gIGCg4SFhoeIiYqLjI2Oj5CRkpOUlZaXmJmam5ydnp8";
export const CLOUD_SHARED_DOMAIN = "cloud.example.test";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const DEFAULT_PG_SERVER = "postgres://postgres@127.0.0.1:5432/test";
const READY_TIMEOUT_MS = 30_000;
const MAX_LOG_LINES = 5_000;

export interface CloudWorkerOptions {
  /** A URL on the Postgres server to create the cloud's database on. Default: the run's pgUrl, else TEST_DATABASE_URL, else the local server. */
  pgServerUrl?: string;
  /** Database name prefix (freshDatabase). Default `cloud`. */
  databasePrefix?: string;
  /** The Neon WebSocket proxy. Default: the run's (test/setup/databases.ts); when none is provided, one is started for this cloud. */
  wsProxyUrl?: string;
  /** S3-compatible storage for presigned folder uploads. Default: the run's s3rver (test/setup/s3.ts). */
  s3?: { endpoint: string; bucket: string; accessKeyId: string; secretAccessKey: string; region?: string };
  /** Key prefix in the bucket. Default `cloud-<random>/`, so two clouds never share objects. */
  s3Prefix?: string;
  /** SECRET_KEYS. Default CLOUD_SECRET_KEYS. */
  secretKeys?: string;
  /** SHARED_DOMAIN. Default CLOUD_SHARED_DOMAIN. */
  sharedDomain?: string;
  /** More bindings, or replacements (EMAIL_*, GIT_*, LOG_RETENTION_*, …). GIT_GITEA_URL defaults to the run's git host. */
  bindings?: Record<string, string>;
  /** Print the Worker's console lines as they come (they are always kept in `logs`). Also on with CLOUD_WORKER_LOGS=1. */
  echoLogs?: boolean;
}

export interface CloudStartup {
  /** Finding or building the bundle (~2.5 s on a cache miss, a few ms on a hit). */
  bundleMs: number;
  bundleCached: boolean;
  /** Creating and migrating the cloud's database. */
  databaseMs: number;
  /** Miniflare constructed until workerd listens. */
  workerMs: number;
  /** Listening until the readiness probe (an authenticated route, through Neon to Postgres) answered. */
  readyMs: number;
  totalMs: number;
}

export type CloudWorker = Harness & {
  runtime: "worker";
  /** `http://127.0.0.1:<port>`, no trailing slash: the cloud API base for CLOUD_API_URL is `${url}` (routes under /api). */
  url: string;
  /** The cloud's own Postgres database (node-postgres URL; the Worker reaches it through the WebSocket proxy). */
  databaseUrl: string;
  /** The SECRET_KEYS the Worker runs with. */
  secretKeys: string;
  sharedDomain: string;
  /** Every binding the Worker was given (secrets included: for assertions, never print it). */
  bindings: Readonly<Record<string, string>>;
  /** The bucket behind presigned uploads, under this cloud's prefix. */
  uploadStore: PresignedStorage;
  startup: CloudStartup;
  /** A request to the cloud over HTTP, like Harness.request: `path` starts with `/`. */
  request(path: string, init?: RequestOptions): Promise<Response>;
  /** A new organization whose owner holds an all-tags personal access token, in the cloud's database. */
  seedTenant(opts?: { scopes?: string[] }): Promise<Member>;
  /** Another user in a cloud organization, with that role and a token. */
  seedMember(orgId: string, role: Role, opts?: { scopes?: string[] }): Promise<Member>;
  /** Runs the Worker's cron handler once (delivery drain, upload sweep, log retention). */
  scheduled(): Promise<void>;
  /** The cloud's upload sweep (it runs in the cron handler). */
  sweepUploads(): Promise<void>;
  /** Stops workerd, closes the seeding pool and drops the database (idempotent). */
  stop(): Promise<void>;
  /** The same as stop(). */
  close(): Promise<void>;
};

// --- the bundle ---------------------------------------------------------------------------

/** Everything `wrangler deploy --dry-run` reads: a change in any of it means another bundle. */
function sourceHash(): string {
  const hash = createHash("sha256");
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) hash.update(relative(ROOT, path)).update("\0").update(readFileSync(path)).update("\0");
    }
  };
  walk(join(ROOT, "functions"));
  walk(join(ROOT, "shared"));
  for (const file of ["wrangler.toml", "package.json", "package-lock.json", "tsconfig.json"]) {
    const path = join(ROOT, file);
    if (existsSync(path)) hash.update(file).update("\0").update(readFileSync(path));
  }
  return hash.digest("hex").slice(0, 16);
}

function run(command: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-20_000);
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    child.on("error", fail);
    child.on("close", (code) => done({ code, output }));
  });
}

const BUNDLE_CACHE = join(tmpdir(), "ws-cloud-worker-bundles");
const WRANGLER_ENV = {
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_LOG: "warn",
  NO_COLOR: "1",
};

/**
 * The bundle's directory for the current sources: built with `wrangler deploy --dry-run`
 * (on the Node running the tests: Node 24 under npm) into a scratch directory, then renamed
 * into place, so concurrent test files and runs share it without seeing half a bundle.
 */
export async function workerBundle(): Promise<{ dir: string; cached: boolean }> {
  const dir = join(BUNDLE_CACHE, sourceHash());
  if (existsSync(join(dir, "worker.js"))) return { dir, cached: true };
  mkdirSync(BUNDLE_CACHE, { recursive: true });
  const scratch = mkdtempSync(join(BUNDLE_CACHE, "build-"));
  try {
    // The package exports no bin path: find it beside package.json.
    const wrangler = join(dirname(createRequire(import.meta.url).resolve("wrangler/package.json")), "bin", "wrangler.js");
    const out = join(scratch, "out");
    const { code, output } = await run(process.execPath, [wrangler, "deploy", "--dry-run", "--outdir", out], WRANGLER_ENV);
    if (code !== 0 || !existsSync(join(out, "worker.js"))) throw new Error(`wrangler deploy --dry-run failed (exit ${code}):\n${output}`);
    try {
      renameSync(out, dir);
    } catch (e) {
      // Another process put the same bundle in place first.
      if (!existsSync(join(dir, "worker.js"))) throw e;
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  pruneBundles(dir);
  return { dir, cached: false };
}

/** Bundles of older sources, untouched for an hour (a run still starting from one has read it by then). */
function pruneBundles(keep: string) {
  for (const name of readdirSync(BUNDLE_CACHE)) {
    const path = join(BUNDLE_CACHE, name);
    if (path === keep) continue;
    try {
      if (Date.now() - statSync(path).mtimeMs > 3_600_000) rmSync(path, { recursive: true, force: true });
    } catch {
      // Removed by another run meanwhile.
    }
  }
}

/** The modules of a bundle: the entry alone (wrangler.toml has no module rules; the API reference's script is an asset). */
function bundleManifest(dir: string) {
  const modules: Record<string, { type: "esm"; contents: string }> = {
    "worker.js": { type: "esm", contents: readFileSync(join(dir, "worker.js"), "utf8") },
  };
  for (const name of readdirSync(dir)) {
    if (name === "worker.js" || name.endsWith(".map") || name === "README.md") continue;
    throw new Error(`cloud-worker: the bundle has a module this helper does not know how to load: ${name} (add its type from wrangler.toml's rules)`);
  }
  return { mainModule: "worker.js", modulesRoot: dir, modules };
}

/** compatibility_date and compatibility_flags, as wrangler.toml sets them. */
function compatibility(): { compatibilityDate: string; compatibilityFlags: string[] } {
  const toml = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
  const date = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(toml)?.[1];
  const flags = /^compatibility_flags\s*=\s*\[([^\]]*)\]/m.exec(toml)?.[1];
  if (!date) throw new Error("cloud-worker: wrangler.toml has no compatibility_date");
  return { compatibilityDate: date, compatibilityFlags: flags ? [...flags.matchAll(/"([^"]+)"/g)].map((m) => m[1]!) : [] };
}

// --- start ---------------------------------------------------------------------------------

function provided<K extends "pgUrl" | "pgKind" | "wsProxyUrl" | "s3Endpoint" | "s3Bucket" | "s3AccessKeyId" | "s3SecretAccessKey" | "gitServerUrl">(
  key: K,
): string | undefined {
  try {
    return (inject(key) as string | undefined) || undefined;
  } catch {
    // Outside a vitest worker: no provided values.
    return undefined;
  }
}

/** Polls until an authenticated route answers 401 to an unknown token: workerd, the bindings, Neon through the proxy and Postgres all work. */
async function waitReady(url: string, logs: string[]): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let last = "no answer yet";
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}/api/me`, { headers: { authorization: "Bearer wsp_cloud-worker-readiness-probe" }, signal: AbortSignal.timeout(5_000) });
      const body = (await res.text()).slice(0, 2_000);
      if (res.status === 401) return;
      last = `${res.status} ${body}`;
      // A 500 is the Worker misconfigured or the database unreachable: it will not get better.
      if (res.status >= 500) break;
    } catch (e) {
      last = String(e);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`cloud-worker: not ready at ${url} (last: ${last})\n--- Worker output ---\n${logs.slice(-60).join("\n")}`);
}

export async function startCloudWorker(opts: CloudWorkerOptions = {}): Promise<CloudWorker> {
  const t0 = performance.now();
  const cleanups: Array<() => Promise<unknown>> = [];
  const cleanUp = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
  };
  const logs: string[] = [];
  try {
    const bundle = await workerBundle();
    const t1 = performance.now();

    const pgServerUrl = opts.pgServerUrl ?? provided("pgUrl") ?? process.env.TEST_DATABASE_URL ?? DEFAULT_PG_SERVER;
    if (!opts.pgServerUrl && provided("pgKind") === "none") throw new PostgresUnavailable();
    const database = await freshDatabase(pgServerUrl, opts.databasePrefix ?? "cloud", { migrate: true });
    cleanups.push(database.drop);
    const seeding = await openPostgres(database.url, { migrate: false, max: 4 });
    cleanups.push(seeding.close);
    const t2 = performance.now();

    let wsProxyUrl = opts.wsProxyUrl ?? provided("wsProxyUrl");
    if (!wsProxyUrl) {
      const proxy = await startWsProxy({ target: databaseTarget(database.url) });
      cleanups.push(proxy.close);
      wsProxyUrl = proxy.url;
    }

    const s3 = opts.s3 ?? {
      endpoint: provided("s3Endpoint") ?? "",
      bucket: provided("s3Bucket") ?? "",
      accessKeyId: provided("s3AccessKeyId") ?? "",
      secretAccessKey: provided("s3SecretAccessKey") ?? "",
    };
    if (!s3.endpoint) throw new Error("cloud-worker: no S3 server (pass `s3`, or run under the vitest config's test/setup/s3.ts)");
    const s3Region = s3.region ?? "us-east-1";
    const s3Prefix = opts.s3Prefix ?? `cloud-${Math.random().toString(36).slice(2, 10)}/`;
    const secretKeys = opts.secretKeys ?? CLOUD_SECRET_KEYS;
    const sharedDomain = opts.sharedDomain ?? CLOUD_SHARED_DOMAIN;
    const gitServerUrl = provided("gitServerUrl");
    const bindings: Record<string, string> = {
      DATABASE_URL: database.url,
      SECRET_KEYS: secretKeys,
      NEON_WS_PROXY: wsProxyUrl,
      SHARED_DOMAIN: sharedDomain,
      OUTBOUND_ALLOW_PRIVATE: "true",
      S3_ENDPOINT: s3.endpoint,
      S3_REGION: s3Region,
      S3_BUCKET: s3.bucket,
      S3_ACCESS_KEY_ID: s3.accessKeyId,
      S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
      S3_PREFIX: s3Prefix,
      ...(gitServerUrl ? { GIT_GITEA_URL: gitServerUrl } : {}),
      ...opts.bindings,
    };

    const echo = opts.echoLogs ?? process.env.CLOUD_WORKER_LOGS === "1";
    // Loaded here, not at the top: test files that import this module's types only do not pay for Miniflare.
    const { Miniflare } = await import("miniflare");
    const mf: Miniflare = new Miniflare({
      host: "127.0.0.1",
      port: 0,
      workers: [
        {
          config: {
            name: "workspace-service",
            ...compatibility(),
            manifest: bundleManifest(bundle.dir),
            env: {
              ...Object.fromEntries(Object.entries(bindings).map(([name, value]) => [name, { type: "text" as const, value }])),
              ASSETS: { type: "assets" as const },
            },
            // wrangler.toml's [assets]: the console, and the API reference's script the Worker reads through ASSETS.
            assets: { directory: join(ROOT, "console"), hasUserWorker: true, runWorkerFirst: true },
          },
        },
      ],
      handleStructuredLogs: ({ level, message }) => {
        const line = level === "log" || level === "info" ? message : `[${level}] ${message}`;
        logs.push(line);
        if (logs.length > MAX_LOG_LINES) logs.splice(0, logs.length - MAX_LOG_LINES);
        if (echo) process.stderr.write(`[cloud] ${line}\n`);
      },
    });
    cleanups.push(() => mf.dispose());
    const url = (await mf.ready).origin;
    const t3 = performance.now();
    await waitReady(url, logs);
    const t4 = performance.now();

    const scheduled = async () => {
      const worker = await mf.getWorker();
      await worker.scheduled({ cron: "* * * * *" });
    };
    let stopped: Promise<void> | undefined;
    const stop = () => (stopped ??= cleanUp());
    const cloud: CloudWorker = {
      runtime: "worker",
      realConcurrency: true,
      url,
      databaseUrl: database.url,
      secretKeys,
      sharedDomain,
      bindings,
      db: seeding.db as Db,
      keyring: (await createKeyring(secretKeys)) as Keyring,
      logs,
      uploadStore: createS3Storage({
        endpoint: s3.endpoint,
        region: s3Region,
        bucket: s3.bucket,
        accessKeyId: s3.accessKeyId,
        secretAccessKey: s3.secretAccessKey,
        prefix: s3Prefix,
      }),
      startup: {
        bundleMs: Math.round(t1 - t0),
        bundleCached: bundle.cached,
        databaseMs: Math.round(t2 - t1),
        workerMs: Math.round(t3 - t2),
        readyMs: Math.round(t4 - t3),
        totalMs: Math.round(t4 - t0),
      },
      request: async (path, init) => {
        const req = buildRequest(path, init);
        return fetch(url + path, { method: req.method, headers: req.headers, body: req.body, duplex: "half", redirect: "manual" } as RequestInit);
      },
      seedTenant: (o) => seedTenant(cloud, o),
      seedMember: (orgId, role, o) => seedMember(cloud, orgId, role, o),
      scheduled,
      sweepUploads: scheduled,
      stop,
      close: stop,
    };
    return cloud;
  } catch (e) {
    await cleanUp();
    if (e instanceof Error && logs.length > 0 && !e.message.includes("--- Worker output ---")) {
      e.message += `\n--- Worker output ---\n${logs.slice(-60).join("\n")}`;
    }
    throw e;
  }
}

/**
 * startCloudWorker in beforeAll, stop in afterAll; the object is filled in once started.
 * Without Postgres (never in CI) the file's tests are reported skipped, as useHarness does.
 */
export function useCloudWorker(opts: CloudWorkerOptions = {}): CloudWorker {
  const cloud = {} as CloudWorker;
  let unavailable = false;
  beforeAll(async () => {
    try {
      Object.assign(cloud, await startCloudWorker(opts));
    } catch (e) {
      if (!(e instanceof PostgresUnavailable)) throw e;
      unavailable = true;
    }
  }, 90_000);
  beforeEach((ctx) => {
    if (unavailable) ctx.skip();
  });
  afterAll(async () => {
    await cloud.stop?.();
  });
  return cloud;
}
