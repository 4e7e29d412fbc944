/**
 * Helpers for the transfer tests (test/node/cloud-transfer.test.ts): an instance whose
 * transfer steps a test can hook, an instance organization linked to a cloud one, a
 * project with every part of a transfer bundle set through the API, the transfer
 * calls, both sides' bundles, and a loopback relay in front of the cloud that can be
 * killed and brought back on the same port (to the instance, the cloud dies: its
 * connections are cut and new ones refused).
 */
import { createServer, type Server, Socket } from "node:net";
import { gunzipSync } from "node:zlib";
import { expect } from "vitest";
import { z } from "zod";
import { ProjectExportSchema } from "../../functions/projects/export-schema";
import { readProjectExport } from "../../functions/projects/export-store";
import { newId } from "../../shared/ids";
import type { CloudWorker } from "./cloud-worker";
import type { FolderHarness } from "./folder-client";
import { expectBody, expectStatus, type Harness, type Member, seedTenant } from "./harness";
import { type HarnessEnv, openPgliteHarness } from "./node-harness";

export type StepHook = (direction: "to-cloud" | "to-self-hosted", step: string) => Promise<void>;

/** A PGlite instance whose `beforeTransferStep` calls whatever `hook.current` is at the time; `env`: extra configuration (LOCAL_ROOTS). */
export async function openHookedInstance(env?: HarnessEnv): Promise<FolderHarness & { hook: { current?: StepHook } }> {
  const hook: { current?: StepHook } = {};
  const h = await openPgliteHarness({ beforeTransferStep: (direction, step) => hook.current?.(direction, step) ?? Promise.resolve() }, env);
  return Object.assign(h as FolderHarness, { hook });
}

/** Links `shOwner`'s organization to `cloudOwner`'s, the cloud reached at `apiUrl` (the cloud's own URL, or a relay's). */
export async function link(sh: Harness, shOwner: Member, cloudOwner: Member, apiUrl: string): Promise<void> {
  await expectStatus(
    await sh.request("/api/cloud/link", {
      method: "PUT",
      token: shOwner.token,
      org: shOwner.orgId,
      json: { apiUrl, token: cloudOwner.token, organizationId: cloudOwner.orgId },
    }),
    200,
  );
}

/** A fresh instance organization linked to a fresh cloud organization. */
export async function linkedPair(sh: Harness, cloud: CloudWorker, apiUrl = cloud.url) {
  const shOwner = await seedTenant(sh);
  const cloudOwner = await cloud.seedTenant();
  await link(sh, shOwner, cloudOwner, apiUrl);
  return { shOwner, cloudOwner };
}

export const TransferResult = z.object({
  direction: z.enum(["to-cloud", "to-self-hosted"]),
  sourceId: z.string(),
  projectId: z.string(),
  project: z.object({ id: z.string(), name: z.string() }).passthrough().nullable(),
  pushHook: z.object({ url: z.string(), secret: z.string() }).nullable(),
});

export const transfer = (sh: Harness, m: Member, id: string, direction: "to-cloud" | "to-self-hosted") =>
  sh.request(`/api/projects/${id}/transfer/${direction}`, { method: "POST", token: m.token, org: m.orgId });

export async function transferOk(sh: Harness, m: Member, id: string, direction: "to-cloud" | "to-self-hosted") {
  const res = await transfer(sh, m, id, direction);
  expect(res.headers.get("cache-control")).toBe("no-store");
  return TransferResult.parse(await expectStatus(res, 200));
}

/** The cloud's own bundle of one of its projects (its POST /api/projects/{id}/export). */
export async function cloudExport(cloud: CloudWorker, m: Member, id: string) {
  return expectBody(await cloud.request(`/api/projects/${id}/export`, { method: "POST", token: m.token, org: m.orgId }), 200, ProjectExportSchema);
}

/** The instance's bundle of a local project, as the transfer reads it (without the store key). */
export async function localExport(sh: Harness, orgId: string, id: string) {
  const { latestArtifactKey: _, ...bundle } = await readProjectExport(sh.db, sh.keyring, orgId, id);
  return bundle;
}

/** Every canary of a rich project: secret values that must never show up in a log line. */
export interface Canaries {
  secretProd: string;
  secretPreview: string;
  cloneToken: string;
  service: string;
}

export const canaries = (): Canaries => ({
  secretProd: `canary-prod-${newId("c")}`,
  secretPreview: `canary-preview-${newId("c")}`,
  cloneToken: `canary-clone-${newId("c")}`,
  service: `canary-service-${newId("c")}`,
});

/**
 * A local project with every part of a bundle set through the instance's API: git link
 * (named: the route records it as given), auto-deploy, options, resources and sleep mode,
 * a preview environment, plain and secret variables in both environments, two domains
 * (the second primary), a clone token, compose services with a value.
 */
export async function richProject(sh: Harness, m: Member, c: Canaries, tag = newId("d").toLowerCase().replace(/_/g, "-")) {
  const call = async (method: string, path: string, json?: unknown, status = 200) =>
    expectStatus(await sh.request(`/api/projects${path}`, { method, token: m.token, org: m.orgId, json }), status);
  const project: { id: string; name: string } = await call("POST", "", { name: `rich ${tag}`, framework: "nextjs" }, 201);
  const base = `/${project.id}`;
  await call("POST", "/ensure", {
    projectId: project.id,
    name: project.name,
    services: [
      { name: "db", image: "postgres:16", ports: ["5432"], environment: { POSTGRES_PASSWORD: c.service, POSTGRES_DB: "app" } },
      { name: "web", build: { context: ".", dockerfile: null }, command: "npm start", dependsOn: ["db"], environment: { MODE: "prod" } },
    ],
  });
  await call("PATCH", base, { gitProvider: "gitea", gitOwner: "acme", gitRepo: `repo-${tag}`, gitBranch: "main", framework: "nextjs" });
  await call("POST", `${base}/auto-deploy`, { enabled: true });
  await call("POST", `${base}/options`, { rootDirectory: "apps/web", installCommand: "pnpm install", buildCommand: "pnpm build", startCommand: "pnpm start" });
  await call("PATCH", `${base}/resources`, {
    production: { cpuCores: 0.5, memoryMb: 1024 },
    build: { cpuCores: 3, memoryMb: 4096 },
    diskGb: 20,
    sleepMode: "always_on",
    port: 8080,
  });
  await call("POST", `${base}/environments`, { name: "staging", branch: "develop" }, 201);
  await call("PATCH", `${base}/env`, {
    environment: "production",
    upserts: [
      { key: "API_URL", value: "https://api.example.test", isSecret: false },
      { key: "SECRET_TOKEN", value: c.secretProd, isSecret: true },
    ],
  });
  await call("PATCH", `${base}/env`, {
    environment: "staging",
    upserts: [
      { key: "API_URL", value: "https://staging.example.test", isSecret: false },
      { key: "STAGING_SECRET", value: c.secretPreview, isSecret: true },
    ],
  });
  await call("POST", `${base}/connect`, { domain: `www-${tag}.example.com` });
  await call("POST", `${base}/connect`, { domain: `app-${tag}.example.com` });
  await call("PATCH", `${base}/clone-token`, { token: c.cloneToken });
  return { ...project, tag, domains: [`www-${tag}.example.com`, `app-${tag}.example.com`] };
}

/**
 * A TCP relay on loopback to `target` (host:port of a URL). `kill()` cuts every open
 * connection and stops listening (connections are refused, as to a process that died);
 * `revive()` listens again on the same port.
 */
export async function killableRelay(targetUrl: string) {
  const target = new URL(targetUrl);
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer((inbound) => {
        const outbound = new Socket();
        sockets.add(inbound);
        sockets.add(outbound);
        const drop = () => {
          inbound.destroy();
          outbound.destroy();
          sockets.delete(inbound);
          sockets.delete(outbound);
        };
        inbound.on("error", drop).on("close", drop);
        outbound.on("error", drop).on("close", drop);
        outbound.connect(Number(target.port), target.hostname, () => {
          inbound.pipe(outbound);
          outbound.pipe(inbound);
        });
      });
      s.once("error", reject);
      s.listen(port, "127.0.0.1", () => {
        port = (s.address() as { port: number }).port;
        server = s;
        resolve();
      });
    });
  await listen();
  return {
    url: `http://127.0.0.1:${port}`,
    async kill() {
      const s = server;
      server = undefined;
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
    },
    revive: listen,
  };
}

/**
 * The regular files of a gzipped tarball, by path (a `./` prefix dropped), with their
 * contents: enough of ustar/pax for the snapshots this instance packs.
 */
export function tarFiles(gz: Uint8Array): Map<string, string> {
  const bytes = gunzipSync(gz);
  const text = (from: number, length: number) => {
    const field = bytes.subarray(from, from + length);
    const end = field.indexOf(0);
    return Buffer.from(end < 0 ? field : field.subarray(0, end)).toString("utf8");
  };
  const files = new Map<string, string>();
  let paxPath: string | undefined;
  for (let at = 0; at + 512 <= bytes.length; ) {
    if (bytes.subarray(at, at + 512).every((b) => b === 0)) break;
    const size = Number.parseInt(text(at + 124, 12).trim() || "0", 8);
    const type = text(at + 156, 1) || "0";
    const prefix = text(at + 345, 155);
    const name = paxPath ?? (prefix ? `${prefix}/${text(at, 100)}` : text(at, 100));
    const body = Buffer.from(bytes.subarray(at + 512, at + 512 + size));
    paxPath = undefined;
    if (type === "x") paxPath = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(body.toString("utf8"))?.[1];
    else if (type === "0") files.set(name.replace(/^\.\//, ""), body.toString("utf8"));
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return files;
}
