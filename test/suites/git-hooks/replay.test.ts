/**
 * A captured signed push must not act twice nor roll production back: the same
 * body under a new or no delivery id creates nothing; a push whose commit is no
 * longer the branch head on the host (the test git host's real refs) queues
 * nothing; a hook takes only its project's provider's signature scheme.
 */
import { and, eq } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { PushDelivery } from "../../../functions/git-hooks/push";
import { DELIVERY_RETENTION_DAYS } from "../../../functions/git-hooks/store";
import { deployments, gitPushEvents, projects } from "../../../shared/db/schema";
import { gitServerControl } from "../../support/git-control";
import { delivery, HOSTS, hostsAt, post, providerOf, seedPushHook, type Host } from "../../support/git-hooks";
import { expectBody, expectProblem, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness({ env: hostsAt(inject("gitServerUrl")) });
const control = gitServerControl(inject("gitServerUrl"));
const { create } = projectHelpers(h);

const eventsOf = (projectId: string) => h.db.select().from(gitPushEvents).where(eq(gitPushEvents.projectId, projectId));
const deploymentsOf = (projectId: string) => h.db.select().from(deployments).where(eq(deployments.projectId, projectId)).orderBy(deployments.id);
const lastPushOf = async (projectId: string) =>
  (await h.db.select({ commit: projects.lastPushCommit }).from(projects).where(eq(projects.id, projectId)))[0]!.commit;

async function setup(provider: ReturnType<typeof providerOf> = "github") {
  const t = await seedTenant(h);
  const p = await create(t);
  const repo = await control.createRepo();
  const hook = await seedPushHook(h, t, p, { provider, owner: repo.owner, repo: repo.repo });
  const advance = () => control.addCommit(repo.owner, repo.repo, "main");
  return { p, head: repo.branches.main!, advance, ...hook };
}

/** What the runner would do: the deployment is ready and serves production. */
async function makeCurrent(projectId: string, deploymentId: string) {
  await h.db.update(deployments).set({ current: false }).where(eq(deployments.projectId, projectId));
  await h.db.update(deployments).set({ status: "ready", current: true }).where(eq(deployments.id, deploymentId));
}
const currentOf = async (projectId: string) =>
  (
    await h.db
      .select({ id: deployments.id })
      .from(deployments)
      .where(and(eq(deployments.projectId, projectId), eq(deployments.current, true)))
  )[0]?.id;

/** The headers naming the delivery id, per host (GitLab's retry key, Bitbucket's request id). */
const DELIVERY_HEADERS: Record<Host, string[]> = {
  github: ["x-github-delivery"],
  gitlab: ["idempotency-key", "x-gitlab-event-uuid"],
  gitea: ["x-gitea-delivery", "x-gogs-delivery", "x-github-delivery"],
  forgejo: ["x-forgejo-delivery", "x-gitea-delivery", "x-gogs-delivery", "x-github-delivery"],
  bitbucket: ["x-request-uuid"],
};

describe("push webhook: replays", () => {
  for (const host of HOSTS) {
    it(`${host}: the same signed body under a new delivery id, or none, queues nothing new and says it was a replay`, async () => {
      const { p, hookId, secret, head } = await setup(providerOf(host));
      const d = await delivery(host, secret, { kind: "push", ref: "refs/heads/main", commit: head });
      const first = await expectBody(await post(h, hookId, d), 202, PushDelivery);
      expect(first).toMatchObject({ outcome: "deploy_queued", redelivery: false, reason: null });
      const renamed = { ...d.headers };
      for (const name of DELIVERY_HEADERS[host]) renamed[name] = crypto.randomUUID();
      const unnamed = Object.fromEntries(Object.entries(d.headers).filter(([name]) => !DELIVERY_HEADERS[host].includes(name)));
      for (const headers of [renamed, unnamed]) {
        const again = await expectBody(await post(h, hookId, { headers, body: d.body }), 202, PushDelivery);
        expect(again).toEqual({ ...first, redelivery: true, reason: expect.stringMatching(/replay/i) });
      }
      expect(await eventsOf(p.id)).toHaveLength(1);
      expect((await deploymentsOf(p.id)).map((r) => r.id)).toEqual([first.deploymentId]);
    });
  }
});

describe("push webhook: stale pushes", () => {
  it("an older signed push after the branch moved on is 202 stale, queues nothing and does not roll production back", async () => {
    const { p, hookId, secret, head: older, advance } = await setup();
    const captured = await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit: older });
    const first = await expectBody(await post(h, hookId, captured), 202, PushDelivery);
    await makeCurrent(p.id, first.deploymentId!);
    const newer = await advance();
    const second = await expectBody(
      await post(h, hookId, await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit: newer })),
      202,
      PushDelivery,
    );
    expect(second.outcome).toBe("deploy_queued");
    await makeCurrent(p.id, second.deploymentId!);

    // The captured body again, with a new delivery id: a replay.
    const replay = await expectBody(
      await post(h, hookId, { ...captured, headers: { ...captured.headers, "x-github-delivery": crypto.randomUUID() } }),
      202,
      PushDelivery,
    );
    expect(replay).toMatchObject({ redelivery: true, reason: expect.stringMatching(/replay/i) });
    // Another signed push naming the older commit (a late delivery, or a body past the retention): not the head.
    const lateDelivery = await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit: older });
    const late = await expectBody(await post(h, hookId, lateDelivery), 202, PushDelivery);
    expect(late).toMatchObject({ outcome: "stale", commit: older, deploymentId: null, redelivery: false });
    expect(late.reason).toMatch(new RegExp(`not the head of main on the host \\(the head is ${newer}\\)`));

    expect((await deploymentsOf(p.id)).map((r) => r.id).sort()).toEqual([first.deploymentId, second.deploymentId].sort());
    expect(await currentOf(p.id)).toBe(second.deploymentId);
    expect(await lastPushOf(p.id)).toBe(newer);
    // Recorded as stale, so the same late body again is a replay of that outcome.
    const lateAgain = await expectBody(await post(h, hookId, lateDelivery), 202, PushDelivery);
    expect(lateAgain).toMatchObject({ outcome: "stale", redelivery: true });
  });

  it("a body forgotten past the retention, replayed while its commit is deployed, is stale: nothing is queued twice", async () => {
    const { p, hookId, secret, head } = await setup();
    const d = await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit: head });
    const first = await expectBody(await post(h, hookId, d), 202, PushDelivery);
    await makeCurrent(p.id, first.deploymentId!);
    const old = new Date(Date.now() - (DELIVERY_RETENTION_DAYS + 1) * 24 * 60 * 60 * 1000);
    await h.db.update(gitPushEvents).set({ receivedAt: old }).where(eq(gitPushEvents.projectId, p.id));
    // Any new delivery prunes the project's records past the retention.
    await expectBody(await post(h, hookId, await delivery("github", secret, { kind: "event", name: "issues" })), 202, PushDelivery);
    expect((await eventsOf(p.id)).map((r) => r.event)).toEqual(["issues"]);
    const again = await expectBody(await post(h, hookId, d), 202, PushDelivery);
    expect(again).toMatchObject({ outcome: "stale", redelivery: false, deploymentId: null });
    expect(again.reason).toMatch(/already the current production deployment/);
    expect(await deploymentsOf(p.id)).toHaveLength(1);
  });

  it("a push of a branch that no longer exists on the host is stale", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo();
    const { hookId, secret } = await seedPushHook(h, t, p, { owner: repo.owner, repo: repo.repo, gitBranch: "gone" });
    const answer = await expectBody(
      await post(h, hookId, await delivery("github", secret, { kind: "push", ref: "refs/heads/gone", commit: repo.branches.main! })),
      202,
      PushDelivery,
    );
    expect(answer).toMatchObject({ outcome: "stale", reason: "gone no longer exists on the host" });
    expect(await deploymentsOf(p.id)).toHaveLength(0);
  });
});

describe("push webhook: one signature scheme per hook", () => {
  it("another host's scheme signed with the right secret is 401 and nothing is stored", async () => {
    for (const provider of ["github", "gitlab", "gitea", "bitbucket"] as const) {
      const { p, hookId, secret, head } = await setup(provider);
      for (const host of HOSTS.filter((x) => providerOf(x) !== provider)) {
        const problem = await expectProblem(await post(h, hookId, await delivery(host, secret, { kind: "push", ref: "refs/heads/main", commit: head })), 401);
        expect(problem.detail).toMatch(new RegExp(`only its project's provider's signature \\(${provider}\\)`));
      }
      expect(await eventsOf(p.id)).toHaveLength(0);
      expect(await deploymentsOf(p.id)).toHaveLength(0);
      expect(await lastPushOf(p.id)).toBeNull();
    }
  });

  it("a GitHub-style X-Hub-Signature-256 alone on a gitea project is 401", async () => {
    const { p, hookId, secret, head } = await setup("gitea");
    const d = await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit: head });
    await expectProblem(await post(h, hookId, d), 401);
    expect(await eventsOf(p.id)).toHaveLength(0);
  });
});
