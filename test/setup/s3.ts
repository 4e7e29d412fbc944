/**
 * Global setup shared by the node and worker test projects: a local
 * S3-compatible server (@20minutes/s3rver, which checks SigV4 for real: a
 * tampered or expired presigned URL gets 403) on a loopback port, with the test
 * bucket created up front (TOOLCHAIN.md). workerd reaches it on 127.0.0.1 too.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    s3Endpoint: string;
    s3Bucket: string;
    s3AccessKeyId: string;
    s3SecretAccessKey: string;
  }
}

interface S3rver {
  run(): Promise<{ port: number }>;
  close(): Promise<void>;
}
type S3rverClass = new (options: Record<string, unknown>) => S3rver;

const BUCKET = "workspace-uploads";

export default async function setup(project: TestProject) {
  const S3rver = createRequire(import.meta.url)("@20minutes/s3rver") as S3rverClass;
  const directory = mkdtempSync(join(tmpdir(), "ws-s3-"));
  const server = new S3rver({ address: "127.0.0.1", port: 0, silent: true, directory, configureBuckets: [{ name: BUCKET }] });
  const { port } = await server.run();
  project.provide("s3Endpoint", `http://127.0.0.1:${port}`);
  project.provide("s3Bucket", BUCKET);
  // s3rver's built-in account.
  project.provide("s3AccessKeyId", "S3RVER");
  project.provide("s3SecretAccessKey", "S3RVER");
  return async () => {
    await server.close().catch(() => {});
    rmSync(directory, { recursive: true, force: true });
  };
}
