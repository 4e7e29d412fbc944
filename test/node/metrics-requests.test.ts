/**
 * The API request metrics (functions/operations/metrics/http-requests.ts) are counted per
 * series as each request is answered (createApp's onAnswered, as `npm start` wires it) and read
 * by prom-client when scraped: a request lands in the latency buckets at and above its time only,
 * under its route template and status, whether or not request lines are logged, and an error
 * counts under the status it was answered with.
 */
import { OpenAPIHono } from "@hono/zod-openapi";
import { describe, expect, it } from "vitest";
import { createApp } from "../../functions/app";
import { countRequest } from "../../functions/operations/metrics/http-requests";
import { processRegistry } from "../../functions/operations/metrics/process-metrics";
import type { AppEnv } from "../../shared/http/context";
import { silentLogger } from "../../shared/http/logger";

/** `name{labels} value` lines of the scrape for one route template. */
async function linesFor(route: string): Promise<string[]> {
  return (await processRegistry.metrics()).split("\n").filter((l) => l.includes(`route="${route}"`));
}

const sampleValue = (lines: string[], prefix: string) =>
  Number(
    lines
      .find((l) => l.startsWith(prefix))
      ?.split(" ")
      .at(-1),
  );

/** The app as `npm start` builds it, with one probe router at /api/<name>/:id (which uses no service). */
function appWith(name: string, logRequests: boolean) {
  const probe = new OpenAPIHono<AppEnv>();
  probe.get(`/${name}/:id`, async (c) => {
    await new Promise((r) => setTimeout(r, 30));
    if (c.req.param("id") === "boom") throw new Error("probe failure");
    return c.json({ id: c.req.param("id") }, 201);
  });
  const services = { db: undefined as never, keyring: undefined as never, config: { mode: "self-hosted" as const, sharedDomain: "apps.test" } };
  return createApp({ services: () => services, logger: silentLogger, logRequests, extraRouters: [probe], onAnswered: countRequest });
}

describe("request metrics", () => {
  for (const logRequests of [false, true]) {
    it(`count a request once, under its template and status, in the buckets at and above its latency (request lines ${logRequests ? "on" : "off"})`, async () => {
      const name = `metrics-probe-${logRequests ? "logged" : "quiet"}`;
      const app = appWith(name, logRequests);
      expect((await app.request(`/api/${name}/one`)).status).toBe(201);
      expect((await app.request(`/api/${name}/two`)).status).toBe(201);
      expect((await app.request(`/api/${name}/boom`)).status).toBe(500);

      const lines = await linesFor(`/api/${name}/:id`);
      const labels = `method="GET",route="/api/${name}/:id",status="201"`;
      expect(sampleValue(lines, `wsp_http_requests_total{${labels}}`)).toBe(2);
      expect(sampleValue(lines, `wsp_http_request_duration_seconds_count{${labels}}`)).toBe(2);
      // Each took at least 30 ms: none is at or under 25 ms, both are under 10 s.
      expect(sampleValue(lines, `wsp_http_request_duration_seconds_bucket{${labels},le="0.025"}`)).toBe(0);
      expect(sampleValue(lines, `wsp_http_request_duration_seconds_bucket{${labels},le="10"}`)).toBe(2);
      expect(sampleValue(lines, `wsp_http_request_duration_seconds_bucket{${labels},le="+Inf"}`)).toBe(2);
      expect(sampleValue(lines, `wsp_http_request_duration_seconds_sum{${labels}}`)).toBeGreaterThanOrEqual(0.06);
      // The failure is counted under the 500 it was answered with; the raw paths never become labels.
      expect(sampleValue(lines, `wsp_http_requests_total{method="GET",route="/api/${name}/:id",status="500"}`)).toBe(1);
      expect(lines.some((l) => l.includes("one") || l.includes("two") || l.includes("boom"))).toBe(false);
    });
  }

  it("count a request no route matched as unmatched, not under its path, and an unusual method as OTHER", async () => {
    const app = appWith("metrics-probe-unmatched", false);
    const before = sampleValue(await linesFor("unmatched"), 'wsp_http_requests_total{method="GET",route="unmatched",status="404"}') || 0;
    expect((await app.request("/api/no-such-route-for-metrics")).status).toBe(404);
    const after = sampleValue(await linesFor("unmatched"), 'wsp_http_requests_total{method="GET",route="unmatched",status="404"}');
    expect(after).toBe(before + 1);
    // A method outside the usual seven is one label, not its own.
    const other = 'wsp_http_requests_total{method="OTHER",route="unmatched",status="404"}';
    const otherBefore = sampleValue(await linesFor("unmatched"), other) || 0;
    expect((await app.request("/api/no-such-route-for-metrics", { method: "PROPFIND" })).status).toBe(404);
    expect(sampleValue(await linesFor("unmatched"), other)).toBe(otherBefore + 1);
    expect((await processRegistry.metrics()).includes("PROPFIND")).toBe(false);
    expect((await processRegistry.metrics()).includes("no-such-route-for-metrics")).toBe(false);
  });
});
