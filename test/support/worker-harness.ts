/**
 * Harness for the Worker: requests go through the real Worker entry inside
 * workerd, whose Neon driver reaches the run's Postgres through the local
 * WebSocket proxy. Seeding uses the same driver.
 */
// `env` from cloudflare:test is typed by the plugin (cloudflare:workers would need the global workers types).
import { createExecutionContext, createScheduledController, env, waitOnExecutionContext } from "cloudflare:test";
import { inject, vi } from "vitest";
import { createKeyring } from "../../shared/crypto/keyring";
import { openNeon, useLocalWsProxy } from "../../shared/db/neon";
import { createS3Storage } from "../../shared/storage/s3";
import type { UploadStorage } from "../../shared/storage/types";
import { createWorker, type WorkerOverrides } from "../../functions/worker";
import { buildRequest, PostgresUnavailable, type Harness } from "./harness";
import { TEST_SECRET_KEYS } from "./test-keys";

export type WorkerHarness = Harness & {
  /** Runs the Worker's cron handler (`scheduled`) once. */
  scheduled(): Promise<void>;
  sweepUploads(): Promise<void>;
  uploadStore: UploadStorage;
  requestStream(path: string, init?: Parameters<Harness["request"]>[1]): Promise<Response>;
};

/** `overrides` replace the Worker's notification transports and retry timing (the notifications suites); `vars` are added to its bindings. */
export async function openWorkerHarness(overrides?: WorkerOverrides, vars: Record<string, string> = {}): Promise<WorkerHarness> {
  if (inject("pgKind") !== "postgres") throw new PostgresUnavailable();
  const worker = createWorker(overrides);
  const bindings = {
    ...env,
    DATABASE_URL: inject("pgUrlWorker"),
    NEON_WS_PROXY: inject("wsProxyUrl"),
    SECRET_KEYS: TEST_SECRET_KEYS,
    // Folder uploads: presigned targets on the run's local S3 server (test/setup/s3.ts).
    S3_ENDPOINT: inject("s3Endpoint"),
    S3_REGION: "us-east-1",
    S3_BUCKET: inject("s3Bucket"),
    S3_ACCESS_KEY_ID: inject("s3AccessKeyId"),
    S3_SECRET_ACCESS_KEY: inject("s3SecretAccessKey"),
    // Gitea points at the run's loopback git host (test/setup/git.ts), reached through the outbound guard.
    GIT_GITEA_URL: inject("gitServerUrl"),
    OUTBOUND_ALLOW_PRIVATE: "true",
    // The API's host: any other Host is an app's (functions/worker-edge.ts), with no lookup of connected domains per request.
    API_HOSTS: "workspace.test",
    ...vars,
  };
  useLocalWsProxy(bindings.NEON_WS_PROXY);
  const seeding = openNeon(bindings.DATABASE_URL);
  const logs: string[] = [];
  // The Worker logs through console; keep every line for the secret-canary checks.
  const spy = vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
    logs.push(args.map(String).join(" "));
  });
  const errSpy = vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
    logs.push(args.map(String).join(" "));
  });
  const scheduled = async () => {
    const ctx = createExecutionContext();
    await worker.scheduled(createScheduledController(), bindings, ctx);
    await waitOnExecutionContext(ctx);
  };
  return {
    runtime: "worker",
    realConcurrency: inject("pgKind") === "postgres",
    db: seeding.db,
    keyring: await createKeyring(TEST_SECRET_KEYS),
    logs,
    request: async (path, init) => {
      const ctx = createExecutionContext();
      const res = await worker.fetch(buildRequest(path, init), bindings as never, ctx);
      // Read the body before the per-request Pool is released by waitUntil.
      const body = await res.arrayBuffer();
      await waitOnExecutionContext(ctx);
      return new Response(res.status === 204 || res.status === 304 ? null : body, res);
    },
    /** The response as it streams (Server-Sent Events): the body is not read first; the request ends with it. */
    requestStream: async (path, init) => {
      const ctx = createExecutionContext();
      const res = await worker.fetch(buildRequest(path, init), bindings as never, ctx);
      void waitOnExecutionContext(ctx);
      return res;
    },
    scheduled,
    /** The cloud's upload sweep runs in the cron handler. */
    sweepUploads: scheduled,
    /** The bucket behind the sessions (to check what is kept and removed). */
    uploadStore: createS3Storage({
      endpoint: bindings.S3_ENDPOINT,
      region: bindings.S3_REGION,
      bucket: bindings.S3_BUCKET,
      accessKeyId: bindings.S3_ACCESS_KEY_ID,
      secretAccessKey: bindings.S3_SECRET_ACCESS_KEY,
    }),
    close: async () => {
      spy.mockRestore();
      errSpy.mockRestore();
      await seeding.close();
    },
  };
}
