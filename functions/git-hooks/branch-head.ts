/**
 * Whether a pushed commit is still worth deploying, asked of the host rather
 * than taken from the delivery: a signed push stays valid forever, so an old one
 * (captured, or redelivered late) must not move production back. The push's
 * commit must be its branch's head on the host now; an older commit is never
 * the head unless the branch was really reset to it, and then deploying it is
 * what the owner did. The same listing POST /api/deployments pins from.
 */
import { KeyringError } from "../../shared/crypto/keyring";
import { tokenCredentials } from "../../shared/git/credentials";
import { cloneUrl } from "../../shared/git/hosts";
import { listRemote } from "../../shared/git/ls-remote";
import type { AppContext } from "../../shared/http/context";
import { ApiError } from "../../shared/http/errors";
import { cloneTokenFor, deployedCommit } from "../projects/git-store";
import { readFailure, repositoryOf, unconfigured } from "../projects/git-remote";
import type { ProjectRow } from "../projects/store";

/** null: the commit is the branch head and not deployed yet; else why the push queues nothing. */
export async function staleReason(c: AppContext, project: ProjectRow, branch: string, commit: string): Promise<string | null> {
  const repository = repositoryOf(project);
  if (!repository) return null; // Nothing to pin: the queue step records the push without a deployment.
  const git = c.get("services").git;
  const url = git.hosts[repository.provider] ? cloneUrl(repository.provider, repository.owner, repository.repo, git.hosts) : null;
  if (!url) throw readFailure(unconfigured(repository.provider), repository);
  let token: string | null;
  try {
    // A push has no caller: only the project's own clone token applies.
    token = await cloneTokenFor(c.get("db"), c.get("keyring"), project, null);
  } catch (e) {
    if (e instanceof KeyringError)
      throw new ApiError("conflict", "The project's clone token cannot be decrypted (its key was removed from SECRET_KEYS): set it again");
    throw e;
  }
  const listing = await listRemote(url, { fetch: git.fetch, credentials: token ? tokenCredentials(repository.provider, token) : null });
  // A host that cannot be asked now: nothing is recorded, so the host's own retry (or a Redeliver) is judged later.
  if (!listing.ok) throw readFailure(listing, repository);
  const head = listing.branches.find((b) => b.name === branch)?.commit;
  if (head === undefined) return `${branch} no longer exists on the host`;
  if (head !== commit) return `${commit} is not the head of ${branch} on the host (the head is ${head}): an older or superseded push`;
  if ((await deployedCommit(c.get("db"), project.id)) === commit) return `${commit} is already the current production deployment`;
  return null;
}
