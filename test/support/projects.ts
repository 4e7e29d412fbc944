/**
 * Helpers the Projects suites share: a project made through the API, calls under
 * /api/projects, deployment rows as the deployments API writes them, env var tools.
 */
import { and, eq } from "drizzle-orm";
import { deployments, environments, envVars } from "../../shared/db/schema";
import { newId } from "../../shared/ids";
import { DeploymentSchema } from "../../functions/projects/deployments";
import { EnvironmentSchema } from "../../functions/projects/environments";
import { ProjectSchema } from "../../functions/projects/schema";
import { pageOf } from "../../shared/http/pagination";
import { expectBody, expectStatus, type Harness, type Member } from "./harness";

export type Project = { id: string; name: string; slug: string; status: string; [k: string]: any };

/** Ids sort by millisecond only: deployments made by a test get strictly increasing times. */
let lastDeploymentMs = 0;
const nextDeploymentId = () => {
  lastDeploymentMs = Math.max(Date.now(), lastDeploymentMs + 1);
  return newId("dpl", lastDeploymentMs);
};

export function projectHelpers(h: Harness) {
  const create = async (t: Member, json: Record<string, unknown> = {}) =>
    (await expectBody(await h.request("/api/projects", { token: t.token, json: { name: `proj ${newId("n")}`, ...json } }), 201, ProjectSchema)) as Project;
  const call = (t: Member, path: string, init: { method?: string; json?: unknown; token?: string; org?: string } = {}) =>
    h.request(`/api/projects${path}`, { token: init.token ?? t.token, method: init.method, json: init.json, org: init.org });
  const get = async (t: Member, id: string) => (await expectBody(await call(t, `/${id}`), 200, ProjectSchema)) as Project;
  /** A deployment row, as the deployments API would write it; a `ready` one as a runner leaves it: current, its app answering on a port. */
  const addDeployment = async (p: Project, status: "queued" | "building" | "ready" | "failed" = "ready", envName = "production") => {
    const [env] = await h.db
      .select()
      .from(environments)
      .where(and(eq(environments.projectId, p.id), eq(environments.name, envName)));
    const [row] = await h.db
      .insert(deployments)
      .values({
        id: nextDeploymentId(),
        orgId: env!.orgId,
        projectId: p.id,
        environmentId: env!.id,
        status,
        branch: "main",
        commitSha: "a".repeat(40),
        ...(status === "ready" ? SERVING : {}),
      })
      .returning();
    return row!;
  };
  return { create, call, get, addDeployment };
}

/** What a runner records on a deployment whose app answers (no process listens there in these suites). */
export const SERVING = { current: true, servedBy: "test-runner", port: 9 } as const;

export const MASK = "••••••••";

export type Var = { key: string; value: string; isSecret: boolean };

export function envTools(h: Harness) {
  const { call } = projectHelpers(h);
  const patchEnv = (t: Member, p: Project, json: unknown) => call(t, `/${p.id}/env`, { method: "PATCH", json });
  /** Every variable of an environment, across pages. */
  const readEnv = async (t: Member, p: Project, environment = "production"): Promise<Var[]> => {
    const out: Var[] = [];
    let cursor: string | null = null;
    do {
      const q: string = `?environment=${environment}&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const page: { items: Var[]; nextCursor: string | null } = await expectStatus(await call(t, `/${p.id}/env${q}`), 200);
      out.push(...page.items.map(({ key, value, isSecret }) => ({ key, value, isSecret })));
      cursor = page.nextCursor;
    } while (cursor);
    return out;
  };
  /** The stored plaintext of a secret, decrypted with its row's context. */
  const storedSecret = async (p: Project, orgId: string, key: string, environment = "production") => {
    const [env] = await h.db
      .select()
      .from(environments)
      .where(and(eq(environments.projectId, p.id), eq(environments.name, environment)));
    const [row] = await h.db
      .select()
      .from(envVars)
      .where(and(eq(envVars.projectId, p.id), eq(envVars.environmentId, env!.id), eq(envVars.key, key)));
    if (!row?.valueCiphertext) return { row, plain: undefined };
    const plain = await h.keyring.decrypt(row.valueCiphertext, { orgId, table: "env_vars", column: "value", rowId: `${p.id}/${env!.id}/${key}` });
    return { row, plain, envId: env!.id };
  };
  return { patchEnv, readEnv, storedSecret };
}

/** The list routes' pages, built as the routes build them (the shared page of the route's own item schema). */
export const EnvironmentPage = pageOf(EnvironmentSchema, "EnvironmentPage");
export const DeploymentPage = pageOf(DeploymentSchema, "DeploymentPage");
