/**
 * API requests by route template: Hono's matched route (`/api/projects/:id`),
 * never the raw URL, so the number of series is bounded by the routes the code
 * has; a request no route matched is `unmatched`. Counted as each request is
 * answered (the Node adapter passes countRequest as createApp's onAnswered); the
 * edge's requests to apps are counted by the edge (wsp_edge_requests_total).
 */
import type { Context } from "hono";
import { matchedRoutes } from "hono/route";
import { Counter, type Metric } from "prom-client";
import type { AppEnv } from "../../../shared/http/context";
import { processRegistry } from "./process-metrics";

const DURATION = "wsp_http_request_duration_seconds";
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * One series (method, route template, status): its requests and their latency. Counted here, per request, with two
 * Map lookups and two additions: prom-client's own inc/observe hash a label object on every call (~3-5 µs a request
 * with a middleware's await, measured in `npm run bench`). prom-client reads the totals when it is scraped.
 */
interface Series {
  labels: { method: string; route: string; status: string };
  count: number;
  sum: number;
  /** Requests per bucket (not cumulative): index i counts those ≤ BUCKETS[i] and > BUCKETS[i - 1]. */
  perBucket: number[];
}
/**
 * By route template, then by status × method (a small integer). The template is the router's own string, the same
 * one on every request, so its hash is computed once; a key built per request would be hashed every time.
 */
const series = new Map<string, Map<number, Series>>();
const allSeries = function* () {
  for (const byRoute of series.values()) yield* byRoute.values();
};

// Registered by its construction; counted from the series when scraped.
new Counter({
  name: "wsp_http_requests_total",
  help: "API requests answered, by method, route template (unmatched: no route) and status.",
  labelNames: ["method", "route", "status"] as const,
  registers: [processRegistry],
  collect() {
    this.reset();
    for (const s of allSeries()) this.inc(s.labels, s.count);
  },
});

/** The latency histogram in prom-client's export shape (what its Histogram's get() answers), from the series. */
const duration = {
  name: DURATION,
  help: "Time to answer an API request (until its answer's head; a streamed body may go on), by method, route template and status.",
  type: "histogram",
  aggregator: "sum",
  async get() {
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = [];
    for (const s of allSeries()) {
      let cumulative = 0;
      BUCKETS.forEach((le, i) => {
        cumulative += s.perBucket[i]!;
        values.push({ labels: { ...s.labels, le }, value: cumulative, metricName: `${DURATION}_bucket` });
      });
      values.push({ labels: { ...s.labels, le: "+Inf" }, value: s.count, metricName: `${DURATION}_bucket` });
      values.push({ labels: s.labels, value: s.sum, metricName: `${DURATION}_sum` });
      values.push({ labels: s.labels, value: s.count, metricName: `${DURATION}_count` });
    }
    return { name: DURATION, help: this.help, type: "histogram", values, aggregator: "sum" };
  },
  reset() {},
};
processRegistry.registerMetric(duration as unknown as Metric);

/** Node's parser accepts a few dozen methods; anything unusual is one label. */
const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "OTHER"];
const METHOD_INDEX = new Map(METHODS.slice(0, -1).map((m, i) => [m, i]));

function record(method: number, route: string, status: number, seconds: number): void {
  let byRoute = series.get(route);
  if (!byRoute) {
    byRoute = new Map();
    series.set(route, byRoute);
  }
  const key = status * METHODS.length + method;
  let s = byRoute.get(key);
  if (!s) {
    s = { labels: { method: METHODS[method]!, route, status: String(status) }, count: 0, sum: 0, perBucket: BUCKETS.map(() => 0) };
    byRoute.set(key, s);
  }
  s.count++;
  s.sum += seconds;
  let i = 0;
  while (i < BUCKETS.length && seconds > BUCKETS[i]!) i++;
  if (i < BUCKETS.length) s.perBucket[i]!++;
}

/**
 * The route that answered: the handler at routeIndex. A wildcard (a middleware, the console's `*`) that ends in
 * the 404 passed the request on and nothing took it: no route matched.
 */
function routeTemplate(c: Context<AppEnv>): string {
  const route = matchedRoutes(c)[c.req.routeIndex];
  if (!route || (route.path.includes("*") && c.res.status === 404)) return "unmatched";
  return route.path;
}

/** Counts one answered request; `started`: performance.now() when it came in (createApp's `onAnswered`). */
export function countRequest(c: Context<AppEnv>, started: number): void {
  record(METHOD_INDEX.get(c.req.method) ?? METHODS.length - 1, routeTemplate(c), c.res.status, (performance.now() - started) / 1000);
}
