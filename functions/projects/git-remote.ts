/**
 * Asking a project's git host: which repository a project names, listing it
 * with the clone credential that applies, and the host's failures as API
 * errors. Used by the git source routes and by the deployments API.
 */
import { tokenCredentials } from "../../shared/git/credentials";
import { cloneUrl, GIT_HOST_SETTINGS, type GitProvider, isGitProvider } from "../../shared/git/hosts";
import { type GitRemoteError, type ListRemoteResult, listRemote } from "../../shared/git/ls-remote";
import { KeyringError } from "../../shared/crypto/keyring";
import type { AppContext } from "../../shared/http/context";
import { ApiError, badRequest } from "../../shared/http/errors";
import { callerOf } from "../../shared/http/router";
import { cloneTokenFor } from "./git-store";
import { hasRepository, type ProjectRow } from "./store";

/** The OpenAPI answer of a route that asks the host. */
export const HOST_502 = { description: "The git host is unreachable (network error, timeout, 5xx, or refused by the outbound guard)" };

const TOKEN_HINT = "if it is private, set the project's clone token (PATCH /api/projects/{id}/clone-token) or a Settings clone token with asDefault";

export interface Repository {
  provider: GitProvider;
  owner: string;
  repo: string;
}

export function repositoryOf(row: ProjectRow): Repository | null {
  if (!hasRepository(row) || !isGitProvider(row.gitProvider)) return null;
  return { provider: row.gitProvider, owner: row.gitOwner!, repo: row.gitRepo! };
}

/** A host-side failure, or a provider this instance has no base URL for. */
export type RemoteFailure = GitRemoteError | { ok: false; kind: "unconfigured"; message: string };

export const unconfigured = (provider: GitProvider): RemoteFailure => ({
  ok: false,
  kind: "unconfigured",
  message: `${provider} has no host configured on this instance (${GIT_HOST_SETTINGS[provider]})`,
});

/**
 * Lists the repository's branches and default branch on its host, with the clone credential that applies
 * (`forwarded`: the caller's own git credential sent with a deployment, which then applies instead).
 */
export async function listRepository(
  c: AppContext,
  project: ProjectRow,
  repository: Repository,
  forwarded?: { username: string; password: string },
): Promise<ListRemoteResult | RemoteFailure> {
  const git = c.get("services").git;
  if (!git.hosts[repository.provider]) return unconfigured(repository.provider);
  const url = cloneUrl(repository.provider, repository.owner, repository.repo, git.hosts);
  if (!url) return { ok: false, kind: "not_found", message: `${repository.owner}/${repository.repo} is not a valid repository name` };
  if (forwarded) return listRemote(url, { fetch: git.fetch, credentials: { username: forwarded.username, password: forwarded.password } });
  let token: string | null;
  try {
    token = await cloneTokenFor(c.get("db"), c.get("keyring"), project, callerOf(c).userId);
  } catch (e) {
    if (e instanceof KeyringError)
      throw new ApiError("conflict", "The stored clone token cannot be decrypted (its key was removed from SECRET_KEYS): set it again");
    throw e;
  }
  return listRemote(url, { fetch: git.fetch, credentials: token ? tokenCredentials(repository.provider, token) : null });
}

export const named = (r: Repository) => `${r.provider} repository ${r.owner}/${r.repo}`;

/** The host's answer to a link: 400 naming `repo` when it is unknown or inaccessible, 502 when the host cannot be reached. */
export function linkFailure(failure: RemoteFailure, repository: Repository): ApiError {
  switch (failure.kind) {
    case "unconfigured":
      return badRequest("provider", failure.message);
    case "unreachable":
      return new ApiError("bad_gateway", `The git host of ${named(repository)} is unreachable: ${failure.message}`);
    case "invalid_response":
      if (failure.tooLarge) return new ApiError("bad_gateway", `The git host of ${named(repository)} answered badly: ${failure.message}`);
      return badRequest("repo", `${named(repository)} cannot be read: ${failure.message}`);
    case "unauthorized":
      return badRequest("repo", `${named(repository)} is inaccessible: ${failure.message}`);
    case "not_found": {
      const hidden = failure.status === 404 || failure.status === 410;
      // Hosts answer 404 for a private repository to whoever cannot read it.
      return badRequest("repo", hidden ? `${named(repository)} was not found (${failure.message}); ${TOKEN_HINT}` : `${named(repository)}: ${failure.message}`);
    }
  }
}

/** The host's answer when reading a linked repository: 502 when unreachable, 409 when it no longer answers for it. */
export function readFailure(failure: RemoteFailure, repository: Repository): ApiError {
  if (failure.kind === "unreachable" || (failure.kind === "invalid_response" && failure.tooLarge)) {
    return new ApiError("bad_gateway", `The git host of ${named(repository)} is unreachable: ${failure.message}`);
  }
  const hint = failure.kind === "not_found" && (failure.status === 404 || failure.inaccessible) ? `; ${TOKEN_HINT}` : "";
  return new ApiError("conflict", `The linked ${named(repository)} cannot be read: ${failure.message}${hint}`);
}
