/**
 * Push webhook deliveries as the git hosts send them: realistic payloads (a push
 * to a branch, a tag push, a ping or test delivery) with each host's headers and
 * signature, computed with WebCrypto so the same helper runs in workerd. And a
 * project with a push hook, seeded through the keyring as the auto-deploy route
 * stores it.
 */
import { eq } from "drizzle-orm";
import { toBase64Url } from "../../shared/crypto/encoding";
import { gitPushHooks, projects } from "../../shared/db/schema";
import { newId } from "../../shared/ids";
import type { Harness, Member } from "./harness";
import type { Project } from "./projects";

/** The hosts as they differ on the wire (Forgejo is stored as provider `gitea`). */
export const HOSTS = ["github", "gitlab", "gitea", "forgejo", "bitbucket"] as const;
export type Host = (typeof HOSTS)[number];
export const providerOf = (host: Host) => (host === "forgejo" ? "gitea" : host);

const hex = (bytes: Uint8Array) => [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
const randomHex = (n: number) => hex(crypto.getRandomValues(new Uint8Array(n)));
export const randomCommit = () => randomHex(20);
const uuid = () => crypto.randomUUID();

async function hmac(hash: "SHA-256" | "SHA-1", secret: string, body: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash }, false, ["sign"]);
  return hex(new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(body))));
}

/** `ping.commit`: the default branch's head a host's test delivery names (GitLab, Gitea); random when not given. */
export type Sample = { kind: "push"; ref: string; commit: string; before?: string } | { kind: "ping"; commit?: string } | { kind: "event"; name: string };

const repo = { owner: "octo-org", name: "web-app" };

function githubPayload(sample: Sample) {
  const repository = {
    id: 1296269,
    name: repo.name,
    full_name: `${repo.owner}/${repo.name}`,
    private: true,
    default_branch: "main",
    clone_url: `https://github.com/${repo.owner}/${repo.name}.git`,
  };
  const sender = { login: "octocat", id: 1, type: "User" };
  if (sample.kind === "ping") {
    return {
      zen: "Keep it logically awesome.",
      hook_id: 424242,
      hook: {
        type: "Repository",
        id: 424242,
        name: "web",
        active: true,
        events: ["push"],
        config: { content_type: "json", insecure_ssl: "0", url: "https://example.test/hook" },
      },
      repository,
      sender,
    };
  }
  if (sample.kind === "event") return { action: "opened", repository, sender };
  const deleted = /^0+$/.test(sample.commit);
  const commits = deleted
    ? []
    : [
        {
          id: sample.commit,
          message: "Fix the header\n\nLonger body",
          timestamp: "2026-11-24T10:00:00Z",
          author: { name: "Octo Cat", email: "octo@example.test" },
          added: [],
          removed: [],
          modified: ["index.js"],
        },
      ];
  return {
    ref: sample.ref,
    before: sample.before ?? randomCommit(),
    after: sample.commit,
    created: false,
    deleted,
    forced: false,
    base_ref: null,
    compare: `https://github.com/${repo.owner}/${repo.name}/compare/abc...def`,
    commits,
    head_commit: commits[0] ?? null,
    repository,
    pusher: { name: "octocat", email: "octo@example.test" },
    sender,
  };
}

function gitlabPayload(sample: Sample) {
  const project = {
    id: 15,
    name: repo.name,
    path_with_namespace: `${repo.owner}/${repo.name}`,
    default_branch: "main",
    git_http_url: `https://gitlab.example.test/${repo.owner}/${repo.name}.git`,
  };
  if (sample.kind === "event") return { object_kind: "merge_request", project, object_attributes: { iid: 1, action: "open" } };
  // GitLab has no ping: its Test > Push events button sends a push of the default branch's recent commits.
  if (sample.kind === "ping") return gitlabPayload({ kind: "push", ref: "refs/heads/main", commit: sample.commit ?? randomCommit() });
  const tag = sample.ref.startsWith("refs/tags/");
  return {
    object_kind: tag ? "tag_push" : "push",
    event_name: tag ? "tag_push" : "push",
    before: sample.before ?? randomCommit(),
    after: sample.commit,
    ref: sample.ref,
    ref_protected: true,
    checkout_sha: /^0+$/.test(sample.commit) ? null : sample.commit,
    user_id: 4,
    user_name: "John Smith",
    user_username: "jsmith",
    project_id: 15,
    project,
    commits: [
      {
        id: sample.commit,
        message: "Update README\n",
        title: "Update README",
        timestamp: "2026-11-24T10:00:00+00:00",
        author: { name: "John Smith", email: "js@example.test" },
      },
    ],
    total_commits_count: 1,
    repository: { name: repo.name, homepage: `https://gitlab.example.test/${repo.owner}/${repo.name}` },
  };
}

function giteaPayload(sample: Sample) {
  const repository = {
    id: 140,
    name: repo.name,
    full_name: `${repo.owner}/${repo.name}`,
    default_branch: "main",
    clone_url: `https://gitea.example.test/${repo.owner}/${repo.name}.git`,
  };
  const user = { id: 1, login: "gitea", username: "gitea", email: "someone@example.test" };
  if (sample.kind === "event") return { action: "opened", repository, sender: user };
  // The Test Delivery button: the default branch's head, pushed onto itself.
  const head = sample.kind === "ping" ? (sample.commit ?? randomCommit()) : sample.commit;
  const ref = sample.kind === "ping" ? "refs/heads/main" : sample.ref;
  const before = sample.kind === "ping" ? head : (sample.before ?? randomCommit());
  const commit = {
    id: head,
    message: "Webhooks Yay!",
    url: `https://gitea.example.test/${repo.owner}/${repo.name}/commit/${head}`,
    author: { name: "Gitea", email: "someone@example.test", username: "gitea" },
    timestamp: "2026-11-24T10:00:00Z",
  };
  return {
    ref,
    before,
    after: head,
    compare_url: `https://gitea.example.test/${repo.owner}/${repo.name}/compare/${before}...${head}`,
    commits: [commit],
    total_commits: 1,
    head_commit: commit,
    repository,
    pusher: user,
    sender: user,
  };
}

function bitbucketPayload(sample: Sample) {
  const repository = { type: "repository", full_name: `${repo.owner}/${repo.name}`, name: repo.name, uuid: "{7b2f0b7a-4d8f-4c33-a6a8-3f1e2d6c9b10}" };
  const actor = { type: "user", display_name: "Ann Dev", uuid: "{0d3c2b1a-0000-4000-8000-000000000001}" };
  if (sample.kind === "ping") return { test: true };
  if (sample.kind === "event") return { actor, repository, pullrequest: { id: 1, title: "Change" } };
  const tag = sample.ref.startsWith("refs/tags/");
  const name = sample.ref.replace(/^refs\/(heads|tags)\//, "");
  const type = tag ? "tag" : "branch";
  const side = (hash: string) => ({
    type,
    name,
    target: { type: "commit", hash, message: "Change the footer\n", date: "2026-11-24T10:00:00+00:00" },
    links: {},
  });
  const deleted = /^0+$/.test(sample.commit);
  return {
    actor,
    repository,
    push: {
      changes: [
        {
          new: deleted ? null : side(sample.commit),
          old: side(sample.before ?? randomCommit()),
          created: false,
          forced: false,
          closed: deleted,
          commits: [],
          truncated: false,
        },
        // Bitbucket lists every ref one push moved: here a new feature branch too.
        {
          new: { ...side(randomCommit()), type: "branch", name: `feature/${randomHex(3)}` },
          old: null,
          created: true,
          forced: false,
          closed: false,
          commits: [],
          truncated: false,
        },
      ],
    },
  };
}

function payloadOf(host: Host, sample: Sample) {
  switch (host) {
    case "github":
      return githubPayload(sample);
    case "gitlab":
      return gitlabPayload(sample);
    case "gitea":
    case "forgejo":
      return giteaPayload(sample);
    case "bitbucket":
      return bitbucketPayload(sample);
  }
}

/** The event header's value for the sample. */
function eventName(host: Host, sample: Sample): string {
  const tag = sample.kind === "push" && sample.ref.startsWith("refs/tags/");
  switch (host) {
    case "github":
      return sample.kind === "ping" ? "ping" : sample.kind === "event" ? sample.name : "push";
    case "gitlab":
      // GitLab has no ping: its Test button sends a sample push ("Push Hook").
      return sample.kind === "event" ? sample.name : tag ? "Tag Push Hook" : "Push Hook";
    case "gitea":
    case "forgejo":
      return sample.kind === "event" ? sample.name : "push";
    case "bitbucket":
      return sample.kind === "ping" ? "diagnostics:ping" : sample.kind === "event" ? sample.name : "repo:push";
  }
}

export interface DeliveryOptions {
  /** `good` (default), `bad` (signed with another secret) or `missing` (no signature header at all). */
  signature?: "good" | "bad" | "missing";
  deliveryId?: string;
  /** Send exactly this body (signed as is) instead of the sample's JSON. */
  body?: string;
}

export interface Delivery {
  headers: Record<string, string>;
  body: string;
  deliveryId: string;
}

/** A delivery of `sample` as `host` sends it, signed with `secret`. */
export async function delivery(host: Host, secret: string, sample: Sample, opts: DeliveryOptions = {}): Promise<Delivery> {
  const body = opts.body ?? JSON.stringify(payloadOf(host, sample));
  const id = opts.deliveryId ?? uuid();
  const key = opts.signature === "bad" ? `${secret}-not` : secret;
  const signed = opts.signature !== "missing";
  const sha256 = await hmac("SHA-256", key, body);
  const sha1 = await hmac("SHA-1", key, body);
  const event = eventName(host, sample);
  const headers: Record<string, string> = { "content-type": "application/json" };
  switch (host) {
    case "github":
      Object.assign(headers, { "user-agent": "GitHub-Hookshot/044aadd", "x-github-event": event, "x-github-delivery": id, "x-github-hook-id": "424242" });
      if (signed) Object.assign(headers, { "x-hub-signature": `sha1=${sha1}`, "x-hub-signature-256": `sha256=${sha256}` });
      break;
    case "gitlab":
      Object.assign(headers, {
        "user-agent": "GitLab/17.6.0",
        "x-gitlab-event": event,
        "x-gitlab-event-uuid": uuid(),
        "x-gitlab-webhook-uuid": uuid(),
        "x-gitlab-instance": "https://gitlab.example.test",
        // The same on every retry of one event (GitLab 17.4+): the delivery id.
        "idempotency-key": id,
      });
      if (signed) headers["x-gitlab-token"] = key;
      break;
    case "gitea":
    case "forgejo": {
      // Gitea sends GitHub's and Gogs' headers too; Forgejo adds its own on top of Gitea's.
      Object.assign(headers, {
        "x-gitea-event": event,
        "x-gitea-delivery": id,
        "x-gogs-event": event,
        "x-gogs-delivery": id,
        "x-github-event": event,
        "x-github-delivery": id,
      });
      if (signed)
        Object.assign(headers, {
          "x-gitea-signature": sha256,
          "x-gogs-signature": sha256,
          "x-hub-signature": `sha1=${sha1}`,
          "x-hub-signature-256": `sha256=${sha256}`,
        });
      if (host === "forgejo") {
        Object.assign(headers, { "x-forgejo-event": event, "x-forgejo-delivery": id });
        if (signed) headers["x-forgejo-signature"] = sha256;
      }
      break;
    }
    case "bitbucket":
      Object.assign(headers, {
        "user-agent": "Bitbucket-Webhooks/2.0",
        "x-event-key": event,
        "x-hook-uuid": "{5b1f0c2a-9d3e-4f5a-8b7c-6d5e4f3a2b1c}",
        "x-request-uuid": id,
        "x-attempt-number": "1",
      });
      if (signed) headers["x-hub-signature"] = `sha256=${sha256}`;
      break;
  }
  return { headers, body, deliveryId: id };
}

export const hookPath = (hookId: string) => `/api/git/hooks/${hookId}`;

/** Posts a delivery to the hook (no bearer token: the route is public). */
export const post = (h: Harness, hookId: string, d: Pick<Delivery, "headers" | "body">) =>
  h.request(hookPath(hookId), { method: "POST", headers: d.headers, body: d.body });

export interface SeededHook {
  hookId: string;
  secret: string;
}

/**
 * Gives the project a repository, a deploy branch and a push hook the way the
 * auto-deploy route stores them: a `gph_` id and the secret as AES-GCM
 * ciphertext bound to (org, git_push_hooks, secret, hook id).
 */
export async function seedPushHook(
  h: Harness,
  t: Member,
  p: Project,
  opts: {
    autoDeploy?: boolean;
    gitBranch?: string | null;
    defaultBranch?: string | null;
    provider?: "github" | "gitlab" | "gitea" | "bitbucket";
    /** The repository on the host (default octo-org/web-app, which no test host serves). */
    owner?: string;
    repo?: string;
  } = {},
): Promise<SeededHook> {
  await h.db
    .update(projects)
    .set({
      gitProvider: opts.provider ?? "github",
      gitOwner: opts.owner ?? repo.owner,
      gitRepo: opts.repo ?? repo.name,
      gitBranch: opts.gitBranch === undefined ? "main" : opts.gitBranch,
      gitDefaultBranch: opts.defaultBranch === undefined ? "main" : opts.defaultBranch,
      autoDeploy: opts.autoDeploy ?? true,
    })
    .where(eq(projects.id, p.id));
  const hookId = newId("gph");
  const secret = `whsec_${toBase64Url(crypto.getRandomValues(new Uint8Array(32)))}`;
  const ciphertext = await h.keyring.encrypt(secret, { orgId: t.orgId, table: "git_push_hooks", column: "secret", rowId: hookId });
  await h.db.insert(gitPushHooks).values({ id: hookId, orgId: t.orgId, projectId: p.id, secret: ciphertext });
  return { hookId, secret };
}

/** Every provider's base URL at the run's test git host, so a hook's branch-head check reads real refs there. */
export const hostsAt = (url: string) => ({ GIT_GITHUB_URL: url, GIT_GITLAB_URL: url, GIT_BITBUCKET_URL: url, GIT_GITEA_URL: url });
