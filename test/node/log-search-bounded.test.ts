/**
 * A log search (`GET /api/projects/:id/logs?q=…`) never stalls the instance: on a real
 * self-hosted server, embedded PGlite and Postgres, a project with ~112,000 runtime lines
 * (bulk-inserted by SQL) is searched for a string no line holds but a few planted ones,
 * while `GET /api/me` and an edge request are probed back to back. The search answers
 * (partial pages continued with `nextCursor` until the end find exactly the planted lines)
 * and the probes stay responsive. The measured latencies are printed.
 */
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import { logSearchSettings } from "../../functions/logs/store";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../functions/self-hosted/start";
import { openPglite } from "../../shared/db/pglite";
import { useCleanups } from "../support/cleanups";
import { freshDatabase } from "../support/fresh-database";

const { cleanups, tempDir } = useCleanups("ws-log-search-");
const TOKEN = "log-search-owner-token-0123456789abcdef0123456789abcdef";
const LINES = 112_000;
/** Lines holding the searched text (in another case), from the newest end to the oldest. */
const PLANTED = [LINES - 3, LINES - 2_000, 70_001, 40_000, 2];

/** One statement: every line is a runtime line of ~200 characters; the planted ones contain `ZzZz`. */
function seedSql(projectId: string): { text: string; values: unknown[] } {
  return {
    text: `insert into log_lines (project_id, seq, org_id, deployment_id, kind, stream, at, message, fields)
      select $1, g, (select org_id from projects where id = $1), null, 'runtime', case when g % 7 = 0 then 'stderr' else 'stdout' end,
        now() - make_interval(secs => ($2 - g) / 10.0),
        'GET /api/items/' || g || ' 200 ' || md5(g::text) || ' handled by worker ' || (g % 8) || ' in ' || (g % 97) || ' ms'
          || case when g = any($3::int[]) then ' found ZzZz here' else '' end || ' ' || repeat('payload ', 12),
        null
      from generate_series(1, $2) g`,
    values: [projectId, LINES, PLANTED],
  };
}

const counterSql = "insert into log_sequences (project_id, last) values ($1, $2) on conflict (project_id) do update set last = excluded.last";

async function start(env: Record<string, string>): Promise<RunningServer> {
  const config = loadNodeConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "silent",
    RUNNER: "off",
    SHARED_DOMAIN: "apps.test",
    WORKSPACE_OWNER_TOKEN: TOKEN,
    // The sweep at start would cut the project to the default 50,000 lines.
    LOG_RETENTION_LINES: "1000000",
    ...env,
  });
  return startSelfHosted(config, () => {});
}

async function api<T>(server: RunningServer, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

/** One request to the server's port with an app's Host (the edge answers it: nothing is deployed). */
function viaEdge(server: RunningServer, host: string): Promise<number> {
  const port = Number(new URL(server.url).port);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path: "/", headers: { host } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode!));
    });
    req.on("error", reject);
    req.end();
  });
}

interface Page {
  items: { id: string; message: string }[];
  nextCursor: string | null;
  partial: boolean;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? 0;
};
const fmt = (xs: number[]) => `n=${xs.length} p50=${pct(xs, 50).toFixed(1)} p99=${pct(xs, 99).toFixed(1)} max=${Math.max(...xs).toFixed(1)} ms`;

/** Probes `GET /api/me` and the edge back to back until `until` settles; their latencies in ms, into `into` as they come. */
async function probe(server: RunningServer, host: string, until: Promise<unknown>, into = { me: [] as number[], edge: [] as number[] }) {
  const { me, edge } = into;
  let done = false;
  void until.finally(() => {
    done = true;
  });
  while (!done) {
    let t = performance.now();
    const res = await fetch(`${server.url}/api/me`, { headers: { authorization: `Bearer ${TOKEN}` } });
    await res.arrayBuffer();
    expect(res.status).toBe(200);
    me.push(performance.now() - t);
    t = performance.now();
    await viaEdge(server, host);
    edge.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, 5));
  }
  return { me, edge };
}

/** Searches `q` from the newest line, following `nextCursor` to the end; the pages and their durations. */
async function searchAll(server: RunningServer, projectId: string, q: string) {
  const pages: Page[] = [];
  const took: number[] = [];
  let cursor: string | null = null;
  do {
    const t = performance.now();
    const page: Page = await api<Page>(server, "GET", `/api/projects/${projectId}/logs?q=${q}&limit=100${cursor ? `&cursor=${cursor}` : ""}`);
    took.push(performance.now() - t);
    pages.push(page);
    cursor = page.nextCursor;
  } while (cursor !== null && pages.length < 500);
  return { pages, took };
}

async function searchWhileProbing(label: string, server: RunningServer, project: { id: string; slug: string }) {
  const host = `${project.slug}.apps.test`;
  // Warm-up: the first requests after a start pay for caches and the start's own work.
  for (let i = 0; i < 5; i++) await probe(server, host, Promise.resolve());
  // Unloaded latencies, for comparison.
  const idle = await probe(server, host, new Promise((r) => setTimeout(r, 500)));
  // Searches back to back, at least two and until enough probes have run during them (a fast search takes few).
  const loaded = { me: [] as number[], edge: [] as number[] };
  const search = (async () => {
    const runs: Array<Awaited<ReturnType<typeof searchAll>>> = [];
    while (runs.length < 2 || (loaded.me.length < 10 && runs.length < 50)) runs.push(await searchAll(server, project.id, "zzzz"));
    return runs;
  })();
  await probe(server, host, search, loaded);
  const [first, second] = await search;
  const ids = (r: typeof first) => r!.pages.flatMap((p) => p.items.map((l) => Number(l.id))).sort((a, b) => b - a);
  expect(ids(second)).toEqual(ids(first));
  const { pages, took } = first!;
  console.log(
    `[${label}] search: ${pages.length} page(s) (${pages.filter((p) => p.partial).length} partial), ${took.map((t) => t.toFixed(0)).join("/")} ms; ` +
      `idle /api/me ${fmt(idle.me)}; during search /api/me ${fmt(loaded.me)}, edge ${fmt(loaded.edge)}`,
  );
  // Every planted line is found, once, and nothing else; the last page is complete.
  const found = pages.flatMap((p) => p.items);
  expect(found.map((l) => Number(l.id)).sort((a, b) => b - a)).toEqual(PLANTED);
  for (const l of found) expect(l.message).toContain("ZzZz");
  expect(pages.at(-1)!.partial).toBe(false);
  for (const p of pages) if (p.partial) expect(p.nextCursor).toMatch(/^[0-9]+$/);
  // No page holds the server past its budget by much; the probes stay responsive (a generous bound for a busy machine).
  expect(Math.max(...took)).toBeLessThan(logSearchSettings.budgetMs + 2_000);
  expect(loaded.me.length).toBeGreaterThanOrEqual(10);
  expect(Math.max(...loaded.me)).toBeLessThan(1_000);
  expect(Math.max(...loaded.edge)).toBeLessThan(1_000);
}

describe("a log search over 112,000 lines", () => {
  it("on the embedded database: answers in bounded pages while /api/me and the edge stay responsive", async () => {
    const dir = tempDir();
    let server = await start({ DATA_DIR: dir });
    // Closes whichever server is current (closing twice is a no-op).
    cleanups.push(() => server.close());
    const project = await api<{ id: string; slug: string }>(server, "POST", "/api/projects", { name: "Chatty" });
    await server.close();
    // The embedded database is the server's own: seeded while it is stopped.
    const db = await openPglite({ dataDir: join(dir, "pglite") });
    const seed = seedSql(project.id);
    await db.client.query(seed.text, seed.values);
    await db.client.query(counterSql, [project.id, LINES]);
    await db.close();
    server = await start({ DATA_DIR: dir });
    await searchWhileProbing("pglite", server, project);
  }, 120_000);

  it.runIf(inject("pgKind") === "postgres")(
    "on Postgres: answers in bounded pages while /api/me and the edge stay responsive",
    async () => {
      const own = await freshDatabase(inject("pgUrl"), "ws_log_search", { migrate: true });
      cleanups.push(() => own.drop());
      const server = await start({ DATA_DIR: tempDir(), DATABASE_URL: own.url });
      cleanups.push(() => server.close());
      const project = await api<{ id: string; slug: string }>(server, "POST", "/api/projects", { name: "Chatty" });
      const client = new pg.Client({ connectionString: own.url });
      await client.connect();
      try {
        const seed = seedSql(project.id);
        await client.query(seed.text, seed.values);
        await client.query(counterSql, [project.id, LINES]);
        await client.query("analyze log_lines");
      } finally {
        await client.end();
      }
      await searchWhileProbing("postgres", server, project);
    },
    120_000,
  );
});
