/**
 * Global setup for the Worker's forwarding test (test/worker/edge-forward.test.ts): workerd
 * cannot start Node servers, so this process starts build servers' edges (createServerEdge
 * in front of a tiny app, test/support/server-edge-fixture.ts) on loopback when asked:
 * `POST /start {token, deploymentIds}` → `{url, appPort}`. Each is closed at teardown.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { TestProject } from "vitest/node";
import { type ServerEdgeFixture, startServerEdgeFixture } from "../support/server-edge-fixture";

declare module "vitest" {
  export interface ProvidedContext {
    /** `http://127.0.0.1:<port>`: POST /start {token, deploymentIds} starts a server edge for that runner token. */
    serverEdgeControlUrl: string;
  }
}

export default async function setup(project: TestProject) {
  const started: ServerEdgeFixture[] = [];
  const control = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString("utf8");
      if (body.length > 10_000) req.destroy();
    });
    req.on("end", async () => {
      try {
        const { token, deploymentIds } = JSON.parse(body) as { token: string; deploymentIds: string[] };
        const fixture = await startServerEdgeFixture(token, deploymentIds);
        started.push(fixture);
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ url: fixture.url, appPort: fixture.appPort }));
      } catch (error) {
        res.writeHead(400);
        res.end((error as Error).message);
      }
    });
  });
  await new Promise<void>((r) => control.listen(0, "127.0.0.1", r));
  project.provide("serverEdgeControlUrl", `http://127.0.0.1:${(control.address() as AddressInfo).port}`);
  return async () => {
    for (const f of started) await f.close();
    await new Promise<void>((r) => control.close(() => r()));
  };
}
