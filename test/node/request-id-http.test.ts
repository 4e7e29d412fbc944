/**
 * Through the self-hosted listener the request id goes on Node's response itself
 * (functions/app.ts, stampRequestId): it must still reach the client once, beside the
 * route's own headers, and match a problem's requestId; on a request whose token is
 * cached, on HEAD, and on a request that calls the app in-process (`dispatch`), whose
 * inner answer keeps its own id without touching the outer one. The self-hosted listener's
 * response class (RequestIdResponse) writes the id into the head in every form Node
 * writes one, and leaves a response without an id as it is.
 */
import { serve } from "@hono/node-server";
import { OpenAPIHono } from "@hono/zod-openapi";
import type { AddressInfo } from "node:net";
import { createServer, type ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import { createApp } from "../../functions/app";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { RequestIdResponse } from "../../functions/self-hosted/request-id-response";
import { REQUEST_ID_SLOT } from "../../shared/http/request-id";
import { startSelfHosted } from "../../functions/self-hosted/start";
import { AuthCache } from "../../shared/auth/auth-cache";
import type { AppEnv } from "../../shared/http/context";
import { silentLogger } from "../../shared/http/logger";
import { useCleanups } from "../support/cleanups";
import { seedTenant } from "../support/harness";
import { openPgliteHarness } from "../support/node-harness";
import { rawGet } from "../support/raw-http";

const { cleanups, tempDir } = useCleanups("ws-request-id-");
const REQUEST_ID = /^req_[0-9a-z]{26}$/;

/** A request to a URL with node:http (rawGet), which shows a header sent twice (fetch would join the two values). */
function get(url: string, headers: Record<string, string> = {}, method = "GET") {
  const u = new URL(url);
  return rawGet(Number(u.port), undefined, u.pathname + u.search, { headers, method, via: u.hostname });
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

describe("x-request-id through a Node listener of the app", () => {
  it("on answers to a cached token and to HEAD; an in-process call keeps its own id and leaves the outer one", async () => {
    const h = await openPgliteHarness();
    cleanups.push(() => h.close());
    // A route that calls the app in-process, as a transfer does, and says which id each side had.
    const probe = new OpenAPIHono<AppEnv>();
    probe.get("/request-id-probe", async (c) => {
      const inner = await c.get("services").dispatch(c, new Request("http://127.0.0.1/api/no-such-route"));
      return c.json({ outer: c.get("requestId"), innerHeader: inner.headers.get("x-request-id"), inner: (await inner.json()).requestId });
    });
    const authCache = new AuthCache();
    const services = { db: h.db, keyring: h.keyring, config: { mode: "self-hosted" as const, sharedDomain: "apps.test" }, authCache };
    const app = createApp({ services: () => services, logger: silentLogger, extraRouters: [probe] });
    const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
    await new Promise<void>((resolve) => server.once("listening", () => resolve()));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const t = await seedTenant(h);
    const auth = { authorization: `Bearer ${t.token}`, "x-organization-id": t.orgId };
    const ids: string[] = [];
    for (const method of ["GET", "GET", "HEAD"]) {
      const res = await get(`${base}/api/settings`, auth, method);
      expect(res.status).toBe(200);
      const sent = valuesOf(res.raw, "x-request-id");
      expect(sent).toEqual([expect.stringMatching(REQUEST_ID)]);
      ids.push(sent[0]!);
    }
    expect(authCache.size).toBe(1); // stored by the first request: the next two were answered from it
    expect(new Set(ids).size).toBe(3);

    const res = await get(`${base}/api/request-id-probe`);
    expect(res.status).toBe(200);
    const body = JSON.parse(res.body) as { outer: string; innerHeader: string; inner: string };
    expect(valuesOf(res.raw, "x-request-id")).toEqual([body.outer]);
    expect(body.innerHeader).toBe(body.inner);
    expect(body.inner).toMatch(REQUEST_ID);
    expect(body.inner).not.toBe(body.outer);
  });
});

describe("RequestIdResponse", () => {
  it("adds the id to the head however it is written, once, beside the other headers; a response without one is untouched", async () => {
    // Each path writes its head one way Node allows.
    const forms: Record<string, (res: ServerResponse) => void> = {
      "/object": (res) => res.writeHead(201, { "content-type": "application/json", "x-other": "1" }).end("{}"),
      "/reason": (res) => res.writeHead(202, "Taken", { "x-other": "1" }).end(),
      "/array": (res) => res.writeHead(200, ["x-other", "1"]).end(),
      "/bare": (res) => res.writeHead(204).end(),
      "/implicit": (res) => {
        res.setHeader("x-other", "1");
        res.write("chunk");
        res.end();
      },
    };
    const server = createServer({ ServerResponse: RequestIdResponse }, (req, res) => {
      if (req.headers["x-stamp"]) (res as RequestIdResponse)[REQUEST_ID_SLOT] = req.headers["x-stamp"] as string;
      forms[req.url!]!(res);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const expected: Record<string, number> = { "/object": 201, "/reason": 202, "/array": 200, "/bare": 204, "/implicit": 200 };
    for (const [path, status] of Object.entries(expected)) {
      const stamped = await get(`${base}${path}`, { "x-stamp": `req_${path.slice(1)}` });
      expect(stamped.status).toBe(status);
      expect(valuesOf(stamped.raw, "x-request-id")).toEqual([`req_${path.slice(1)}`]);
      if (path !== "/bare") expect(valuesOf(stamped.raw, "x-other")).toEqual(["1"]);
      const plain = await get(`${base}${path}`);
      expect(plain.status).toBe(status);
      expect(valuesOf(plain.raw, "x-request-id")).toEqual([]);
    }
    expect((await get(`${base}/reason`)).statusMessage).toBe("Taken");
  });
});
