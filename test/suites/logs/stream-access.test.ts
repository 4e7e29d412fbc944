/**
 * Access is checked for the life of a stream (shared/auth/stream-access.ts): an
 * open build, runtime or server-log stream ends within 5 s of the member's
 * removal, the token's revocation or expiry, the session's logout or the
 * project's deletion, with `event: end` and `data: {"reason", "detail"}`, and
 * delivers nothing after it. A demotion that keeps the route's permission keeps
 * the stream; the permission rule itself is checked against the database.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSession } from "../../../shared/auth/session-store";
import { newSessionSecret, sessionCookieName } from "../../../shared/auth/session";
import { streamAccessEnd } from "../../../shared/auth/stream-access";
import { sseSettings } from "../../../shared/http/sse";
import { deploymentHelpers } from "../../support/deployments";
import { expectStatus, type Member, seedMember, seedTenant, seedToken } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";
import { lineSeeder, requestSeeder, type SseReader, useStreams } from "./support";

const h = useRuntimeHarness();
const { create } = projectHelpers(h);
const { seedQueued } = deploymentHelpers(h);
const { stream } = useStreams(h);
const seed = lineSeeder(h);
const seedRequests = requestSeeder(h);

/** The promise: the end comes within 5 s of the change; the slack covers a slow test machine. */
const WITHIN_MS = 5_000 + 1_500;

const saved = { ...sseSettings };
beforeAll(() => {
  // Lines arrive fast; the access check keeps its own (production) interval, which is what is measured.
  sseSettings.pollMs = 100;
  sseSettings.heartbeatMs = 300;
});
afterAll(() => {
  Object.assign(sseSettings, saved);
});

async function projectOf(t: Member) {
  const p = await create(t);
  const d = await seedQueued(p);
  return { p, d, target: { orgId: t.orgId, projectId: p.id, deploymentId: d.id } };
}

const ends = (r: SseReader) => r.events.filter((e) => e.event === "end");

/** Streams one line to show the stream is live, makes the change, and returns the end event's data once it came within the bound. */
async function endsAfter(reader: SseReader, live: () => Promise<void>, change: () => Promise<void>, late: () => Promise<void>) {
  await live();
  await reader.until((r) => r.events.some((e) => e.event === "log" || e.event === "request"), 8_000, "a first line");
  const changedAt = Date.now();
  await change();
  await reader.until((r) => ends(r).length > 0, 8_000, "the end event");
  expect(Date.now() - changedAt).toBeLessThan(WITHIN_MS);
  await reader.until((r) => r.closed, 2_000, "the close").catch(() => {});
  expect(reader.closed).toBe(true);
  // Lines written after the end never reach the client.
  const before = reader.events.length;
  await late();
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect(reader.events.length).toBe(before);
  expect(reader.events.at(-1)!.event).toBe("end");
  return JSON.parse(ends(reader)[0]!.data) as { reason: string; detail: string };
}

describe("runtime log stream: access for its life", () => {
  it("ends when the member is removed from the organization", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    const member = await seedMember(h, t.orgId, "member");
    const reader = await stream(member, `/api/projects/${p.id}/logs/stream`);
    const end = await endsAfter(
      reader,
      () => seed(target, ["before"]),
      async () => expectStatus(await h.request(`/api/orgs/${t.orgId}/members/${member.userId}`, { method: "DELETE", token: t.token }), 204),
      () => seed(target, ["after"]),
    );
    expect(end).toEqual({ reason: "access revoked", detail: "The user is no longer a member of the organization" });
    expect(reader.lines.map((l) => l.message)).toEqual(["before"]);
  });

  it("ends when its token is revoked; the user's other streams go on", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    const extra = await seedToken(h, t.userId);
    const reader = await stream({ token: extra.token, orgId: t.orgId }, `/api/projects/${p.id}/logs/stream`);
    const other = await stream(t, `/api/projects/${p.id}/logs/stream`);
    const end = await endsAfter(
      reader,
      () => seed(target, ["before"]),
      async () => expectStatus(await h.request(`/api/tokens/${extra.id}`, { method: "DELETE", token: t.token }), 204),
      () => seed(target, ["after"]),
    );
    expect(end).toEqual({ reason: "access revoked", detail: "The token was revoked" });
    await other.until((r) => r.lines.some((l) => l.message === "after"), 8_000, "the other stream's line");
    expect(ends(other)).toEqual([]);
  });

  it("ends when its token expires", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    const expiresAt = new Date(Date.now() + 1_500);
    const short = await seedToken(h, t.userId, { expiresAt });
    const reader = await stream({ token: short.token, orgId: t.orgId }, `/api/projects/${p.id}/logs/stream`);
    const end = await endsAfter(
      reader,
      () => seed(target, ["before"]),
      async () => {
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt.getTime() - Date.now())));
      },
      () => seed(target, ["after"]),
    );
    expect(end).toEqual({ reason: "access revoked", detail: "The token expired" });
  });

  it("ends when the session it was opened with logs out", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    const secret = newSessionSecret();
    const now = new Date();
    await openSession(h.db, { userId: t.userId, secret, tokenId: null, userAgent: null, expiresAt: new Date(now.getTime() + 3_600_000), now });
    const cookie = `${sessionCookieName("http://workspace.test/")}=${secret}`;
    const reader = await stream({ token: "", orgId: t.orgId }, `/api/projects/${p.id}/logs/stream`, { headers: { cookie } });
    const end = await endsAfter(
      reader,
      () => seed(target, ["before"]),
      async () => expectStatus(await h.request("/api/auth/logout", { method: "POST", headers: { cookie, origin: "http://workspace.test" } }), 204),
      () => seed(target, ["after"]),
    );
    expect(end).toEqual({ reason: "access revoked", detail: "The session ended" });
  });

  it("ends when the project is deleted", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    const reader = await stream(t, `/api/projects/${p.id}/logs/stream`);
    const end = await endsAfter(
      reader,
      () => seed(target, ["before"]),
      async () => expectStatus(await h.request(`/api/projects/${p.id}`, { method: "DELETE", token: t.token }), 200),
      async () => {},
    );
    expect(end).toEqual({ reason: "project deleted", detail: "The project was deleted" });
  });

  it("goes on after a demotion that keeps project:read", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    const member = await seedMember(h, t.orgId, "admin");
    const reader = await stream(member, `/api/projects/${p.id}/logs/stream`);
    await expectStatus(await h.request(`/api/orgs/${t.orgId}/members/${member.userId}`, { method: "PATCH", json: { role: "viewer" }, token: t.token }), 200);
    await new Promise((resolve) => setTimeout(resolve, sseSettings.accessCheckMs + 1_000));
    await seed(target, ["still read"]);
    await reader.until((r) => r.lines.some((l) => l.message === "still read"), 8_000, "the line after the demotion");
    expect(ends(reader)).toEqual([]);
  });
});

describe("server-log stream and build stream: access for their life", () => {
  it("a stream token's stream ends when its user is removed", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    const member = await seedMember(h, t.orgId, "viewer");
    const minted = await expectStatus(await h.request(`/api/projects/${p.id}/server-logs/stream-token`, { token: member.token }), 200);
    const url = new URL(minted.streamUrl);
    const reader = await stream({ token: "" }, `${url.pathname}${url.search}`);
    const request = () => seedRequests(target, [{ path: "/", status: 200 }]);
    const end = await endsAfter(
      reader,
      request,
      async () => expectStatus(await h.request(`/api/orgs/${t.orgId}/members/${member.userId}`, { method: "DELETE", token: t.token }), 204),
      request,
    );
    expect(end).toEqual({ reason: "access revoked", detail: "The user is no longer a member of the organization" });
  });

  it("a stream token's stream ends when the token that minted it is revoked; the stream token itself was not", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    const parent = await seedToken(h, t.userId);
    const minted = await expectStatus(await h.request(`/api/projects/${p.id}/server-logs/stream-token`, { token: parent.token }), 200);
    const url = new URL(minted.streamUrl);
    const reader = await stream({ token: "" }, `${url.pathname}${url.search}`);
    const request = () => seedRequests(target, [{ path: "/", status: 200 }]);
    const end = await endsAfter(
      reader,
      request,
      async () => expectStatus(await h.request(`/api/tokens/${parent.id}`, { method: "DELETE", token: t.token }), 204),
      request,
    );
    expect(end).toEqual({ reason: "access revoked", detail: "The token that opened the stream was revoked" });
  });

  it("a stream token minted by a cookie session: its stream ends when that session logs out", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    const secret = newSessionSecret();
    const now = new Date();
    await openSession(h.db, { userId: t.userId, secret, tokenId: null, userAgent: null, expiresAt: new Date(now.getTime() + 3_600_000), now });
    const cookie = `${sessionCookieName("http://workspace.test/")}=${secret}`;
    const minted = await expectStatus(
      await h.request(`/api/projects/${p.id}/server-logs/stream-token`, { headers: { cookie, "x-organization-id": t.orgId } }),
      200,
    );
    const url = new URL(minted.streamUrl);
    const reader = await stream({ token: "" }, `${url.pathname}${url.search}`);
    const request = () => seedRequests(target, [{ path: "/", status: 200 }]);
    const end = await endsAfter(
      reader,
      request,
      async () => expectStatus(await h.request("/api/auth/logout", { method: "POST", headers: { cookie, origin: "http://workspace.test" } }), 204),
      request,
    );
    expect(end).toEqual({ reason: "access revoked", detail: "The session that opened the stream ended" });
  });

  it("a bearer token's server-log stream ends when the project is deleted", async () => {
    const t = await seedTenant(h);
    const { p, target } = await projectOf(t);
    const reader = await stream(t, `/api/projects/${p.id}/server-logs/stream`);
    const end = await endsAfter(
      reader,
      () => seedRequests(target, [{ path: "/", status: 200 }]),
      async () => expectStatus(await h.request(`/api/projects/${p.id}`, { method: "DELETE", token: t.token }), 200),
      async () => {},
    );
    expect(end).toEqual({ reason: "project deleted", detail: "The project was deleted" });
  });

  it("a build stream ends when its token is revoked, before the build finished", async () => {
    const t = await seedTenant(h);
    const { d, target } = await projectOf(t);
    const extra = await seedToken(h, t.userId);
    const reader = await stream({ token: extra.token, orgId: t.orgId }, `/api/deployments/${d.id}/logs/stream`);
    const end = await endsAfter(
      reader,
      () => seed(target, ["building"], { kind: "build" }),
      async () => expectStatus(await h.request(`/api/tokens/${extra.id}`, { method: "DELETE", token: t.token }), 204),
      () => seed(target, ["built"], { kind: "build" }),
    );
    expect(end).toEqual({ reason: "access revoked", detail: "The token was revoked" });
    expect(reader.lines.map((l) => l.message)).toEqual(["building"]);
  });
});

describe("the permission rule", () => {
  it("a role whose tags ∩ the token's scopes no longer hold the route's permission ends the stream", async () => {
    const t = await seedTenant(h);
    const { p } = await projectOf(t);
    const viewer = await seedMember(h, t.orgId, "viewer");
    const extra = await seedToken(h, viewer.userId, { scopes: ["project:read"] });
    const caller = { userId: viewer.userId, tokenId: extra.id, scopes: ["project:read"], orgId: t.orgId, role: "viewer" as const, tags: [] };
    const now = new Date();
    expect(await streamAccessEnd(h.db, caller, undefined, { permission: "project:read", projectId: p.id }, now)).toBeUndefined();
    expect(await streamAccessEnd(h.db, caller, undefined, { permission: "project:write", projectId: p.id }, now)).toEqual({
      reason: "access revoked",
      detail: "The role or token no longer holds 'project:write'",
    });
    expect(await streamAccessEnd(h.db, caller, undefined, { permission: "project:deployment:list", projectId: p.id }, now)).toEqual({
      reason: "access revoked",
      detail: "The role or token no longer holds 'project:deployment:list'",
    });
  });
});
