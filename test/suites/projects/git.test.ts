/**
 * Git source routes against the run's real git host (git http-backend on
 * loopback, test/setup/git.ts), which the harnesses configure as the `gitea`
 * provider: link, default branch, private repositories and clone tokens,
 * branches, deploy branch, commit status, auto-deploy and its secret, the
 * webhook domain, scoping, and the secret canary. Every test makes its own
 * repository, so files running at once never see each other's commits.
 */
import { and, eq } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { deployments, environments, gitPushHooks } from "../../../shared/db/schema";
import { newId } from "../../../shared/ids";
import { GitSourceSchema } from "../../../functions/projects/schema";
import { gitServerControl, type TestRepo } from "../../support/git-control";
import { storedIn, expectBody, expectProblem, expectStatus, type Member, seedTenant, seedToken } from "../../support/harness";
import { type Project, projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call, get } = projectHelpers(h);
const serverUrl = inject("gitServerUrl");
const gitToken = inject("gitToken");
const control = gitServerControl(serverUrl);

const post = (t: Member, p: Project, path: string, json: unknown) => call(t, `/${p.id}${path}`, { method: "POST", json });
const link = (t: Member, p: Project, repo: Pick<TestRepo, "owner" | "repo">, extra: Record<string, unknown> = {}) =>
  post(t, p, "/git/link", { provider: "gitea", owner: repo.owner, repo: repo.repo, ...extra });
const linked = async (t: Member, p: Project, repo: Pick<TestRepo, "owner" | "repo">, extra: Record<string, unknown> = {}) =>
  expectBody(await link(t, p, repo, extra), 200, GitSourceSchema);
const readGit = async (t: Member, p: Project) => expectBody(await call(t, `/${p.id}/git`), 200, GitSourceSchema);

/** A ready production deployment of `commit`, as the deployments API would write it. */
async function deploy(p: Project, commit: string) {
  const [env] = await h.db
    .select()
    .from(environments)
    .where(and(eq(environments.projectId, p.id), eq(environments.kind, "production")));
  await h.db
    .insert(deployments)
    .values({ id: newId("dpl"), orgId: env!.orgId, projectId: p.id, environmentId: env!.id, status: "ready", branch: "trunk", commitSha: commit });
}

describe("git: link", () => {
  it("links with the repository's default branch (HEAD: trunk, not main) when branch is omitted, and every read shows it", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo();
    const git = await linked(t, p, repo);
    expect(git).toMatchObject({
      linked: true,
      provider: "gitea",
      owner: repo.owner,
      repo: repo.repo,
      cloneUrl: `${serverUrl}/${repo.owner}/${repo.repo}.git`,
      branch: "trunk",
      defaultBranch: "trunk",
      autoDeploy: false,
      webhookDomain: null,
      webhookUrl: null,
      lastPush: null,
    });
    expect(Date.parse(git.linkedAt!)).not.toBeNaN();
    expect(await readGit(t, p)).toEqual(git);

    const project = await get(t, p.id);
    expect(project).toMatchObject({ gitProvider: "gitea", gitOwner: repo.owner, gitRepo: repo.repo, gitBranch: "trunk" });
    expect(project.git).toEqual({ linked: true, branch: "trunk", defaultBranch: "trunk", linkedAt: git.linkedAt, autoDeploy: false, lastPush: null });
    const info = await expectStatus(await call(t, `/${p.id}/info`), 200);
    expect(info.source).toMatchObject({
      kind: "git",
      provider: "gitea",
      branch: "trunk",
      defaultBranch: "trunk",
      cloneUrl: git.cloneUrl,
      repositoryUrl: `${serverUrl}/${repo.owner}/${repo.repo}`,
      linkedAt: git.linkedAt,
      autoDeploy: false,
    });
  });

  it("links a named branch; a `.git` suffix is dropped; re-linking re-points and keeps everything else", async () => {
    const t = await seedTenant(h);
    const p = await create(t, { framework: "nextjs" });
    const first = await control.createRepo();
    expect(await linked(t, p, { owner: first.owner, repo: `${first.repo}.git` }, { branch: "feature/login" })).toMatchObject({
      repo: first.repo,
      branch: "feature/login",
      defaultBranch: "trunk",
    });
    const on = await expectStatus(await post(t, p, "/auto-deploy", { enabled: true }), 200);
    await expectStatus(await post(t, p, "/webhook-domain", { domain: "hooks.example.com" }), 200);

    const second = await control.createRepo();
    // provider omitted: the project's current provider (gitea).
    const relinked = await expectBody(await post(t, p, "/git/link", { owner: second.owner, repo: second.repo, branch: "main" }), 200, GitSourceSchema);
    expect(relinked).toMatchObject({
      provider: "gitea",
      repo: second.repo,
      branch: "main",
      autoDeploy: true,
      webhookUrl: on.webhookUrl.replace("http://workspace.test", "https://hooks.example.com"),
      webhookDomain: "hooks.example.com",
    });
    expect((await get(t, p.id)).framework).toBe("nextjs");
  });

  it("answers 400 naming owner, repo, branch or provider, and writes nothing", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo();
    await expectProblem(await post(t, p, "/git/link", { provider: "gitea", repo: repo.repo }), 400, "owner");
    await expectProblem(await post(t, p, "/git/link", { provider: "gitea", owner: repo.owner }), 400, "repo");
    await expectProblem(await post(t, p, "/git/link", { provider: "gitea", owner: "", repo: repo.repo }), 400, "owner");
    await expectProblem(await link(t, p, { owner: "a b", repo: repo.repo }), 400, "owner");
    await expectProblem(await link(t, p, { owner: repo.owner, repo: "../etc" }), 400, "repo");
    await expectProblem(await link(t, p, repo, { branch: "bad..name" }), 400, "branch");
    await expectProblem(await link(t, p, repo, { provider: "svn" }), 400, "provider");
    const missing = await expectProblem(await link(t, p, repo, { branch: "no-such-branch" }), 400, "branch");
    expect(missing.detail).toMatch(/no-such-branch.*does not exist/);
    expect(await readGit(t, p)).toMatchObject({ linked: false, provider: null, owner: null, branch: null, linkedAt: null });
  });

  it("answers 400 naming repo for a repository the host does not have, hinting at the clone token", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const problem = await expectProblem(await link(t, p, { owner: "acme", repo: `missing-${newId("r")}` }), 400, "repo");
    expect(problem.detail).toMatch(/not found/);
    expect(problem.detail).toMatch(/clone token/);
  });

  it("answers 502 problem+json when the host is unreachable", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    // The test host's /down/ prefix drops the connection without an answer.
    const problem = await expectProblem(await link(t, p, { owner: "down", repo: "anything" }), 502);
    expect(problem.detail).toMatch(/unreachable/);
    expect((await readGit(t, p)).linked).toBe(false);
  });
});

describe("git: private repositories and clone tokens", () => {
  it("refuses a private repository without a token (400 repo, says inaccessible, hints at the token)", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo({ private: true });
    const problem = await expectProblem(await link(t, p, repo), 400, "repo");
    expect(problem.detail).toMatch(/inaccessible.*401/);
    expect(problem.detail).toMatch(/clone token/);
  });

  it("links with the project's clone token", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo({ private: true });
    await expectStatus(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: gitToken } }), 200);
    expect(await linked(t, p, repo)).toMatchObject({ branch: "trunk" });
    const branches = await expectStatus(await call(t, `/${p.id}/branches`), 200);
    expect(branches.items).toHaveLength(4);
  });

  it("links with the caller's Settings clone token only when it is marked asDefault", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo({ private: true });
    const settings = (json: unknown) => h.request("/api/settings/clone-credentials", { method: "PATCH", token: t.token, json });
    await expectStatus(await settings({ token: gitToken, asDefault: false }), 200);
    await expectProblem(await link(t, p, repo), 400, "repo");
    await expectStatus(await settings({ token: gitToken, asDefault: true }), 200);
    expect(await linked(t, p, repo)).toMatchObject({ linked: true, branch: "trunk" });
  });

  it("says the token was refused when a wrong one is sent", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo({ private: true });
    await expectStatus(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: "wrong-token" } }), 200);
    const problem = await expectProblem(await link(t, p, repo), 400, "repo");
    expect(problem.detail).toMatch(/refused the clone token/);
  });
});

describe("git: branches and the deploy branch", () => {
  it("lists the remote's branches by name, pages them, filters by q, and marks the default", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo();
    await linked(t, p, repo);
    const all = await expectStatus(await call(t, `/${p.id}/branches`), 200);
    expect(all).toEqual({
      items: ["feature/login", "main", "release-1.0", "trunk"].map((name) => ({ name, commit: repo.branches[name], isDefault: name === "trunk" })),
      nextCursor: null,
    });

    const first = await expectStatus(await call(t, `/${p.id}/branches?limit=3`), 200);
    expect(first.items.map((b: { name: string }) => b.name)).toEqual(["feature/login", "main", "release-1.0"]);
    expect(first.nextCursor).toBe("release-1.0");
    const second = await expectStatus(await call(t, `/${p.id}/branches?limit=3&cursor=${encodeURIComponent(first.nextCursor)}`), 200);
    expect(second).toEqual({ items: [{ name: "trunk", commit: repo.branches.trunk, isDefault: true }], nextCursor: null });

    const filtered = await expectStatus(await call(t, `/${p.id}/branches?q=RE`), 200);
    expect(filtered.items.map((b: { name: string }) => b.name)).toEqual(["feature/login", "release-1.0"]);
    const paged = await expectStatus(await call(t, `/${p.id}/branches?q=re&limit=1`), 200);
    expect(paged).toMatchObject({ items: [{ name: "feature/login" }], nextCursor: "feature/login" });
    expect((await expectStatus(await call(t, `/${p.id}/branches?q=re&limit=1&cursor=feature%2Flogin`), 200)).items).toEqual([
      expect.objectContaining({ name: "release-1.0" }),
    ]);
    await expectProblem(await call(t, `/${p.id}/branches?limit=0`), 400, "limit");
  });

  it("answers 409 for branches and commit status of a project without a repository", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    expect((await expectProblem(await call(t, `/${p.id}/branches`), 409)).detail).toMatch(/no linked git repository/);
    await expectProblem(await call(t, `/${p.id}/commit-status`), 409);
    await expectProblem(await post(t, p, "/branch", { branch: "main" }), 409);
    await expectProblem(await post(t, p, "/auto-deploy", { enabled: true }), 409);
    expect(await readGit(t, p)).toMatchObject({ linked: false, webhookUrl: null });
  });

  it("sets the deploy branch only to a branch the remote has (400 naming branch)", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo();
    await linked(t, p, repo);
    expect(await expectBody(await post(t, p, "/branch", { branch: "release-1.0" }), 200, GitSourceSchema)).toMatchObject({
      branch: "release-1.0",
      defaultBranch: "trunk",
    });
    expect((await get(t, p.id)).gitBranch).toBe("release-1.0");
    await expectProblem(await post(t, p, "/branch", { branch: "gone" }), 400, "branch");
    await expectProblem(await post(t, p, "/branch", { branch: "a b" }), 400, "branch");
    await expectProblem(await post(t, p, "/branch", {}), 400, "branch");
    expect((await readGit(t, p)).branch).toBe("release-1.0");
  });

  it("PATCH names a repository without asking the host: linked, never checked (linkedAt null)", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(
      await call(t, `/${p.id}`, { method: "PATCH", json: { gitProvider: "gitea", gitOwner: "acme", gitRepo: "not-on-the-host", gitBranch: "dev" } }),
      200,
    );
    expect(await readGit(t, p)).toMatchObject({ linked: true, owner: "acme", repo: "not-on-the-host", branch: "dev", linkedAt: null, defaultBranch: null });
    expect((await get(t, p.id)).git).toMatchObject({ linked: true, linkedAt: null });
  });
});

describe("git: commit status", () => {
  it("goes not_deployed → up_to_date → outdated after a push, and unknown (200) when the host is down", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo();
    await linked(t, p, repo);
    const status = async () => expectStatus(await call(t, `/${p.id}/commit-status`), 200);

    const before = await status();
    expect(before).toMatchObject({ branch: "trunk", deployedCommit: null, remoteCommit: repo.branches.trunk, status: "not_deployed" });
    expect(before.reason).toBeUndefined();
    expect(Date.parse(before.checkedAt)).not.toBeNaN();

    await deploy(p, repo.branches.trunk!);
    expect(await status()).toMatchObject({ deployedCommit: repo.branches.trunk, remoteCommit: repo.branches.trunk, status: "up_to_date" });

    const pushed = await control.addCommit(repo.owner, repo.repo, "trunk", "a push");
    expect(await status()).toMatchObject({ deployedCommit: repo.branches.trunk, remoteCommit: pushed, status: "outdated" });

    // PATCH re-points without asking the host; the owner `down` is a host that drops the connection.
    await expectStatus(await call(t, `/${p.id}`, { method: "PATCH", json: { gitOwner: "down" } }), 200);
    const down = await status();
    expect(down).toMatchObject({ branch: "trunk", deployedCommit: repo.branches.trunk, remoteCommit: null, status: "unknown" });
    expect(down.reason).toMatch(/unreachable/);
  });

  it("is unknown with the reason when the deploy branch is gone from the remote", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo();
    await linked(t, p, repo);
    await deploy(p, repo.branches.trunk!);
    await expectStatus(await call(t, `/${p.id}`, { method: "PATCH", json: { gitBranch: "deleted-branch" } }), 200);
    const res = await expectStatus(await call(t, `/${p.id}/commit-status`), 200);
    expect(res).toMatchObject({ branch: "deleted-branch", status: "unknown", remoteCommit: null });
    expect(res.reason).toMatch(/does not exist/);
  });
});

describe("git: auto-deploy and the webhook domain", () => {
  it("turning on creates the hook and shows its secret once; off keeps the hook; the secret is stored encrypted", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await linked(t, p, await control.createRepo());
    const on = await expectStatus(await post(t, p, "/auto-deploy", { enabled: true }), 200);
    expect(on.autoDeploy).toBe(true);
    expect(on.webhookSecret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(on.webhookUrl).toMatch(/^http:\/\/workspace\.test\/api\/git\/hooks\/gph_[0-9a-z]{26}$/);
    const hookId = on.webhookUrl.split("/").pop();

    const read = await readGit(t, p);
    expect(read).toMatchObject({ autoDeploy: true, webhookUrl: on.webhookUrl });
    expect(JSON.stringify(read)).not.toContain(on.webhookSecret);
    expect((await get(t, p.id)).git.autoDeploy).toBe(true);

    const again = await expectStatus(await post(t, p, "/auto-deploy", { enabled: true }), 200);
    expect(again).toMatchObject({ autoDeploy: true, webhookUrl: on.webhookUrl, webhookSecret: null });
    const off = await expectStatus(await post(t, p, "/auto-deploy", { enabled: false }), 200);
    expect(off).toMatchObject({ autoDeploy: false, webhookUrl: on.webhookUrl, webhookSecret: null });
    const back = await expectStatus(await post(t, p, "/auto-deploy", { enabled: true }), 200);
    expect(back).toMatchObject({ autoDeploy: true, webhookUrl: on.webhookUrl, webhookSecret: null });

    const hooks = await h.db.select().from(gitPushHooks).where(eq(gitPushHooks.projectId, p.id));
    expect(hooks).toHaveLength(1);
    expect(hooks[0]!.id).toBe(hookId);
    expect(hooks[0]!.secret).not.toContain(on.webhookSecret);
    expect(await h.keyring.decrypt(hooks[0]!.secret, { orgId: t.orgId, table: "git_push_hooks", column: "secret", rowId: hookId })).toBe(on.webhookSecret);
    await expectProblem(await post(t, p, "/auto-deploy", {}), 400, "enabled");
    await expectProblem(await post(t, p, "/auto-deploy", { enabled: "yes" }), 400, "enabled");
  });

  it("sets the webhook domain (hostname rules of connect), null returns to the request's origin", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await linked(t, p, await control.createRepo());
    const on = await expectStatus(await post(t, p, "/auto-deploy", { enabled: true }), 200);
    const hookId = on.webhookUrl.split("/").pop();

    const set = await expectBody(await post(t, p, "/webhook-domain", { domain: "Hooks.Example.COM." }), 200, GitSourceSchema);
    expect(set).toMatchObject({ webhookDomain: "hooks.example.com", webhookUrl: `https://hooks.example.com/api/git/hooks/${hookId}` });
    expect(await readGit(t, p)).toMatchObject({ webhookDomain: "hooks.example.com" });

    for (const domain of ["https://x.example.com", "1.2.3.4", "localhost", "*.example.com", "a.example.com/path", "a.example.com:8443", ""]) {
      await expectProblem(await post(t, p, "/webhook-domain", { domain }), 400, "domain");
    }
    await expectProblem(await post(t, p, "/webhook-domain", {}), 400, "domain");
    expect((await readGit(t, p)).webhookDomain).toBe("hooks.example.com");

    const reset = await expectBody(await post(t, p, "/webhook-domain", { domain: null }), 200, GitSourceSchema);
    expect(reset).toMatchObject({ webhookDomain: null, webhookUrl: `http://workspace.test/api/git/hooks/${hookId}` });
  });
});

describe("git: access", () => {
  it("answers 404 for another organization's project on every git route", async () => {
    const owner = await seedTenant(h);
    const other = await seedTenant(h);
    const p = await create(owner);
    await linked(owner, p, await control.createRepo());
    for (const path of ["/git", "/branches", "/commit-status"]) await expectProblem(await call(other, `/${p.id}${path}`), 404);
    await expectProblem(await post(other, p, "/git/link", { provider: "gitea", owner: "acme", repo: "x" }), 404);
    await expectProblem(await post(other, p, "/branch", { branch: "main" }), 404);
    await expectProblem(await post(other, p, "/auto-deploy", { enabled: true }), 404);
    await expectProblem(await post(other, p, "/webhook-domain", { domain: null }), 404);
    expect(await readGit(owner, p)).toMatchObject({ autoDeploy: false, webhookUrl: null, webhookDomain: null });
  });

  it("reads need project:read, writes project:write", async () => {
    const owner = await seedTenant(h);
    const p = await create(owner);
    await linked(owner, p, await control.createRepo());
    const reader = { ...owner, token: (await seedToken(h, owner.userId, { scopes: ["project:read"] })).token };
    await expectStatus(await call(reader, `/${p.id}/git`), 200);
    await expectStatus(await call(reader, `/${p.id}/branches`), 200);
    await expectStatus(await call(reader, `/${p.id}/commit-status`), 200);
    await expectProblem(await post(reader, p, "/git/link", { provider: "gitea", owner: "acme", repo: "x" }), 403);
    await expectProblem(await post(reader, p, "/branch", { branch: "main" }), 403);
    await expectProblem(await post(reader, p, "/auto-deploy", { enabled: true }), 403);
    await expectProblem(await post(reader, p, "/webhook-domain", { domain: null }), 403);
  });
});

describe("git: secret canary", () => {
  it("clone tokens and hook secrets never appear in responses, logs or database columns in the clear", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo({ private: true });
    const bodies: string[] = [];
    const record = async (res: Response) => {
      const text = await res.text();
      bodies.push(text);
      return text;
    };
    await record(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: gitToken } }));
    await record(await h.request("/api/settings/clone-credentials", { method: "PATCH", token: t.token, json: { token: gitToken, asDefault: true } }));
    await record(await link(t, p, repo));
    await record(await call(t, `/${p.id}/branches`));
    await record(await call(t, `/${p.id}/commit-status`));
    const secret = JSON.parse(await (await post(t, p, "/auto-deploy", { enabled: true })).text()).webhookSecret as string;
    expect(secret).toMatch(/^whsec_/);
    await record(await post(t, p, "/auto-deploy", { enabled: true }));
    await record(await call(t, `/${p.id}/git`));
    await record(await call(t, `/${p.id}`));
    await record(await call(t, `/${p.id}/info`));
    // A failing call too: an error message must not carry the token either.
    await record(await link(t, p, repo, { branch: "no-such-branch" }));
    for (const needle of [gitToken, secret]) {
      for (const body of bodies) expect(body).not.toContain(needle);
      for (const line of h.logs) expect(line).not.toContain(needle);
      expect(await storedIn(h, needle)).toEqual([]);
    }
  });
});
