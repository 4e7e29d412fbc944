/**
 * Where a project's repository lives: a provider and the base URL the operator
 * points it at. The public hosts are the defaults; one setting per provider
 * overrides each (a GitHub Enterprise, a self-managed GitLab, a Bitbucket
 * Data Center); Gitea/Forgejo has no public default and needs its setting.
 * Repository access is plain git smart HTTP at `<base>/<owner>/<repo>.git`, so
 * any git server behind one of these settings works.
 */

export const GIT_PROVIDERS = ["github", "gitlab", "bitbucket", "gitea"] as const;
export type GitProvider = (typeof GIT_PROVIDERS)[number];

export const DEFAULT_GIT_HOSTS: Readonly<Record<GitProvider, string | null>> = {
  github: "https://github.com",
  gitlab: "https://gitlab.com",
  bitbucket: "https://bitbucket.org",
  gitea: null,
};

/** The operator setting that overrides each provider's base URL. */
export const GIT_HOST_SETTINGS: Readonly<Record<GitProvider, string>> = {
  github: "GIT_GITHUB_URL",
  gitlab: "GIT_GITLAB_URL",
  bitbucket: "GIT_BITBUCKET_URL",
  gitea: "GIT_GITEA_URL",
};

/** Base URL per provider (no trailing slash); null: the provider is not configured here. */
export type GitHosts = Readonly<Record<GitProvider, string | null>>;

export function isGitProvider(value: unknown): value is GitProvider {
  return typeof value === "string" && (GIT_PROVIDERS as readonly string[]).includes(value);
}

const MAX_BASE_URL = 2048;

/**
 * A base URL as the operator wrote it, checked: http or https, a host, no
 * credentials (tokens belong to projects, not to the host setting), no query or
 * fragment; trailing slashes dropped. A path is kept (a GitLab under `/gitlab`).
 */
export function parseGitBaseUrl(raw: string): { ok: true; url: string } | { ok: false; error: string } {
  const text = raw.trim();
  if (text.length === 0 || text.length > MAX_BASE_URL) return { ok: false, error: "must be an http(s) URL" };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { ok: false, error: "must be an http(s) URL" };
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return { ok: false, error: "must be an http(s) URL" };
  if (!url.hostname) return { ok: false, error: "must name a host" };
  if (url.username || url.password) return { ok: false, error: "must not carry credentials (clone tokens are set per project)" };
  if (url.search || url.hash || text.includes("?") || text.includes("#")) return { ok: false, error: "must not have a query or fragment" };
  let path = url.pathname;
  while (path.endsWith("/")) path = path.slice(0, -1);
  return { ok: true, url: `${url.protocol}//${url.host}${path}` };
}

/**
 * The git hosts from the environment: each provider's setting when present,
 * else its public default. A malformed setting is an operator error: thrown at
 * start-up with the setting's name, never a silent fallback.
 */
export function gitHostsFromEnv(env: Readonly<Record<string, string | undefined>>): GitHosts {
  const hosts = { ...DEFAULT_GIT_HOSTS };
  for (const provider of GIT_PROVIDERS) {
    const name = GIT_HOST_SETTINGS[provider];
    const raw = env[name];
    if (raw === undefined || raw.trim() === "") continue;
    const parsed = parseGitBaseUrl(raw);
    if (!parsed.ok) throw new Error(`${name} ${parsed.error}`);
    hosts[provider] = parsed.url;
  }
  return hosts;
}

// Owner and repository names, checked before they go into a URL. One segment
// each, except GitLab's nested groups (`group/subgroup`); the characters every
// provider allows in a name. Linear checks only: names come from clients.
const SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
const MAX_SEGMENT = 100;
const MAX_OWNER = 255;

function validSegment(segment: string): boolean {
  return segment.length > 0 && segment.length <= MAX_SEGMENT && SEGMENT.test(segment) && !segment.endsWith(".") && !segment.includes("..");
}

/** An owner (user, organization, workspace; on GitLab also `group/subgroup`), or null when malformed. */
export function normalizeOwner(raw: string, provider: GitProvider): string | null {
  const owner = raw.trim();
  if (owner.length === 0 || owner.length > MAX_OWNER) return null;
  const segments = provider === "gitlab" ? owner.split("/") : [owner];
  return segments.every(validSegment) ? owner : null;
}

/** A repository name without a trailing `.git`, or null when malformed. */
export function normalizeRepo(raw: string): string | null {
  let repo = raw.trim();
  if (repo.toLowerCase().endsWith(".git")) repo = repo.slice(0, -4);
  return validSegment(repo) ? repo : null;
}

/**
 * The clone URL `<base>/<owner>/<repo>.git`: no credentials, safe to return and
 * log. Null when the provider has no base URL here (Gitea without GIT_GITEA_URL)
 * or a name is malformed.
 */
export function cloneUrl(provider: GitProvider, owner: string, repo: string, hosts: GitHosts = DEFAULT_GIT_HOSTS): string | null {
  const base = hosts[provider];
  const o = normalizeOwner(owner, provider);
  const r = normalizeRepo(repo);
  if (!base || !o || !r) return null;
  return `${base}/${o}/${r}.git`;
}
