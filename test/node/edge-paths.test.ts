/**
 * Request paths through the real edge (bindHttpServer + createEdge on PGlite)
 * in front of a loopback app that records every request it parses, with a deny
 * rule on `/admin` and one on `/log`: each form that app servers could read as
 * one of those paths is refused (400) or denied (403) and never reaches the app;
 * a refused form is 400 even where no rule applies; the app gets backslashes as
 * slashes.
 */
import { createServer } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRequestLogWriter } from "../../functions/logs/writer";
import { LOOPBACK_HOSTS } from "../../functions/self-hosted/api-hosts";
import { createEdge } from "../../functions/self-hosted/edge/edge";
import { createRouteTable } from "../../functions/self-hosted/edge/route-table";
import { bindHttpServer } from "../../functions/self-hosted/http-server";
import { openPglite, type PgliteDatabase } from "../../shared/db/pglite";
import { deployments, environments, organizations, projects, routeRules } from "../../shared/db/schema";
import { silentLogger } from "../../shared/http/logger";
import { newId } from "../../shared/ids";

const SHARED = "apps.test";

/** A loopback app recording the target of each request it parsed. */
async function startApp() {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(req.url!);
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ url: req.url }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { port: (server.address() as AddressInfo).port, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** One request with `target` sent verbatim on its own connection; the status, the edge's reason and the body. */
function raw(port: number, host: string, target: string) {
  return new Promise<{ status: number; edge: string | null; body: string }>((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    socket.setEncoding("latin1");
    socket.on("data", (d) => {
      text += d;
    });
    socket.on("error", reject);
    socket.on("end", () => {
      const split = text.indexOf("\r\n\r\n");
      const edge = /\r\nx-workspace-edge: ([a-z_]+)/i.exec(text.slice(0, split));
      resolve({ status: Number(text.slice(9, 12)), edge: edge ? edge[1]! : null, body: text.slice(split + 4) });
    });
    socket.write(Buffer.from(`GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, "latin1"));
  });
}

/** The forms that reached the app past a rule on /admin or /log before, and their neighbours. */
const BYPASSES = [
  "/admin\\",
  "/admin\\x",
  "\\admin",
  "/x\\..\\admin",
  "/admin%5C",
  "/admin%5cx",
  "/x%5C..%5Cadmin",
  "/admin%3B",
  "/admin%3Bx=1",
  "/admin%00",
  "/admin%00.html",
  "/log%00",
  "/admin%0A",
  "/admin%09",
  "/admin%7F",
  "/admin%20",
  "/log%20",
  "/admin.",
  "/log.",
  "/admin..",
  "/admin%2e",
  "/admin%2E%2E",
  "/admin./x",
  "/admin%20/x",
  "/admin.;x=1",
  "/admin;x=1",
  "/public/..;/admin",
  "/admin%2Fx",
  "/x%2F..%2Fadmin",
  "/%61dmin",
  "//admin",
  "/./admin",
  "/a/../admin",
  "/%2e%2e/admin",
  "http://HOST/admin",
];

describe("edge request paths", () => {
  let database: PgliteDatabase;
  let edgePort: number;
  let app: Awaited<ReturnType<typeof startApp>>;
  let host: string;

  beforeAll(async () => {
    database = await openPglite({});
    const db = database.db;
    const orgId = newId("org");
    const projectId = newId("prj");
    const slug = `paths-${projectId.slice(-8)}`;
    host = `${slug}.${SHARED}`;
    const environmentId = newId("env");
    app = await startApp();
    await db.insert(organizations).values({ id: orgId, name: "Paths" });
    await db.insert(projects).values({ id: projectId, orgId, name: slug, slug });
    await db.insert(environments).values({ id: environmentId, orgId, projectId, name: "production", kind: "production" });
    await db
      .insert(deployments)
      .values({ id: newId("dpl"), orgId, projectId, environmentId, status: "ready", current: true, port: app.port, servedBy: "test", source: "git" });
    for (const path of ["/admin", "/log"]) {
      await db
        .insert(routeRules)
        .values({ id: newId("rr"), orgId, projectId, kind: "allow-deny", path, config: { mode: "deny", cidrs: ["127.0.0.0/8"] } as never });
    }
    const table = await createRouteTable({ db, sharedDomain: SHARED, logger: silentLogger });
    const logs = createRequestLogWriter({ db, logger: silentLogger });
    const edge = createEdge({ db, table, logs, logger: silentLogger, trustedProxies: [], holdMs: 1000, touchEveryMs: 1000, apiHosts: [...LOOPBACK_HOSTS] });
    const http = await bindHttpServer({ port: 0, host: "127.0.0.1", closeGraceMs: 100 });
    http.serve(() => new Response("the api"), edge);
    edgePort = http.port;
    afterAll(async () => {
      edge.stop();
      await http.close();
      table.stop();
      await logs.flush();
      await app.close();
      await database.close();
    });
  });

  it("serves the app outside the rules (the harness works)", async () => {
    const res = await raw(edgePort, host, "/public");
    expect(res.status).toBe(200);
    expect(app.seen).toContain("/public");
    expect((await raw(edgePort, host, "/admin")).edge).toBe("denied");
  });

  it.each(BYPASSES)("%j is refused or denied and never reaches the app", async (form) => {
    const before = app.seen.length;
    const res = await raw(edgePort, host, form.replace("HOST", host));
    expect([400, 403], `${form}: ${res.status} ${res.edge}`).toContain(res.status);
    expect(app.seen.slice(before)).toEqual([]);
  });

  it("refuses with the edge's 400 the forms app servers read differently, where no rule applies too", async () => {
    for (const form of ["/public%00", "/public%5Cx", "/public%3Bx", "/public.", "/public%20", "/public%2e", "/public%0d"]) {
      const res = await raw(edgePort, host, form);
      expect(res.status, form).toBe(400);
      expect(res.edge, form).toBe("bad_request");
    }
    expect(app.seen.filter((u) => u.startsWith("/public") && u !== "/public")).toEqual([]);
  });

  it("forwards backslashes as slashes and the forms kept as is", async () => {
    expect(JSON.parse((await raw(edgePort, host, "/public\\x?q=\\")).body).url).toBe("/public/x?q=\\");
    expect(JSON.parse((await raw(edgePort, host, "/a%20b/c.d")).body).url).toBe("/a%20b/c.d");
    expect(JSON.parse((await raw(edgePort, host, "/public;v=1")).body).url).toBe("/public;v=1");
  });
});
