/**
 * GET /metrics on the main port, served only when METRICS_TOKEN is set (and then
 * only with it: 401 otherwise). Without the token the path is the API's 404:
 * metrics are on METRICS_BIND's listener, or not served at all. Not in the
 * OpenAPI document: it is Prometheus's format for a scraper, not the API.
 */
import type { Hono } from "hono";
import type { AppEnv } from "../../../shared/http/context";
import { ApiError } from "../../../shared/http/errors";
import type { Metrics } from "./metrics";

export function mountMetricsRoute(app: Hono<AppEnv>, metrics: Metrics): void {
  app.get("/metrics", async (c) => {
    if (!metrics.authorized(c.req.header("authorization")))
      throw new ApiError("unauthorized", "Send Authorization: Bearer <METRICS_TOKEN>", {}, { "www-authenticate": "Bearer" });
    const { contentType, body } = await metrics.render();
    return c.body(body, 200, { "content-type": contentType, "cache-control": "no-store" });
  });
}
