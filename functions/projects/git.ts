/**
 * Git source routes: link a repository (checked on its host now), the deploy
 * branch, the remote's branches, commit status, auto-deploy (the push hook) and
 * the webhook domain. The host is asked over git smart HTTP through the guarded
 * transport (c.get("services").git), with the project's clone token, else the caller's
 * Settings token marked `asDefault`; a token is never returned, logged or put
 * into a URL. PATCH /api/projects/:id with gitOwner/gitRepo/gitBranch only
 * records names; `git/link` is the route that checks them.
 */
import { z } from "@hono/zod-openapi";
import { cloneUrl, GIT_PROVIDERS, isGitProvider, normalizeOwner, normalizeRepo } from "../../shared/git/hosts";
import type { AppContext } from "../../shared/http/context";
import { ApiError, badRequest } from "../../shared/http/errors";
import { MAX_LIMIT, PageQuery } from "../../shared/http/pagination";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { Hostname } from "./connect";
import { HOST_502, linkFailure, listRepository, named, readFailure, type Repository, repositoryOf, unconfigured } from "./git-remote";
import { deployedCommit, findHook, type HookRow, linkRepository, setAutoDeploy, setDeployBranch, setWebhookDomain } from "./git-store";
import { BranchName, type GitSourceView, GitSourceSchema, ProjectIdParam } from "./schema";
import { findProject, lastPush, type ProjectRow } from "./store";

const TAGS = ["Projects"];
const NOT_LINKED = "The project has no linked git repository: link one with POST /api/projects/{id}/git/link";

/**
 * Where git hosts send pushes: `https://<webhook domain>` when the project sets
 * one; else PUBLIC_URL as configured (self-hosted); else the origin this request
 * came to (its scheme too: http on a plain-HTTP instance).
 */
function webhookBase(c: AppContext, row: ProjectRow): string {
  if (row.webhookDomain) return `https://${row.webhookDomain}`;
  const publicUrl = c.get("config").publicUrl;
  return (publicUrl ?? new URL(c.req.url).origin).replace(/\/+$/, "");
}

async function gitView(c: AppContext, row: ProjectRow, hook?: HookRow): Promise<GitSourceView> {
  const theHook = hook ?? (await findHook(c.get("db"), row.orgId, row.id));
  const repository = repositoryOf(row);
  return {
    linked: repository !== null,
    provider: repository?.provider ?? null,
    owner: repository?.owner ?? null,
    repo: repository?.repo ?? null,
    cloneUrl: repository ? cloneUrl(repository.provider, repository.owner, repository.repo, c.get("services").git.hosts) : null,
    branch: repository ? (row.gitBranch ?? row.gitDefaultBranch) : null,
    defaultBranch: repository ? row.gitDefaultBranch : null,
    autoDeploy: row.autoDeploy,
    webhookDomain: row.webhookDomain,
    webhookUrl: theHook ? `${webhookBase(c, row)}/api/git/hooks/${theHook.id}` : null,
    linkedAt: repository ? (row.gitLinkedAt?.toISOString() ?? null) : null,
    lastPush: lastPush(row),
  };
}

const Owner = z.string().min(1).max(255).openapi({
  description:
    "The user, organization or workspace (on GitLab also `group/subgroup`): letters, digits, `_`, `.` and `-` per segment, at most 100 characters each",
});
const Repo = z.string().min(1).max(104).openapi({ description: "The repository name (a trailing `.git` is dropped): letters, digits, `_`, `.` and `-`" });
const Provider = z.enum(GIT_PROVIDERS).openapi({
  description:
    "Where the repository lives; each provider's base URL is the operator's setting (GIT_GITHUB_URL, GIT_GITLAB_URL, GIT_BITBUCKET_URL, GIT_GITEA_URL), else github.com, gitlab.com, bitbucket.org; `gitea` has no default",
});

const LinkBody = z
  .strictObject({
    owner: Owner,
    repo: Repo,
    branch: BranchName.optional().openapi({ description: "The deploy branch; omitted: the repository's default branch (its `HEAD`)" }),
    provider: Provider.optional().openapi({ description: "Omitted: the project's current git provider, else `github`" }),
  })
  .openapi("GitLinkBody");

const ProjectParams = { params: ProjectIdParam };
const NOT_LINKED_409 = { description: "The project has no linked repository, or the host no longer answers for it (moved, deleted, token refused)" };

const link = defineRoute({
  method: "post",
  path: "/projects/{id}/git/link",
  tags: TAGS,
  summary: "Link a git repository (checked on its host now)",
  description: `Checks the repository on its host over git smart HTTP (with the project's clone token, else the caller's Settings clone token marked \`asDefault\`), then points the project at it: provider, owner, repo, deploy branch, the remote's default branch and the link time. \`branch\` omitted: the repository's default branch. Re-linking re-points the project and keeps everything else (environments, variables, clone token, auto-deploy and its webhook URL, webhook domain). 400 naming \`owner\`, \`repo\` or \`branch\` when malformed; 400 naming \`repo\` when the host has no such repository or refuses access (the message says which, and hints at the clone token on 401/403/404); 400 naming \`branch\` when it does not exist there; 400 naming \`provider\` when this instance has no host for it. Unlike PATCH /api/projects/{id} with gitOwner/gitRepo/gitBranch, which records the names without asking the host.`,
  permission: "project:write",
  request: { ...ProjectParams, body: jsonRequest(LinkBody) },
  responses: { 200: jsonResponse(GitSourceSchema, "The project's git source as linked"), 502: HOST_502 },
});

const read = defineRoute({
  method: "get",
  path: "/projects/{id}/git",
  tags: TAGS,
  summary: "The project's linked git repository",
  description:
    "What is stored (the host is not asked): provider, owner, repo, clone URL (no credentials), deploy branch, default branch, auto-deploy, webhook domain and URL, link time, last push. A project without a repository reads `linked: false`. A repository named by PATCH (never linked) reads `linked: true` with `linkedAt: null`.",
  permission: "project:read",
  request: ProjectParams,
  responses: { 200: jsonResponse(GitSourceSchema, "The project's git source") },
});

const BranchQuery = PageQuery.extend({
  cursor: z.string().max(1024).optional().openapi({ description: "`nextCursor` of the previous page" }),
  q: z.string().max(255).optional().openapi({ description: "Only branches whose name contains this text (case-insensitive)" }),
});

const BranchSchema = z
  .object({
    name: z.string(),
    commit: z.string().openapi({ description: "The branch's head commit (SHA-1 or SHA-256, hex)" }),
    isDefault: z.boolean().openapi({ description: "The repository's default branch (its `HEAD`)" }),
  })
  .openapi("GitBranch");

const BranchPage = z
  .object({ items: z.array(BranchSchema), nextCursor: z.string().nullable().openapi({ description: "null on the last page" }) })
  .openapi("GitBranchPage");

const branches = defineRoute({
  method: "get",
  path: "/projects/{id}/branches",
  tags: TAGS,
  summary: "The linked repository's branches, from its host",
  description: `Asked of the host on every call. Sorted by name; \`q\` filters by name (case-insensitive substring); \`limit\` 1-${MAX_LIMIT}, default 50; pass \`nextCursor\` as \`cursor\` for the next page. 409 when the project has no linked repository or the host no longer answers for it; 502 when the host is unreachable.`,
  permission: "project:read",
  request: { ...ProjectParams, query: BranchQuery },
  responses: { 200: jsonResponse(BranchPage, "One page of branches"), 409: NOT_LINKED_409, 502: HOST_502 },
});

const setBranch = defineRoute({
  method: "post",
  path: "/projects/{id}/branch",
  tags: TAGS,
  summary: "Set the deploy branch (it must exist on the host)",
  description:
    "The branch is checked on the host: 400 naming `branch` when it does not exist there. Pushes to this branch deploy when auto-deploy is on. 409 when the project has no linked repository; 502 when the host is unreachable. PATCH gitBranch sets it without asking the host.",
  permission: "project:write",
  request: { ...ProjectParams, body: jsonRequest(z.strictObject({ branch: BranchName }).openapi("GitBranchBody")) },
  responses: { 200: jsonResponse(GitSourceSchema, "The project's git source"), 409: NOT_LINKED_409, 502: HOST_502 },
});

const COMMIT_STATUSES = ["up_to_date", "outdated", "not_deployed", "unknown"] as const;

const CommitStatusSchema = z
  .object({
    branch: z.string().nullable().openapi({ description: "The deploy branch compared" }),
    deployedCommit: z.string().nullable().openapi({ description: "The commit of the current ready production deployment; null before one" }),
    remoteCommit: z.string().nullable().openapi({ description: "The branch's head on the host now; null when it could not be read" }),
    status: z.enum(COMMIT_STATUSES).openapi({
      description:
        "`up_to_date`: the deployed commit is the branch head; `outdated`: the branch has moved on; `not_deployed`: no ready production deployment with a commit (whatever the host says); `unknown`: the head could not be read (see `reason`)",
    }),
    checkedAt: z.string(),
    reason: z.string().optional().openapi({ description: "Why the branch head could not be read (present exactly when `remoteCommit` is null)" }),
  })
  .openapi("GitCommitStatus");

const commitStatus = defineRoute({
  method: "get",
  path: "/projects/{id}/commit-status",
  tags: TAGS,
  summary: "Compare the deployed commit with the branch head on the host",
  description:
    "The host is asked now. A host that cannot be reached (or no longer answers for the repository, or a deploy branch it no longer has) still answers 200, with `status: unknown` and the `reason`. 409 when the project has no linked repository.",
  permission: "project:read",
  request: ProjectParams,
  responses: { 200: jsonResponse(CommitStatusSchema, "The commit status"), 409: { description: "The project has no linked repository" } },
});

const AutoDeployResult = GitSourceSchema.extend({
  webhookSecret: z.string().nullable().openapi({
    description:
      "The push hook's signing secret, shown ONCE: in the answer that turned auto-deploy on for the first time (and created the hook); null in every other answer. Paste it with `webhookUrl` into the git host's webhook settings.",
  }),
}).openapi("GitAutoDeploy");

const autoDeploy = defineRoute({
  method: "post",
  path: "/projects/{id}/auto-deploy",
  tags: TAGS,
  summary: "Turn deploy-on-push on or off",
  description:
    "On: a push to the deploy branch, delivered to `webhookUrl` and signed with the secret, deploys it. The first time it is turned on, the project's push hook is created: its `webhookUrl` and its `webhookSecret`, which is returned only in that answer (encrypted at rest, never shown again). Off keeps the hook, so the URL in the git host stays valid and turning it on again needs no new setup. Turning it on needs a linked repository (409).",
  permission: "project:write",
  request: { ...ProjectParams, body: jsonRequest(z.strictObject({ enabled: z.boolean() }).openapi("GitAutoDeployBody")) },
  responses: {
    200: jsonResponse(AutoDeployResult, "The project's git source, with the secret when the hook was just created"),
    409: { description: "The project has no linked repository" },
  },
});

const webhookDomain = defineRoute({
  method: "post",
  path: "/projects/{id}/webhook-domain",
  tags: TAGS,
  summary: "Set the public hostname git hosts send pushes to",
  description:
    "`domain`: a hostname (the rules of POST /connect: lower-cased, a trailing dot dropped, no scheme, port, path or IP address); the webhook URL becomes `https://<domain>/api/git/hooks/<hookId>`. For an instance behind a proxy or a tunnel. `null` returns to the default: PUBLIC_URL as configured on the self-hosted server, else the origin of the request reading the URL.",
  permission: "project:write",
  request: {
    ...ProjectParams,
    body: jsonRequest(z.strictObject({ domain: Hostname.nullable().openapi({ description: "null: the default" }) }).openapi("GitWebhookDomainBody")),
  },
  responses: { 200: jsonResponse(GitSourceSchema, "The project's git source") },
});

/** The linked repository of the caller's project, or 409. */
async function linkedProject(c: AppContext, id: string): Promise<{ project: ProjectRow; repository: Repository }> {
  const project = await findProject(c.get("db"), callerOf(c).orgId, id);
  const repository = repositoryOf(project);
  if (!repository) throw new ApiError("conflict", NOT_LINKED);
  return { project, repository };
}

export const gitRouter = createRouter()
  .openapi(link, async (c) => {
    const { orgId } = callerOf(c);
    const body = c.req.valid("json");
    const project = await findProject(c.get("db"), orgId, c.req.valid("param").id);
    const provider = body.provider ?? (isGitProvider(project.gitProvider) ? project.gitProvider : "github");
    if (!c.get("services").git.hosts[provider]) throw badRequest("provider", unconfigured(provider).message);
    const owner = normalizeOwner(body.owner, provider);
    if (!owner) {
      throw badRequest("owner", `must be a ${provider === "gitlab" ? "user or group path" : "user or organization name"}: letters, digits, '_', '.' and '-'`);
    }
    const repo = normalizeRepo(body.repo);
    if (!repo) throw badRequest("repo", "must be a repository name: letters, digits, '_', '.' and '-'");
    const repository = { provider, owner, repo };
    const listing = await listRepository(c, project, repository);
    if (!listing.ok) throw linkFailure(listing, repository);
    const branch = body.branch ?? listing.headBranch;
    if (!branch) throw badRequest("branch", `${named(repository)} has no default branch (is it empty?): name the branch to deploy`);
    if (!listing.branches.some((b) => b.name === branch)) throw badRequest("branch", `Branch '${branch}' does not exist in ${named(repository)}`);
    const row = await linkRepository(c.get("db"), orgId, project.id, { ...repository, branch, defaultBranch: listing.headBranch }, c.get("clock")());
    return c.json(await gitView(c, row), 200);
  })
  .openapi(read, async (c) => {
    const row = await findProject(c.get("db"), callerOf(c).orgId, c.req.valid("param").id);
    return c.json(await gitView(c, row), 200);
  })
  .openapi(branches, async (c) => {
    const { limit, cursor, q } = c.req.valid("query");
    const { project, repository } = await linkedProject(c, c.req.valid("param").id);
    const listing = await listRepository(c, project, repository);
    if (!listing.ok) throw readFailure(listing, repository);
    const needle = q?.toLowerCase();
    // Sorted by name, so the cursor (the last name shown) is a keyset.
    const matching = listing.branches.filter((b) => (!needle || b.name.toLowerCase().includes(needle)) && (cursor === undefined || b.name > cursor));
    const items = matching.slice(0, limit).map((b) => ({ name: b.name, commit: b.commit, isDefault: b.name === listing.headBranch }));
    return c.json({ items, nextCursor: matching.length > limit ? items[items.length - 1]!.name : null }, 200);
  })
  .openapi(setBranch, async (c) => {
    const { branch } = c.req.valid("json");
    const { project, repository } = await linkedProject(c, c.req.valid("param").id);
    const listing = await listRepository(c, project, repository);
    if (!listing.ok) throw readFailure(listing, repository);
    if (!listing.branches.some((b) => b.name === branch)) throw badRequest("branch", `Branch '${branch}' does not exist in ${named(repository)}`);
    const row = await setDeployBranch(c.get("db"), project.orgId, project.id, branch, listing.headBranch, c.get("clock")());
    return c.json(await gitView(c, row), 200);
  })
  .openapi(commitStatus, async (c) => {
    const { project, repository } = await linkedProject(c, c.req.valid("param").id);
    const [deployed, listing] = await Promise.all([deployedCommit(c.get("db"), project.id), listRepository(c, project, repository)]);
    const checkedAt = c.get("clock")().toISOString();
    let branch = project.gitBranch ?? project.gitDefaultBranch;
    let remoteCommit: string | null = null;
    let reason: string | undefined;
    if (!listing.ok) reason = `${readFailure(listing, repository).message}`;
    else {
      branch ??= listing.headBranch;
      remoteCommit = listing.branches.find((b) => b.name === branch)?.commit ?? null;
      if (!branch) reason = "The repository has no default branch and the project names none";
      else if (!remoteCommit) reason = `Branch '${branch}' does not exist in ${named(repository)}`;
    }
    // Without a ready production deployment the answer is known whatever the host says.
    const status = !deployed ? "not_deployed" : reason ? "unknown" : deployed === remoteCommit ? "up_to_date" : "outdated";
    return c.json({ branch, deployedCommit: deployed, remoteCommit, status, checkedAt, ...(reason ? { reason } : {}) }, 200);
  })
  .openapi(autoDeploy, async (c) => {
    const { orgId } = callerOf(c);
    const { enabled } = c.req.valid("json");
    const id = c.req.valid("param").id;
    if (enabled && !repositoryOf(await findProject(c.get("db"), orgId, id))) throw new ApiError("conflict", NOT_LINKED);
    const { project, hook, secret } = await setAutoDeploy(c.get("db"), c.get("keyring"), orgId, id, enabled, c.get("clock")());
    return c.json({ ...(await gitView(c, project, hook)), webhookSecret: secret }, 200);
  })
  .openapi(webhookDomain, async (c) => {
    const { domain } = c.req.valid("json");
    const row = await setWebhookDomain(c.get("db"), callerOf(c).orgId, c.req.valid("param").id, domain, c.get("clock")());
    return c.json(await gitView(c, row), 200);
  });
