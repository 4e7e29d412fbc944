/**
 * The push webhook (POST /api/git/hooks/:hookId) as each git host calls it:
 * signatures checked over the raw body (good, bad, missing), the outcome per
 * branch, tag, event and auto-deploy state, redeliveries recorded once (also
 * when two arrive at once on real Postgres), the size limit, unknown hooks, and
 * the hook secret never kept or shown in the clear. Every provider points at the
 * run's test git host, whose refs the branch-head check reads.
 */
import { eq } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { deployments, environments, gitPushEvents, projects } from "../../../shared/db/schema";
import { MAX_JSON_BODY_BYTES } from "../../../shared/http/json-body";
import { newId } from "../../../shared/ids";
import { gitServerControl } from "../../support/git-control";
import { delivery, HOSTS, hookPath, hostsAt, post, providerOf, randomCommit, seedPushHook, type Host } from "../../support/git-hooks";
import { PushDelivery } from "../../../functions/git-hooks/push";
import { storedIn, expectBody, expectProblem, expectStatus, seedTenant, type Member } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness({ env: hostsAt(inject("gitServerUrl")) });
const control = gitServerControl(inject("gitServerUrl"));
const { create } = projectHelpers(h);

const eventsOf = (hookId: string) => h.db.select().from(gitPushEvents).where(eq(gitPushEvents.hookId, hookId));
/** The project's deployments with their environment's name. */
const deploymentsOf = (projectId: string) =>
  h.db
    .select({ d: deployments, environment: environments.name })
    .from(deployments)
    .innerJoin(environments, eq(environments.id, deployments.environmentId))
    .where(eq(deployments.projectId, projectId));

const lastPushOf = async (projectId: string) => {
  const [row] = await h.db
    .select({ commit: projects.lastPushCommit, branch: projects.lastPushBranch, at: projects.lastPushAt })
    .from(projects)
    .where(eq(projects.id, projectId));
  return row!;
};

/**
 * A tenant, a project on a fresh repository of the test host and its hook (auto-deploy on, deploy branch `main` unless
 * told); `head` is main's head there, `advance()` pushes a new commit to main on the host and returns it.
 */
async function setup(opts: Parameters<typeof seedPushHook>[3] = {}) {
  const t: Member = await seedTenant(h);
  const p = await create(t);
  const repo = await control.createRepo();
  const hook = await seedPushHook(h, t, p, { owner: repo.owner, repo: repo.repo, ...opts });
  const advance = () => control.addCommit(repo.owner, repo.repo, "main");
  return { t, p, repo, head: repo.branches.main!, advance, ...hook };
}

describe("push webhook: each host's push", () => {
  for (const host of HOSTS) {
    it(`${host}: a signed push to the deploy branch is recorded as deploy_queued, becomes the last push and queues a production deployment of its commit`, async () => {
      const { p, hookId, secret, head: commit } = await setup({ provider: providerOf(host) });
      const d = await delivery(host, secret, { kind: "push", ref: "refs/heads/main", commit });
      const answer = await expectBody(await post(h, hookId, d), 202, PushDelivery);
      expect(answer).toEqual({
        outcome: "deploy_queued",
        reason: null,
        provider: providerOf(host),
        event: "push",
        ref: "refs/heads/main",
        branch: "main",
        commit,
        deploymentId: expect.stringMatching(/^dpl_/),
        redelivery: false,
      });
      const queued = await deploymentsOf(p.id);
      expect(queued).toHaveLength(1);
      expect(queued[0]!.environment).toBe("production");
      expect(queued[0]!.d).toMatchObject({
        id: answer.deploymentId,
        status: "queued",
        source: "git",
        gitProvider: providerOf(host),
        branch: "main",
        commitSha: commit,
        createdBy: null,
      });
      const rows = await eventsOf(hookId);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        projectId: p.id,
        provider: providerOf(host),
        deliveryId: d.deliveryId,
        bodyDigest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
        event: "push",
        branch: "main",
        commit,
        outcome: "deploy_queued",
      });
      const last = await lastPushOf(p.id);
      expect(last.commit).toBe(commit);
      expect(last.branch).toBe("main");
      expect(last.at).toBeInstanceOf(Date);
    });

    it(`${host}: a bad or a missing signature is 401 and records nothing`, async () => {
      const { p, hookId, secret } = await setup({ provider: providerOf(host) });
      for (const signature of ["bad", "missing"] as const) {
        const d = await delivery(host, secret, { kind: "push", ref: "refs/heads/main", commit: randomCommit() }, { signature });
        const problem = await expectProblem(await post(h, hookId, d), 401);
        expect(problem.detail).toMatch(/signature/i);
      }
      // A signature holds for the exact bytes only: the same JSON spelled differently fails (GitLab sends a token, not a signature).
      if (host !== "gitlab") {
        const good = await delivery(host, secret, { kind: "push", ref: "refs/heads/main", commit: randomCommit() });
        await expectProblem(await post(h, hookId, { headers: good.headers, body: good.body.replace("main", "mai\\u006e") }), 401);
      }
      expect(await eventsOf(hookId)).toHaveLength(0);
      expect((await lastPushOf(p.id)).commit).toBeNull();
    });

    it(`${host}: a redelivery records nothing new and answers the first outcome`, async () => {
      const { hookId, secret, head: commit } = await setup({ provider: providerOf(host) });
      const d = await delivery(host, secret, { kind: "push", ref: "refs/heads/main", commit });
      const first = await expectBody(await post(h, hookId, d), 202, PushDelivery);
      const again = await expectBody(await post(h, hookId, d), 202, PushDelivery);
      expect(again).toEqual({ ...first, redelivery: true, reason: expect.stringMatching(/replay/i) });
      expect(await eventsOf(hookId)).toHaveLength(1);
      // One deployment for the delivery, however often it arrives.
      expect((await deploymentsOf((await eventsOf(hookId))[0]!.projectId)).map((r) => r.d.id)).toEqual([first.deploymentId]);
    });
  }
});

describe("push webhook: through the auto-deploy route", () => {
  it("the webhookUrl and secret auto-deploy returns take a signed push; off ignores it, on again reuses the same URL and secret", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo();
    await expectStatus(
      await h.request(`/api/projects/${p.id}`, {
        method: "PATCH",
        token: t.token,
        json: { gitProvider: "github", gitOwner: repo.owner, gitRepo: repo.repo, gitBranch: "main" },
      }),
      200,
    );
    const on = await expectStatus<{ webhookUrl: string; webhookSecret: string }>(
      await h.request(`/api/projects/${p.id}/auto-deploy`, { method: "POST", token: t.token, json: { enabled: true } }),
      200,
    );
    const hookId = new URL(on.webhookUrl).pathname.split("/").pop()!;
    expect(new URL(on.webhookUrl).pathname).toBe(hookPath(hookId));
    const commit = repo.branches.main!;
    const queued = await expectBody(
      await post(h, hookId, await delivery("github", on.webhookSecret, { kind: "push", ref: "refs/heads/main", commit })),
      202,
      PushDelivery,
    );
    expect(queued).toMatchObject({ outcome: "deploy_queued", commit });
    const git = await expectStatus<{ lastPush: { commit: string; branch: string; at: string } | null }>(
      await h.request(`/api/projects/${p.id}/git`, { token: t.token }),
      200,
    );
    expect(git.lastPush).toMatchObject({ commit, branch: "main" });

    await expectStatus(await h.request(`/api/projects/${p.id}/auto-deploy`, { method: "POST", token: t.token, json: { enabled: false } }), 200);
    const off = await expectBody(
      await post(h, hookId, await delivery("github", on.webhookSecret, { kind: "push", ref: "refs/heads/main", commit: randomCommit() })),
      202,
      PushDelivery,
    );
    expect(off.outcome).toBe("ignored");
    const again = await expectStatus<{ webhookUrl: string; webhookSecret: string | null }>(
      await h.request(`/api/projects/${p.id}/auto-deploy`, { method: "POST", token: t.token, json: { enabled: true } }),
      200,
    );
    expect(again).toMatchObject({ webhookUrl: on.webhookUrl, webhookSecret: null });
    const next = await control.addCommit(repo.owner, repo.repo, "main");
    const back = await expectBody(
      await post(h, hookId, await delivery("github", on.webhookSecret, { kind: "push", ref: "refs/heads/main", commit: next })),
      202,
      PushDelivery,
    );
    expect(back.outcome).toBe("deploy_queued");
    expect(h.logs.join("\n")).not.toContain(on.webhookSecret);
    expect(await storedIn(h, on.webhookSecret)).toEqual([]);
  });
});

describe("push webhook: what is ignored", () => {
  for (const host of HOSTS) {
    it(`${host}: another branch, a tag and a deleted branch are 202 ignored, recorded, and leave the last push alone`, async () => {
      const { p, hookId, secret } = await setup({ provider: providerOf(host) });
      const commit = randomCommit();
      const other = await expectBody(
        await post(h, hookId, await delivery(host, secret, { kind: "push", ref: "refs/heads/feature/x", commit })),
        202,
        PushDelivery,
      );
      expect(other).toMatchObject({ outcome: "ignored", ref: "refs/heads/feature/x", branch: "feature/x", commit, redelivery: false });
      const tag = await expectBody(await post(h, hookId, await delivery(host, secret, { kind: "push", ref: "refs/tags/v1.2.0", commit })), 202, PushDelivery);
      expect(tag).toMatchObject({ outcome: "ignored", ref: "refs/tags/v1.2.0", branch: null, commit });
      const deleted = await expectBody(
        await post(h, hookId, await delivery(host, secret, { kind: "push", ref: "refs/heads/main", commit: "0".repeat(40) })),
        202,
        PushDelivery,
      );
      expect(deleted).toMatchObject({ outcome: "ignored", branch: "main", commit: null });
      const rows = await eventsOf(hookId);
      expect(rows.map((r) => r.outcome)).toEqual(["ignored", "ignored", "ignored"]);
      expect((await lastPushOf(p.id)).commit).toBeNull();
    });

    it(`${host}: with auto-deploy off, a push to the deploy branch is 202 ignored`, async () => {
      const { p, hookId, secret } = await setup({ provider: providerOf(host), autoDeploy: false });
      const answer = await expectBody(
        await post(h, hookId, await delivery(host, secret, { kind: "push", ref: "refs/heads/main", commit: randomCommit() })),
        202,
        PushDelivery,
      );
      expect(answer.outcome).toBe("ignored");
      expect(answer.deploymentId).toBeNull();
      expect(await deploymentsOf(p.id)).toEqual([]);
      expect(await eventsOf(hookId)).toHaveLength(1);
      expect((await lastPushOf(p.id)).commit).toBeNull();
    });
  }

  it("another event (a pull request) is 202 ignored under the host's event name", async () => {
    const { hookId, secret } = await setup();
    const answer = await expectBody(await post(h, hookId, await delivery("github", secret, { kind: "event", name: "pull_request" })), 202, PushDelivery);
    expect(answer).toEqual({
      outcome: "ignored",
      provider: "github",
      event: "pull_request",
      ref: null,
      branch: null,
      commit: null,
      deploymentId: null,
      reason: null,
      redelivery: false,
    });
    const bb = await setup({ provider: "bitbucket" });
    const other = await expectBody(
      await post(h, bb.hookId, await delivery("bitbucket", bb.secret, { kind: "event", name: "pullrequest:created" })),
      202,
      PushDelivery,
    );
    expect(other).toMatchObject({ outcome: "ignored", event: "pullrequest:created" });
  });

  it("bitbucket: of the refs one push moved, the deploy branch's change decides", async () => {
    const { hookId, secret, head: commit } = await setup({ provider: "bitbucket" });
    const sample = await delivery("bitbucket", secret, { kind: "push", ref: "refs/heads/main", commit });
    const payload = JSON.parse(sample.body);
    payload.push.changes.reverse();
    const d = await delivery("bitbucket", secret, { kind: "push", ref: "refs/heads/main", commit }, { body: JSON.stringify(payload) });
    const answer = await expectBody(await post(h, hookId, d), 202, PushDelivery);
    expect(answer).toMatchObject({ outcome: "deploy_queued", branch: "main", commit });
  });

  it("without a deploy branch set, the repository's default branch is the deploy branch", async () => {
    const { p, repo, hookId, secret } = await setup({ gitBranch: null, defaultBranch: "trunk" });
    const commit = repo.branches.trunk!;
    const main = await expectBody(await post(h, hookId, await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit })), 202, PushDelivery);
    expect(main.outcome).toBe("ignored");
    const trunk = await expectBody(
      await post(h, hookId, await delivery("github", secret, { kind: "push", ref: "refs/heads/trunk", commit })),
      202,
      PushDelivery,
    );
    expect(trunk).toMatchObject({ outcome: "deploy_queued", branch: "trunk", commit });
    expect((await lastPushOf(p.id)).branch).toBe("trunk");
  });

  it("a disabled project ignores pushes to its deploy branch", async () => {
    const { t, p, hookId, secret } = await setup();
    await expectStatus(await h.request(`/api/projects/${p.id}/disable`, { method: "POST", token: t.token }), 200);
    const answer = await expectBody(
      await post(h, hookId, await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit: randomCommit() })),
      202,
      PushDelivery,
    );
    expect(answer.outcome).toBe("ignored");
    expect(answer.deploymentId).toBeNull();
    expect(await deploymentsOf(p.id)).toEqual([]);
  });
});

describe("push webhook: ping and test deliveries", () => {
  for (const host of ["github", "gitea", "forgejo", "bitbucket"] as const satisfies readonly Host[]) {
    it(`${host}: a ping or test delivery is 200 ping and moves nothing`, async () => {
      const { p, hookId, secret } = await setup({ provider: providerOf(host) });
      const answer = await expectBody(await post(h, hookId, await delivery(host, secret, { kind: "ping" })), 200, PushDelivery);
      expect(answer).toEqual({
        outcome: "ping",
        provider: providerOf(host),
        event: "ping",
        ref: null,
        branch: null,
        commit: null,
        deploymentId: null,
        reason: null,
        redelivery: false,
      });
      expect((await eventsOf(hookId)).map((r) => r.outcome)).toEqual(["ping"]);
      expect((await lastPushOf(p.id)).commit).toBeNull();
    });
  }

  it("gitlab: the Test button's sample push of the default branch is handled as a push", async () => {
    const { hookId, secret, head } = await setup({ provider: "gitlab" });
    const answer = await expectBody(await post(h, hookId, await delivery("gitlab", secret, { kind: "ping", commit: head })), 202, PushDelivery);
    expect(answer).toMatchObject({ outcome: "deploy_queued", provider: "gitlab", branch: "main" });
  });

  it("a ping is unsigned: 401 as well", async () => {
    const { hookId, secret } = await setup();
    await expectProblem(await post(h, hookId, await delivery("github", secret, { kind: "ping" }, { signature: "missing" })), 401);
  });
});

describe("push webhook: hostile and unknown", () => {
  it("an unknown hook id is 404, with or without a valid-looking signature", async () => {
    const { secret } = await setup();
    const d = await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit: randomCommit() });
    for (const id of [newId("gph"), "gph_x", "x".repeat(500)]) {
      const problem = await expectProblem(await post(h, id, d), 404);
      expect(problem.detail).toBe("Push hook not found");
    }
    await expectProblem(await post(h, newId("gph"), { headers: { "content-type": "application/json" }, body: "{}" }), 404);
  });

  it("a request no host signed (no host headers) is 401", async () => {
    const { hookId } = await setup();
    await expectProblem(await post(h, hookId, { headers: { "content-type": "application/json" }, body: '{"ref":"refs/heads/main"}' }), 401);
    expect(await eventsOf(hookId)).toHaveLength(0);
  });

  it("a body over 1 MiB is 413, declared or streamed, before anything is recorded", async () => {
    const { hookId, secret } = await setup();
    const big = JSON.stringify({ ref: "refs/heads/main", after: randomCommit(), pad: "x".repeat(MAX_JSON_BODY_BYTES) });
    const d = await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit: randomCommit() }, { body: big });
    const problem = await expectProblem(await post(h, hookId, d), 413);
    expect(problem.detail).toMatch(/1 MiB/);
    const chunk = new TextEncoder().encode(" ".repeat(64 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 8 * 1024 * 1024) return controller.close();
        sent += chunk.length;
        controller.enqueue(chunk);
      },
    });
    await expectProblem(await h.request(hookPath(hookId), { method: "POST", headers: d.headers, body: stream }), 413);
    // The Worker reads the rest and discards it before its answer ends (functions/worker-early-answer.ts).
    if (h.runtime === "worker") expect(sent).toBe(8 * 1024 * 1024);
    else expect(sent).toBeLessThan(MAX_JSON_BODY_BYTES + 1024 * 1024);
    // The same for an unknown hook: the limit holds before the lookup.
    await expectProblem(await post(h, newId("gph"), d), 413);
    expect(await eventsOf(hookId)).toHaveLength(0);
  });

  it("a signed body that is not a JSON object, or nests too deep, is 400; a malformed commit is 400 naming it", async () => {
    const { hookId, secret } = await setup();
    for (const body of ["not json", "[1,2]", `{"a":${"[".repeat(100)}${"]".repeat(100)}}`]) {
      const d = await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit: randomCommit() }, { body });
      await expectProblem(await post(h, hookId, d), 400);
    }
    const badCommit = await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit: "not-a-sha" });
    await expectProblem(await post(h, hookId, badCommit), 400, "after");
    const bb = await setup({ provider: "bitbucket" });
    const badBitbucket = await delivery(
      "bitbucket",
      bb.secret,
      { kind: "push", ref: "refs/heads/main", commit: randomCommit() },
      { body: JSON.stringify({ push: { changes: "x" } }) },
    );
    await expectProblem(await post(h, bb.hookId, badBitbucket), 400, "push.changes");
    expect(await eventsOf(hookId)).toHaveLength(0);
    expect(await eventsOf(bb.hookId)).toHaveLength(0);
  });

  it("reads GitHub's form content type (the JSON in the payload field), signed over the form body", async () => {
    const { hookId, secret, head: commit } = await setup();
    const json = await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit });
    const form = `payload=${encodeURIComponent(json.body)}`;
    const d = await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit }, { body: form });
    const answer = await expectBody(
      await post(h, hookId, { headers: { ...d.headers, "content-type": "application/x-www-form-urlencoded" }, body: form }),
      202,
      PushDelivery,
    );
    expect(answer).toMatchObject({ outcome: "deploy_queued", commit });
  });

  it("without a delivery id header, the body's digest still keys the delivery (the id is kept null)", async () => {
    const { hookId, secret, head } = await setup();
    const d = await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit: head });
    const { "x-github-delivery": _, ...headers } = d.headers;
    await expectStatus(await post(h, hookId, { headers, body: d.body }), 202);
    const again = await expectBody(await post(h, hookId, { headers, body: d.body }), 202, PushDelivery);
    expect(again.redelivery).toBe(true);
    const rows = await eventsOf(hookId);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.deliveryId).toBeNull();
    expect(rows[0]!.bodyDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it.runIf(h.realConcurrency)("two identical deliveries at once record one event (real Postgres)", async () => {
    const { p, hookId, secret, advance } = await setup();
    for (let round = 0; round < 5; round++) {
      const d = await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit: await advance() });
      // The same body under four delivery ids (a replay racing the original): one record, one deployment.
      const answers = await Promise.all(
        Array.from({ length: 4 }, async (_, i) =>
          expectBody(await post(h, hookId, { headers: { ...d.headers, "x-github-delivery": `${d.deliveryId}-${i}` }, body: d.body }), 202, PushDelivery),
        ),
      );
      expect(answers.filter((a) => !a.redelivery)).toHaveLength(1);
      expect(new Set(answers.map((a) => `${a.outcome}/${a.commit}/${a.deploymentId}`)).size).toBe(1);
      expect(answers[0]!.outcome).toBe("deploy_queued");
    }
    expect(await eventsOf(hookId)).toHaveLength(5);
    expect(await deploymentsOf(p.id)).toHaveLength(5);
    expect((await lastPushOf(p.id)).commit).not.toBeNull();
  });

  it("canary: the hook secret is in no response, log line or table column in the clear", async () => {
    const { hookId, secret } = await setup();
    const texts: string[] = [];
    for (const host of HOSTS) {
      for (const signature of ["good", "bad", "missing"] as const) {
        const res = await post(h, hookId, await delivery(host, secret, { kind: "push", ref: "refs/heads/main", commit: randomCommit() }, { signature }));
        const headers: string[] = [];
        res.headers.forEach((value, name) => {
          headers.push(`${name}: ${value}`);
        });
        texts.push(await res.text(), ...headers);
      }
    }
    expect(texts.join("\n")).not.toContain(secret);
    expect(h.logs.join("\n")).not.toContain(secret);
    expect(h.logs.some((l) => l.includes("git push delivery"))).toBe(true);
    expect(await storedIn(h, secret)).toEqual([]);
  });
});
