/**
 * Through the self-hosted listener the request id goes on Node's response itself
 * (functions/app.ts, stampRequestId): it must still reach the client once, beside the
 * route's own headers, and match a problem's requestId.
 */
import { request as httpRequest } from "node:http";
import { describe, expect, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { startSelfHosted } from "../../functions/self-hosted/start";
import { useCleanups } from "../support/cleanups";

const { cleanups, tempDir } = useCleanups("ws-request-id-");
const REQUEST_ID = /^req_[0-9a-z]{26}$/;

/** A GET with node:http, which shows a header sent twice (fetch would join the two values). */
function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; raw: string[]; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode!, raw: res.rawHeaders, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Every value sent for `name` (rawHeaders alternates names and values). */
const valuesOf = (raw: string[], name: string) => raw.flatMap((v, i) => (i % 2 === 0 && v.toLowerCase() === name ? [raw[i + 1]!] : []));

describe("x-request-id through the Node adapter", () => {
  it("is sent once on successes and problems, a new one per request, equal to the problem's requestId", async () => {
    const server = await startSelfHosted(
      loadNodeConfig({ PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent", DATA_DIR: tempDir(), SHARED_DOMAIN: "apps.test", RUNNER: "off" }),
      () => {},
    );
    cleanups.push(() => server.close());

    const health = await get(`${server.url}/healthz`);
    expect(health.status).toBe(200);
    expect(valuesOf(health.raw, "x-request-id")).toEqual([expect.stringMatching(REQUEST_ID)]);
    expect(valuesOf(health.raw, "cache-control")).toEqual(["no-store"]);

    const ids = new Set<string>();
    for (const [path, status] of [
      ["/api/settings", 401],
      ["/api/no-such-route", 404],
      ["/api/settings", 401],
    ] as const) {
      const res = await get(`${server.url}${path}`, path === "/api/settings" ? { authorization: "Bearer wsp_not-a-real-token-000000" } : {});
      expect(res.status).toBe(status);
      const [id, ...more] = valuesOf(res.raw, "x-request-id");
      expect(more).toEqual([]);
      expect(id).toMatch(REQUEST_ID);
      expect(JSON.parse(res.body).requestId).toBe(id);
      ids.add(id!);
    }
    expect(ids.size).toBe(3);
  });
});
