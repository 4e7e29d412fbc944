/**
 * Git identity forwarding (issue 22, item 7; functions/servers/job-credentials.ts): with
 * Settings' forwardGitToServer on, POST /api/deployments takes `gitCredential`, holds it
 * encrypted in job_credentials for that deployment only, and hands it once to the server
 * holding the job's lease (the read deletes it). A canary password appears in no API
 * answer, no log line and no table in clear; another organization's server cannot read
 * it; cancel and the claim's sweep delete it; with the setting off nothing is taken.
 */
import { eq } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { DeploymentSchema } from "../../../functions/deployments/schema";
import { GitSourceSchema } from "../../../functions/projects/schema";
import { CreatedServerSchema } from "../../../functions/servers/schema";
import { jobCredentials } from "../../../shared/db/schema";
import { deploymentHelpers } from "../../support/deployments";
import { gitServerControl } from "../../support/git-control";
import { storedIn, expectBody, expectProblem, expectStatus, type Member, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call } = projectHelpers(h);
const { queue } = deploymentHelpers(h);
const control = gitServerControl(inject("gitServerUrl"));

async function gitProject(t: Member) {
  const p = await create(t);
  const repo = await control.createRepo();
  await expectBody(
    await call(t, `/${p.id}/git/link`, { method: "POST", json: { provider: "gitea", owner: repo.owner, repo: repo.repo } }),
    200,
    GitSourceSchema,
  );
  return p;
}
const register = async (t: Member) =>
  expectBody(await h.request("/api/servers", { method: "POST", token: t.token, org: t.orgId, json: { name: "build" } }), 201, CreatedServerSchema);
const forwardGit = async (t: Member, enabled: boolean) =>
  expectStatus(await h.request("/api/settings/forward-git", { method: "PATCH", token: t.token, org: t.orgId, json: { enabled } }), 200);
const credentialRows = async (id: string) => h.db.select().from(jobCredentials).where(eq(jobCredentials.deploymentId, id));
const cloneCredential = (token: string, id: string) => h.request(`/api/runner/jobs/${id}/clone-credential`, { token });
const claim = async (token: string) => (await expectStatus(await h.request("/api/runner/claim?wait=0", { method: "POST", token }), 200)).id as string;

describe("git identity forwarding", () => {
  it("with the setting off, a gitCredential is refused naming the field and nothing is stored", async () => {
    const t = await seedTenant(h);
    const p = await gitProject(t);
    const canary = `canary-off-${crypto.randomUUID()}`;
    await expectProblem(await queue(t, { projectId: p.id, target: "server", gitCredential: { username: "dev", password: canary } }), 400, "gitCredential");
    expect(await h.db.select().from(jobCredentials).where(eq(jobCredentials.orgId, t.orgId))).toEqual([]);
    expect(await storedIn(h, canary)).toEqual([]);
    expect(h.logs.join("\n")).not.toContain(canary);
  });

  it("refuses a credential with a newline, and one for a project without a repository", async () => {
    const t = await seedTenant(h);
    await forwardGit(t, true);
    const p = await gitProject(t);
    await expectProblem(
      await queue(t, { projectId: p.id, gitCredential: { username: "dev", password: "x\nurl=https://evil.test" } }),
      400,
      "gitCredential.password",
    );
    const bare = await create(t);
    await expectProblem(await queue(t, { projectId: bare.id, gitCredential: { username: "dev", password: "secret" } }), 400);
  });

  it("held encrypted for the job, handed once to the lease holder, never answered or logged; another organization's server gets 404", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    await forwardGit(t, true);
    const p = await gitProject(t);
    const s = await register(t);
    const foreign = await register(other);
    const canary = `canary-forwarded-${crypto.randomUUID()}`;
    const answers: string[] = [];
    const created = await queue(t, { projectId: p.id, serverId: s.id, gitCredential: { username: "dev-user", password: canary } });
    answers.push(await created.clone().text());
    const d = await expectBody(created, 201, DeploymentSchema);
    const [row] = await credentialRows(d.id);
    expect(row).toMatchObject({ orgId: t.orgId });
    expect(row!.expiresAt.getTime()).toBeGreaterThan(Date.now());
    expect(await storedIn(h, canary)).toEqual([]);
    answers.push(await (await h.request(`/api/deployments/${d.id}`, { token: t.token, org: t.orgId })).text());

    expect(await claim(s.token)).toBe(d.id);
    // Another organization's server: the job is not found, and the credential stays for its holder.
    const foreignRead = await cloneCredential(foreign.token, d.id);
    answers.push(await foreignRead.clone().text());
    expect(foreignRead.status).toBe(404);
    expect(await credentialRows(d.id)).toHaveLength(1);

    const taken = await expectStatus(await cloneCredential(s.token, d.id), 200);
    expect(taken).toEqual({ token: null, forwarded: { username: "dev-user", password: canary } });
    // Taken: gone from the table; a second read falls back to the clone token (none here).
    expect(await credentialRows(d.id)).toEqual([]);
    const again = await cloneCredential(s.token, d.id);
    answers.push(await again.clone().text());
    expect(await expectStatus(again, 200)).toEqual({ token: null, forwarded: null });

    for (const a of answers) expect(a).not.toContain(canary);
    expect(h.logs.join("\n")).not.toContain(canary);
    expect(await storedIn(h, canary)).toEqual([]);
  });

  it("a canceled job's credential is deleted at once; an expired one is never handed out and swept at the next claim", async () => {
    const t = await seedTenant(h);
    await forwardGit(t, true);
    const p = await gitProject(t);
    const s = await register(t);
    const canceled = await expectBody(
      await queue(t, { projectId: p.id, serverId: s.id, gitCredential: { username: "u", password: "p1" } }),
      201,
      DeploymentSchema,
    );
    expect(await credentialRows(canceled.id)).toHaveLength(1);
    await expectStatus(await h.request(`/api/deployments/${canceled.id}/cancel`, { method: "POST", token: t.token, org: t.orgId }), 200);
    expect(await credentialRows(canceled.id)).toEqual([]);

    const expired = await expectBody(
      await queue(t, { projectId: p.id, serverId: s.id, gitCredential: { username: "u", password: "p2" } }),
      201,
      DeploymentSchema,
    );
    await h.db
      .update(jobCredentials)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(jobCredentials.deploymentId, expired.id));
    expect(await claim(s.token)).toBe(expired.id);
    expect(await credentialRows(expired.id)).toEqual([]);
    expect(await expectStatus(await cloneCredential(s.token, expired.id), 200)).toEqual({ token: null, forwarded: null });
  });
});
