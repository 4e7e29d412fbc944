/**
 * GET /metrics as `npm start` serves it: a real self-hosted server (Postgres,
 * runner on) builds and serves the fixture app; API requests, edge requests and
 * the build show up in a scrape of METRICS_BIND's listener, parsed by a
 * Prometheus text-format parser. Request series are by route template, never the
 * raw path; histograms are cumulative; nothing secret appears in the exposition.
 * Who may scrape: METRICS_TOKEN on both listeners, METRICS_BIND alone serves
 * only its own listener (the main port's /metrics is 404), neither serves none.
 */
import parsePrometheusTextFormat, { type MetricFamily, type Sample } from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../functions/self-hosted/start";
import { metricsSettingsFromEnv } from "../../functions/operations/metrics/settings";
import { useCleanups } from "../support/cleanups";
import { startGitServer, type GitTestServer } from "../support/git-server";
import { rawGet } from "../support/raw-http";
import { pushApp, runnerFixture } from "../support/runner-harness";
import { TEST_SECRET_KEYS } from "../support/test-keys";

const { cleanups, tempDir } = useCleanups("ws-metrics-");

const SHARED = "apps.test";
// Canaries: none of these may appear in a scrape.
const OWNER_TOKEN = "metrics-owner-canary-0123456789abcdef0123456789";
const METRICS_TOKEN = "metrics-token-canary-0123456789abcdef0123456789";
const SECRET_VALUE = "env-secret-canary-5f3a9c";
const QUERY_SECRET = "query-secret-canary-77e1";

/** A request to 127.0.0.1:port with the given Host (the main port's API, an app's Host, or the metrics listener). */
const get = (port: number, path: string, headers: Record<string, string> = {}) => rawGet(port, undefined, path, { headers });

/** The port METRICS_BIND's listener took (port 0: a free one), from the start line. */
function metricsPortOf(lines: string[]): number {
  const line = lines.find((l) => l.startsWith("Metrics on "));
  if (!line) throw new Error(`no metrics line in ${lines.join("\n")}`);
  return Number(/:(\d+)\/metrics$/.exec(line)![1]);
}

const family = (families: MetricFamily[], name: string) => {
  const f = families.find((m) => m.name === name);
  if (!f) throw new Error(`${name} is not in the scrape`);
  return f;
};
const labelled = (f: MetricFamily, labels: Record<string, string>): Sample[] =>
  f.metrics.filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
const sumOf = (f: MetricFamily, labels: Record<string, string>) => labelled(f, labels).reduce((n, m) => n + Number(m.value), 0);

interface HistogramSeries {
  labels: Record<string, string>;
  /** Cumulative count per upper bound (`le`). */
  buckets: Record<string, number>;
  sum: number;
  count: number;
}

/**
 * A histogram's series. The parser folds a labelled histogram into one sample (its flattening keeps neither the
 * labels nor the sum and count), so after checking the family's type the text is parsed again without the
 * histogram's TYPE line: `_bucket`, `_sum` and `_count` then come back as untyped families with every label.
 */
function histogram(text: string, name: string): HistogramSeries[] {
  expect(family(parsePrometheusTextFormat(text), name).type).toBe("HISTOGRAM");
  const untyped = parsePrometheusTextFormat(
    text
      .split("\n")
      .filter((l) => l !== `# TYPE ${name} histogram` && !l.startsWith(`# HELP ${name} `))
      .join("\n"),
  );
  // prom-client writes each series' buckets, sum and count together: each suffix comes back as several families.
  const samples = (suffix: string) => untyped.filter((f) => f.name === `${name}_${suffix}`).flatMap((f) => f.metrics);
  const key = (labels: Record<string, string> | undefined) =>
    JSON.stringify(
      Object.entries(labels ?? {})
        .filter(([k]) => k !== "le")
        .sort(),
    );
  const series = new Map<string, HistogramSeries>();
  for (const m of samples("count")) series.set(key(m.labels), { labels: m.labels ?? {}, buckets: {}, sum: Number.NaN, count: Number(m.value) });
  for (const m of samples("sum")) series.get(key(m.labels))!.sum = Number(m.value);
  for (const m of samples("bucket")) series.get(key(m.labels))!.buckets[m.labels!.le!] = Number(m.value);
  return [...series.values()];
}

const seriesOf = (series: HistogramSeries[], labels: Record<string, string>) =>
  series.filter((m) => Object.entries(labels).every(([k, v]) => m.labels[k] === v));

/** Each series: buckets non-decreasing in `le`, ending at `+Inf` equal to the count; a non-negative sum. */
function expectConsistentHistogram(series: HistogramSeries[]) {
  expect(series.length).toBeGreaterThan(0);
  for (const m of series) {
    const bounds = Object.keys(m.buckets).sort((a, b) => (a === "+Inf" ? 1 : b === "+Inf" ? -1 : Number(a) - Number(b)));
    expect(bounds.at(-1)).toBe("+Inf");
    const counts = bounds.map((b) => m.buckets[b]!);
    for (let i = 1; i < counts.length; i++) expect(counts[i]).toBeGreaterThanOrEqual(counts[i - 1]!);
    expect(counts.at(-1)).toBe(m.count);
    expect(m.sum).toBeGreaterThanOrEqual(0);
  }
}

describe("metrics of npm start's server (Postgres, runner on, METRICS_BIND and METRICS_TOKEN)", () => {
  const s = {} as { git: GitTestServer; server: RunningServer; port: number; metricsPort: number; fixture: Awaited<ReturnType<typeof runnerFixture>> };
  const lines: string[] = [];

  beforeAll(async () => {
    s.git = await startGitServer();
    s.fixture = await runnerFixture("ws_metrics");
    const config = loadNodeConfig({
      PORT: "0",
      HOST: "127.0.0.1",
      DATA_DIR: s.fixture.dataDir,
      DATABASE_URL: s.fixture.db.url,
      SECRET_KEYS: TEST_SECRET_KEYS,
      WORKSPACE_OWNER_TOKEN: OWNER_TOKEN,
      LOG_LEVEL: "silent",
      SHARED_DOMAIN: SHARED,
      OUTBOUND_ALLOW_PRIVATE: "true",
      GIT_GITEA_URL: s.git.url,
      RUNNER: "on",
      BUILD_TIMEOUT: "60s",
      HEALTH_TIMEOUT: "20s",
      STOP_GRACE: "1s",
      SMOKE_WINDOW: "0s",
      METRICS_BIND: "127.0.0.1:0",
      METRICS_TOKEN,
    });
    s.server = await startSelfHosted(config, (l) => lines.push(l));
    s.port = Number(new URL(s.server.url).port);
    s.metricsPort = metricsPortOf(lines);
  }, 60_000);

  afterAll(async () => {
    await s.server?.close();
    await s.git?.close();
    await s.fixture?.drop();
  });

  async function api<T>(method: string, path: string, json?: unknown, expected = 200): Promise<T> {
    const res = await fetch(`${s.server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${OWNER_TOKEN}`, ...(json ? { "content-type": "application/json" } : {}) },
      body: json ? JSON.stringify(json) : undefined,
    });
    const body = await res.text();
    if (res.status !== expected) throw new Error(`${method} ${path}: ${res.status} ${body}`);
    return (body ? JSON.parse(body) : undefined) as T;
  }

  async function scrape(): Promise<{ text: string; families: MetricFamily[] }> {
    const res = await get(s.metricsPort, "/metrics", { authorization: `Bearer ${METRICS_TOKEN}` });
    expect(res.status, res.body).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4/);
    return { text: res.body, families: parsePrometheusTextFormat(res.body) };
  }

  async function waitReady(id: string) {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const d = await api<{ status: string; failureReason: string | null }>("GET", `/api/deployments/${id}`);
      if (d.status === "ready") return;
      if (d.status === "failed" || d.status === "canceled") throw new Error(`deployment ${d.status}: ${d.failureReason}`);
      if (Date.now() > deadline) throw new Error(`deployment still ${d.status}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  it("counts API requests by route template and status, edge requests by status and rule, the build and the running app; histograms are consistent; no secret in the output", async () => {
    const project = await api<{ id: string; slug: string }>("POST", "/api/projects", { name: "Metrics app" }, 201);
    await api("PATCH", `/api/projects/${project.id}/env`, { upserts: [{ key: "API_KEY", value: SECRET_VALUE, isSecret: true }] });
    for (let i = 0; i < 3; i++) await api("GET", `/api/projects/${project.id}`);
    // Another id on the same route: the same series. A query string is never a label.
    await api("GET", `/api/projects/prj_doesnotexist?token=${QUERY_SECRET}`, undefined, 404);
    await api("GET", `/api/no-such-route/${QUERY_SECRET}`, undefined, 404);

    const git = s.git;
    const repo = await git.createRepo();
    await pushApp(git, repo.owner, repo.repo);
    await api("POST", `/api/projects/${project.id}/git/link`, { provider: "gitea", owner: repo.owner, repo: repo.repo });
    const deployment = await api<{ id: string }>("POST", "/api/deployments", { projectId: project.id }, 201);
    await waitReady(deployment.id);
    const host = `${project.slug}.${SHARED}`;
    expect((await get(s.port, `/hello?secret=${QUERY_SECRET}`, { host })).status).toBe(200);
    expect((await get(s.port, "/", { host: `unknown-app.${SHARED}` })).status).toBe(404);

    // Finished builds are read once they are SETTLE_MS (5 s) old: scrape until the build is in.
    let scraped = await scrape();
    const deadline = Date.now() + 20_000;
    while ((seriesOf(histogram(scraped.text, "wsp_build_duration_seconds"), { result: "ready" })[0]?.count ?? 0) < 1) {
      if (Date.now() > deadline)
        throw new Error(
          `the finished build never appeared:\n${scraped.text
            .split("\n")
            .filter((l) => /^wsp_(build|metrics|deployments)/.test(l))
            .join("\n")}`,
        );
      await new Promise((r) => setTimeout(r, 500));
      scraped = await scrape();
    }
    const { text, families } = scraped;

    const requests = family(families, "wsp_http_requests_total");
    expect(requests.type).toBe("COUNTER");
    expect(sumOf(requests, { method: "GET", route: "/api/projects/:id", status: "200" })).toBeGreaterThanOrEqual(3);
    expect(sumOf(requests, { method: "GET", route: "/api/projects/:id", status: "404" })).toBe(1);
    expect(sumOf(requests, { method: "POST", route: "/api/projects", status: "201" })).toBe(1);
    expect(sumOf(requests, { method: "GET", route: "unmatched", status: "404" })).toBe(1);
    // Templates only: no series names a project id or a raw path.
    for (const m of requests.metrics) expect(m.labels!.route).not.toMatch(/prj_|no-such-route/);

    const latency = histogram(text, "wsp_http_request_duration_seconds");
    expectConsistentHistogram(latency);
    expect(seriesOf(latency, { method: "GET", route: "/api/projects/:id", status: "200" })[0]!.count).toBe(
      sumOf(requests, { method: "GET", route: "/api/projects/:id", status: "200" }),
    );

    const edge = family(families, "wsp_edge_requests_total");
    expect(sumOf(edge, { status: "200", rule: "none" })).toBeGreaterThanOrEqual(1);

    const builds = histogram(text, "wsp_build_duration_seconds");
    expectConsistentHistogram(builds);
    expect(seriesOf(builds, { result: "ready" })[0]!.sum).toBeGreaterThan(0);

    expect(sumOf(family(families, "wsp_deployments"), { status: "ready" })).toBe(1);
    expect(sumOf(family(families, "wsp_deployments"), { status: "failed" })).toBe(0);
    expect(sumOf(family(families, "wsp_apps_running"), {})).toBe(1);
    const outbox = family(families, "wsp_outbox_sends");
    expect(labelled(outbox, { status: "pending", kind: "webhook" })).toHaveLength(1);
    expect(family(families, "wsp_notification_delivery_attempts_total").type).toBe("COUNTER");
    expect(sumOf(family(families, "wsp_metrics_database_up"), {})).toBe(1);

    const queries = histogram(text, "wsp_db_query_duration_seconds");
    expectConsistentHistogram(queries);
    expect(queries[0]!.count).toBeGreaterThan(0);
    expect(labelled(family(families, "wsp_db_pool_connections"), { state: "total" })).toHaveLength(1);
    expect(sumOf(family(families, "wsp_log_lines_total"), { outcome: "ingested" })).toBeGreaterThan(0);
    // prom-client's defaults: event-loop lag and the process's own.
    expect(family(families, "nodejs_eventloop_lag_p99_seconds").type).toBe("GAUGE");
    expect(family(families, "process_resident_memory_bytes").type).toBe("GAUGE");

    for (const canary of [OWNER_TOKEN, METRICS_TOKEN, SECRET_VALUE, QUERY_SECRET, TEST_SECRET_KEYS, s.fixture.db.url, project.id, project.slug])
      expect(text, canary).not.toContain(canary);
  }, 120_000);

  it("METRICS_TOKEN is required on both listeners: 401 without it or with another; the main port serves /metrics with it", async () => {
    expect((await get(s.metricsPort, "/metrics")).status).toBe(401);
    expect((await get(s.metricsPort, "/metrics", { authorization: `Bearer ${METRICS_TOKEN}x` })).status).toBe(401);
    // The owner's API token is not the metrics token.
    expect((await get(s.metricsPort, "/metrics", { authorization: `Bearer ${OWNER_TOKEN}` })).status).toBe(401);
    const main = await get(s.port, "/metrics");
    expect(main.status).toBe(401);
    expect(main.headers["content-type"]).toBe("application/problem+json");
    expect(main.body).not.toContain(METRICS_TOKEN);
    const authorized = await get(s.port, "/metrics", { authorization: `Bearer ${METRICS_TOKEN}` });
    expect(authorized.status).toBe(200);
    expect(parsePrometheusTextFormat(authorized.body).some((f) => f.name === "wsp_http_requests_total")).toBe(true);
    // The metrics listener serves nothing else.
    expect((await get(s.metricsPort, "/api/projects", { authorization: `Bearer ${METRICS_TOKEN}` })).status).toBe(404);
    expect((await get(s.metricsPort, "/healthz")).status).toBe(404);
  });
});

describe("who may scrape without METRICS_TOKEN (runner off)", () => {
  /** `postgres`: a fresh migrated database (quick); else embedded PGlite, which migrates at start (slow on a busy machine). */
  async function start(env: Record<string, string>, postgres = false) {
    const lines: string[] = [];
    let database: Record<string, string> = {};
    let dataDir = tempDir();
    if (postgres) {
      const fixture = await runnerFixture("ws_metrics_none");
      cleanups.push(() => fixture.drop());
      database = { DATABASE_URL: fixture.db.url, SECRET_KEYS: TEST_SECRET_KEYS };
      dataDir = fixture.dataDir;
    }
    const server = await startSelfHosted(
      loadNodeConfig({ PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent", DATA_DIR: dataDir, SHARED_DOMAIN: SHARED, RUNNER: "off", ...database, ...env }),
      (l) => lines.push(l),
    );
    cleanups.push(() => server.close());
    return { port: Number(new URL(server.url).port), lines };
  }

  it("METRICS_BIND alone (embedded PGlite): its listener serves /metrics without a token, the main port's /metrics is 404", async () => {
    const { port, lines } = await start({ METRICS_BIND: "127.0.0.1:0" });
    const metricsPort = metricsPortOf(lines);
    expect((await get(port, "/healthz")).status).toBe(200);
    // A query through the instrumented client (the start's own reads ran before the metrics existed).
    expect((await get(port, "/readyz")).status).toBe(200);
    const scraped = await get(metricsPort, "/metrics");
    expect(scraped.status).toBe(200);
    const families = parsePrometheusTextFormat(scraped.body);
    expect(sumOf(family(families, "wsp_http_requests_total"), { route: "/healthz", status: "200" })).toBeGreaterThanOrEqual(1);
    // The embedded database has no pool; its statements are timed all the same.
    expect(families.some((f) => f.name === "wsp_db_pool_connections")).toBe(false);
    expect(histogram(scraped.body, "wsp_db_query_duration_seconds")[0]!.count).toBeGreaterThan(0);
    expect(sumOf(family(families, "wsp_deployments"), { status: "queued" })).toBe(0);
    expect((await get(port, "/metrics")).status).toBe(404);
  }, 180_000);

  it("neither METRICS_BIND nor METRICS_TOKEN: /metrics is not served (404) and no listener is opened", async () => {
    const { port, lines } = await start({}, true);
    expect((await get(port, "/metrics")).status).toBe(404);
    expect(lines.some((l) => l.startsWith("Metrics on "))).toBe(false);
  });

  it("a bad METRICS_BIND or a short METRICS_TOKEN is refused at start, naming the setting", () => {
    expect(() => metricsSettingsFromEnv({ METRICS_BIND: "9464" })).toThrow(/^Invalid configuration METRICS_BIND: must be host:port/);
    expect(() => metricsSettingsFromEnv({ METRICS_BIND: "127.0.0.1:70000" })).toThrow(/METRICS_BIND/);
    expect(() => metricsSettingsFromEnv({ METRICS_TOKEN: "short" })).toThrow(/^Invalid configuration METRICS_TOKEN/);
    expect(metricsSettingsFromEnv({ METRICS_BIND: "[::1]:9464" })).toEqual({ bind: { host: "::1", port: 9464 }, token: undefined });
    expect(metricsSettingsFromEnv({})).toEqual({ bind: undefined, token: undefined });
  });
});
