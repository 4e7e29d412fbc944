/**
 * Health and readiness, for load balancers and orchestrators, at the root (not
 * under /api, where probes are conventionally looked for):
 * - GET /healthz: the process serves. No database, no authentication; 200 while
 *   the process can answer at all.
 * - GET /readyz: the process can do its work: the database answers within a
 *   deadline, its migrations are the code's, and (self-hosted) the runner's poll
 *   loop and the edge's route-table feed have completed a pass recently. 503 names
 *   each check's state (readiness.ts).
 *
 * Both are public and never authenticate (an Authorization header is ignored: no
 * token lookup behind a probe), answer `Cache-Control: no-store`, and are not
 * rate-limited: a load balancer may poll every second.
 */
import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../shared/http/context";
import { problem } from "../../shared/http/problem-schema";
import { createReadiness, DATABASE_DEADLINE_MS, type LoopProbe, MIGRATIONS_CACHE_MS } from "./readiness";

const Healthy = z.object({ status: z.literal("ok") }).openapi("Health");

const Checks = z.record(z.string(), z.string()).openapi({
  description:
    "Each check's state: `ok`, or why not. `database`: `ok`, `unreachable` or `timeout: …`. `migrations`: `ok`, `behind: 0025 < 0027` (the database's level < the code's), `ahead: 0028 > 0027` (migrated by a newer version) or `unknown` (database down). Self-hosted also `edge` (the route-table feed) and, when the runner runs, `runner` (its poll loop): `ok`, `stalled 95 s` or `starting: no pass yet`.",
  example: { database: "ok", migrations: "behind: 0025 < 0027", runner: "stalled 95 s" },
});

const Ready = z.object({ status: z.literal("ready"), checks: Checks }).openapi("Ready");
const Unready = z.object({ status: z.literal("unready"), checks: Checks }).openapi("Unready");

// Not `defineRoute`: its guard would look up an Authorization header a prober happens to send, a database read behind /healthz.
const common = { tags: ["Operations"], security: [] as [], "x-permission": "public" as const };
// Listed for the self-hosted listener's routing (and the "every operation has a 4xx" contract): the API itself always answers these paths.
const wrongHost = problem(
  "Not from this route: on the self-hosted listener a request whose Host is not one of the API's names (PUBLIC_URL, API_HOSTS, loopback names, the bound addresses) goes to that host's app, or to the edge's own 404 when none is deployed there. Probe the API by one of its names",
);

const healthz = createRoute({
  ...common,
  method: "get",
  path: "/healthz",
  operationId: "getHealthz",
  summary: "Liveness: the process serves",
  description:
    'Public, no token. 200 `{status: "ok"}` whenever the process answers; touches no database, so a database outage does not make an orchestrator restart a healthy process (use /readyz to take it out of rotation). Not rate-limited.',
  responses: { 200: { description: "The process serves", content: { "application/json": { schema: Healthy } } }, 404: wrongHost },
});

const readyz = createRoute({
  ...common,
  method: "get",
  path: "/readyz",
  operationId: "getReadyz",
  summary: "Readiness: the database answers, migrations are current, background loops tick",
  description: `Public, no token, not rate-limited, at most one database query: \`select 1\` within ${DATABASE_DEADLINE_MS / 1000} s (the migration level is read in that query's place at most every ${MIGRATIONS_CACHE_MS / 1000} s). On the Worker the level is only read, never applied (migrations are a deploy step). 503 names the failing check. The answer carries states and levels only: no error text, host or dependency version.`,
  responses: {
    200: { description: "Ready: every check is `ok`", content: { "application/json": { schema: Ready } } },
    404: wrongHost,
    503: { description: "Not ready: `checks` says which check failed and how", content: { "application/json": { schema: Unready } } },
  },
});

/** The two probes; `loops` are the process's background loops (self-hosted), read by /readyz. */
export function healthRouter(opts: { loops?: LoopProbe[] } = {}) {
  const readiness = createReadiness({ loops: opts.loops });
  return new OpenAPIHono<AppEnv>()
    .openapi(healthz, (c) => {
      c.header("cache-control", "no-store");
      return c.json({ status: "ok" as const }, 200);
    })
    .openapi(readyz, async (c) => {
      c.header("cache-control", "no-store");
      // Wall time, as the loops record it (not the app clock a test may fake).
      const { ready, checks } = await readiness(c.get("db"), new Date());
      return ready ? c.json({ status: "ready" as const, checks }, 200) : c.json({ status: "unready" as const, checks }, 503);
    });
}

/** The probes' paths (their successful answers are not logged: a load balancer polls them every second). */
export const PROBE_PATHS = new Set(["/healthz", "/readyz"]);
