/** Helpers for the deployments suites: the API's calls and the runner's steps, played through the store. */
import { and, eq } from "drizzle-orm";
import { DeploymentSchema } from "../../functions/deployments/schema";
import { insertDeployment, markReady, markStatus } from "../../functions/deployments/store";
import { deployments, environments } from "../../shared/db/schema";
import { pageOf } from "../../shared/http/pagination";
import { expectBody, type Harness, type Member } from "./harness";
import { type Project, SERVING } from "./projects";

export const DeploymentList = pageOf(DeploymentSchema, "DeploymentList");

export function deploymentHelpers(h: Harness) {
  const queue = (t: Member, json: Record<string, unknown>) => h.request("/api/deployments", { method: "POST", token: t.token, org: t.orgId, json });
  const read = (t: Member, id: string) => h.request(`/api/deployments/${id}`, { token: t.token, org: t.orgId });
  const act = (t: Member, id: string, action: "cancel" | "promote") =>
    h.request(`/api/deployments/${id}/${action}`, { method: "POST", token: t.token, org: t.orgId });
  const list = async (t: Member, p: Project, query = "") =>
    expectBody(await h.request(`/api/projects/${p.id}/deployments${query}`, { token: t.token, org: t.orgId }), 200, DeploymentList);

  /** A queued deployment written straight into the table (a project without a source cannot be queued through the API). */
  const seedQueued = async (p: Project, envName = "production") => {
    const [env] = await h.db
      .select()
      .from(environments)
      .where(and(eq(environments.projectId, p.id), eq(environments.name, envName)));
    return h.db.transaction((tx) =>
      insertDeployment(tx, { orgId: env!.orgId, projectId: p.id, environmentId: env!.id, branch: "main", commitSha: "b".repeat(40) }, new Date()),
    );
  };

  /** What the runner will do to a queued deployment that works out: building, deploying, its app answering on a port, then ready and current. */
  const runToReady = async (id: string) => {
    await markStatus(h.db, id, "building", new Date());
    await markStatus(h.db, id, "deploying", new Date());
    await h.db.update(deployments).set({ servedBy: SERVING.servedBy, port: SERVING.port }).where(eq(deployments.id, id));
    return markReady(h.db, id, new Date());
  };

  return { queue, read, act, list, seedQueued, runToReady };
}
