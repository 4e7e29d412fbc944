/** Folder upload (functions/projects/folder/scan.ts): upload to the session's target, then POST /api/projects/folder/scan/{sessionId}. */

import { describe, expect, it } from "vitest";
import { ScanResultSchema } from "../../../functions/projects/folder/schema";
import { folderClient, NEXT_APP } from "../../support/folder-client";
import { expectBody, expectProblem, expectStatus, seedTenant } from "../../support/harness";
import { tgz } from "../../support/tar-fixtures";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const c = folderClient(h);

describe("folder upload: upload and scan", () => {
  it("runs session → upload → scan → ensure for a Next.js folder", async () => {
    const t = await seedTenant(h);
    const { target, result } = await c.uploadAndScan(t, await tgz(NEXT_APP));
    expect(result).toMatchObject({
      sessionId: target.sessionId,
      stack: "node",
      framework: "nextjs",
      packageManager: "pnpm",
      installCommand: "pnpm install --frozen-lockfile",
      buildCommand: "pnpm run build",
      startCommand: "pnpm start",
      outputDirectory: ".next",
      dockerfile: null,
      composeFile: null,
      rootDirectory: null,
      files: 3,
    });
    expect(result.services).toBeUndefined();

    const res = await c.ensure(t, {
      name: "Web",
      gitProvider: "upload",
      uploadSessionId: target.sessionId,
      framework: result.framework,
      buildCommand: result.buildCommand,
      installCommand: result.installCommand,
      startCommand: result.startCommand,
      outputDirectory: result.outputDirectory,
    });
    const project = await expectStatus(res, 201);
    expect(project).toMatchObject({
      name: "Web",
      gitProvider: "upload",
      framework: "nextjs",
      buildCommand: "pnpm run build",
      status: "created",
      services: [],
      uploadSessionId: target.sessionId,
    });
    const info = await expectStatus(await h.request(`/api/projects/${project.id}/options`, { token: t.token, json: {} }), 200);
    expect(info).toMatchObject({
      installCommand: "pnpm install --frozen-lockfile",
      startCommand: "pnpm start",
      outputDirectory: ".next",
      buildCommand: "pnpm run build",
    });
    const session = await c.sessionRow(target.sessionId);
    expect(session?.projectId).toBe(project.id);
    expect(session!.expiresAt.getTime()).toBeGreaterThan(Date.now() + 55 * 60_000);
  });

  it("scans the contents of a single top-level folder", async () => {
    const t = await seedTenant(h);
    const { result } = await c.uploadAndScan(t, await tgz({ "site/index.html": "<h1>hi</h1>", "site/style.css": "h1{}" }));
    expect(result).toMatchObject({ stack: "static", framework: "static", outputDirectory: ".", rootDirectory: "site", files: 2 });
  });

  it("uploading again replaces the tarball", async () => {
    const t = await seedTenant(h);
    const target = await c.openSession(t);
    await c.upload(t, target, await tgz({ "go.mod": "module example.com/app\n\nrequire github.com/gin-gonic/gin v1.10.0\n" }));
    expect(await expectBody(await c.scan(t, target.sessionId), 200, ScanResultSchema)).toMatchObject({ stack: "go", framework: "gin" });
    await c.upload(t, target, await tgz({ Gemfile: "source 'https://rubygems.org'\ngem 'rails', '~> 7.1'\n" }));
    expect(await expectBody(await c.scan(t, target.sessionId), 200, ScanResultSchema)).toMatchObject({ stack: "ruby", framework: "rails" });
  });

  it("scan of a session with nothing uploaded yet is a clear 400", async () => {
    const t = await seedTenant(h);
    const target = await c.openSession(t);
    const p = await expectProblem(await c.scan(t, target.sessionId), 400);
    expect(p.detail).toMatch(/Nothing has been uploaded/);
    expect((await c.sessionRow(target.sessionId))?.scan).toBeNull();
  });
});
