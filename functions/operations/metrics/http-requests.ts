/**
 * API requests by route template: Hono's matched route (`/api/projects/:id`),
 * never the raw URL, so the number of series is bounded by the routes the code
 * has; a request no route matched is `unmatched`. Counted in a middleware the
 * Node adapter puts before every route (AppDeps.middleware); the edge's requests
 * to apps are counted by the edge (wsp_edge_requests_total).
 */
import type { MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import { Counter, Histogram } from "prom-client";
import type { AppEnv } from "../../../shared/http/context";
import { processRegistry } from "./process-metrics";

const requests = new Counter({
  name: "wsp_http_requests_total",
  help: "API requests answered, by method, route template (unmatched: no route) and status.",
  labelNames: ["method", "route", "status"] as const,
  registers: [processRegistry],
});

const duration = new Histogram({
  name: "wsp_http_request_duration_seconds",
  help: "Time to answer an API request (until its answer's head; a streamed body may go on), by method, route template and status.",
  labelNames: ["method", "route", "status"] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [processRegistry],
});

/** Node's parser accepts a few dozen methods; anything unusual is one label. */
const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/**
 * The route that answered: the handler at routeIndex. A wildcard (a middleware, the console's `*`) that ends in
 * the 404 passed the request on and nothing took it: no route matched.
 */
function routeTemplate(c: Parameters<MiddlewareHandler<AppEnv>>[0]): string {
  const route = matchedRoutes(c)[c.req.routeIndex];
  if (!route || (route.path.includes("*") && c.res.status === 404)) return "unmatched";
  return route.path;
}

export function requestMetrics(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = performance.now();
    try {
      await next();
    } finally {
      const labels = { method: METHODS.has(c.req.method) ? c.req.method : "OTHER", route: routeTemplate(c), status: String(c.res.status) };
      requests.inc(labels);
      duration.observe(labels, (performance.now() - started) / 1000);
    }
  };
}
