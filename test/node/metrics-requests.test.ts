/**
 * The API request metrics (functions/operations/metrics/http-requests.ts) are counted per
 * series in the middleware and read by prom-client when scraped: a request lands in the
 * latency buckets at and above its time only, under its route template and status.
 */
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { requestMetrics } from "../../functions/operations/metrics/http-requests";
import { processRegistry } from "../../functions/operations/metrics/process-metrics";
import type { AppEnv } from "../../shared/http/context";

/** `name{labels} value` lines of the scrape for one route template. */
async function linesFor(route: string): Promise<string[]> {
  return (await processRegistry.metrics()).split("\n").filter((l) => l.includes(`route="${route}"`));
}

describe("request metrics", () => {
  it("count a request once, under its template and status, in the buckets at and above its latency", async () => {
    const app = new Hono<AppEnv>();
    app.use("*", requestMetrics());
    app.get("/metrics-probe/:id", async (c) => {
      await new Promise((r) => setTimeout(r, 30));
      return c.json({ id: c.req.param("id") }, 201);
    });
    expect((await app.request("/metrics-probe/one")).status).toBe(201);
    expect((await app.request("/metrics-probe/two")).status).toBe(201);

    const lines = await linesFor("/metrics-probe/:id");
    const value = (prefix: string) =>
      Number(
        lines
          .find((l) => l.startsWith(prefix))
          ?.split(" ")
          .at(-1),
      );
    const labels = 'method="GET",route="/metrics-probe/:id",status="201"';
    expect(value(`wsp_http_requests_total{${labels}}`)).toBe(2);
    expect(value(`wsp_http_request_duration_seconds_count{${labels}}`)).toBe(2);
    // Each took at least 30 ms: none is at or under 25 ms, both are under 10 s.
    expect(value(`wsp_http_request_duration_seconds_bucket{${labels},le="0.025"}`)).toBe(0);
    expect(value(`wsp_http_request_duration_seconds_bucket{${labels},le="10"}`)).toBe(2);
    expect(value(`wsp_http_request_duration_seconds_bucket{${labels},le="+Inf"}`)).toBe(2);
    expect(value(`wsp_http_request_duration_seconds_sum{${labels}}`)).toBeGreaterThanOrEqual(0.06);
    expect(lines.some((l) => l.includes("one") || l.includes("two"))).toBe(false);
  });
});
