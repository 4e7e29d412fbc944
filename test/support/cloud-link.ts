/**
 * Helpers for the self-hosted ↔ cloud link tests (test/node/cloud-link.test.ts): an
 * instance's organization linked to a cloud organization through the API, the home
 * feed read to its end, a loopback URL nothing listens on, and the link pointed at
 * another cloud URL behind the API's back (to play a cloud that went down).
 */
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:net";
import { eq } from "drizzle-orm";
import { CloudLinkSchema } from "../../functions/cloud/link";
import { HomePage } from "../../functions/projects/home";
import { cloudLinks } from "../../shared/db/schema";
import type { CloudWorker } from "./cloud-worker";
import { expectBody, type Harness, type Member } from "./harness";

/** Links `shOwner`'s organization on the instance to `cloudOwner`'s on the cloud (PUT /api/cloud/link); the link's view. */
export async function linkInstance(sh: Harness, shOwner: Member, cloud: CloudWorker, cloudOwner: Member) {
  const res = await sh.request("/api/cloud/link", {
    method: "PUT",
    token: shOwner.token,
    org: shOwner.orgId,
    json: { apiUrl: cloud.url, token: cloudOwner.token, organizationId: cloudOwner.orgId },
  });
  return expectBody(res, 200, CloudLinkSchema);
}

/** One page of GET /api/projects/home. */
export async function homePage(sh: Harness, member: Member, query = "") {
  return expectBody(await sh.request(`/api/projects/home${query}`, { token: member.token, org: member.orgId }), 200, HomePage);
}

/** Every page of the home feed at `limit`, in order (fails past `maxPages`: a cursor that never ends). */
export async function homeFeed(sh: Harness, member: Member, limit: number, maxPages = 50) {
  const pages: Array<Awaited<ReturnType<typeof homePage>>> = [];
  let cursor: string | null = null;
  do {
    const page = await homePage(sh, member, `?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    pages.push(page);
    cursor = page.nextCursor;
    if (pages.length > maxPages) throw new Error(`home feed did not end after ${maxPages} pages`);
  } while (cursor);
  return pages;
}

/** `http://127.0.0.1:<port>` of a port that was just free and is closed again: connections are refused. */
export async function closedLoopbackUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/**
 * A loopback URL that refuses connections until `listen()`, then relays every request to
 * `target` (a cloud that is down at first and comes up at a URL fixed in advance).
 */
export async function lateRelay(target: string) {
  const url = await closedLoopbackUrl();
  const port = Number(new URL(url).port);
  const server = createHttpServer(async (req, res) => {
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const headers = new Headers();
      for (const name of ["authorization", "x-organization-id", "accept", "content-type"]) {
        const value = req.headers[name];
        if (typeof value === "string") headers.set(name, value);
      }
      const answer = await fetch(target + req.url, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
      res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/octet-stream" });
      res.end(Buffer.from(await answer.arrayBuffer()));
    } catch {
      res.writeHead(502).end();
    }
  });
  let listening = false;
  return {
    url,
    listen: () =>
      new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", () => {
          listening = true;
          resolve();
        });
      }),
    close: () => (listening ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve()),
  };
}

/** Points an organization's stored link at another cloud URL (the token stays): a cloud that moved or went down. */
export async function pointLinkAt(sh: Harness, orgId: string, apiUrl: string): Promise<void> {
  await sh.db.update(cloudLinks).set({ apiUrl }).where(eq(cloudLinks.orgId, orgId));
}

/** The median of a few timings, in ms (one decimal). */
export function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const m = sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return Math.round(m * 10) / 10;
}
