/**
 * The git client inside workerd: the smart-HTTP ref listing (shared/git/ls-refs.ts), the
 * Worker's guarded fetch, against the real git host the global setup started
 * (git http-backend on loopback, reached through OUTBOUND_ALLOW_PRIVATE).
 */
import { describe, expect, inject, it } from "vitest";
import { tokenCredentials } from "../../shared/git/credentials";
import { createGuardedGitFetch } from "../../shared/git/fetch";
import { type GitRemoteError, listRemote, type RemoteListing } from "../../shared/git/ls-remote";
import { gitServerControl } from "../support/git-control";

const serverUrl = inject("gitServerUrl");
const token = inject("gitToken");
const control = gitServerControl(serverUrl);
const gitFetch = createGuardedGitFetch({ allowPrivate: true });

function listing(result: unknown): RemoteListing {
  expect(result).toMatchObject({ ok: true });
  return result as RemoteListing;
}
function failure(result: unknown): GitRemoteError {
  expect(result).toMatchObject({ ok: false });
  return result as GitRemoteError;
}

describe("git client in workerd", () => {
  it("lists a public repository over protocol v2: default branch from HEAD, every branch at its head", async () => {
    const repo = await control.createRepo();
    const result = listing(await listRemote(repo.url, { fetch: gitFetch }));
    expect(result.protocol).toBe(2);
    expect(result.headBranch).toBe("trunk");
    expect(result.branches).toEqual(
      Object.entries(repo.branches)
        .map(([name, commit]) => ({ name, commit }))
        .sort((a, b) => a.name.localeCompare(b.name)),
    );
  });

  it("speaks v0 to a server that does not offer v2", async () => {
    const repo = await control.createRepo();
    const result = listing(await listRemote(repo.url.replace(serverUrl, `${serverUrl}/v0`), { fetch: gitFetch }));
    expect(result.protocol).toBe(0);
    expect(result.headBranch).toBe("trunk");
    expect(result.branches.find((b) => b.name === "main")?.commit).toBe(repo.branches.main);
  });

  it("sees a new commit pushed to a branch", async () => {
    const repo = await control.createRepo();
    const sha = await control.addCommit(repo.owner, repo.repo, "main");
    const result = listing(await listRemote(repo.url, { fetch: gitFetch }));
    expect(result.branches.find((b) => b.name === "main")?.commit).toBe(sha);
  });

  it("private repository: inaccessible without a token, listed with it, unauthorized with a wrong one", async () => {
    const repo = await control.createRepo({ private: true });
    const without = failure(await listRemote(repo.url, { fetch: gitFetch }));
    expect(without).toMatchObject({ kind: "not_found", inaccessible: true, status: 401 });
    expect(without.message).toMatch(/clone token/);
    for (const provider of ["github", "gitlab", "bitbucket", "gitea"] as const) {
      const ok = listing(await listRemote(repo.url, { fetch: gitFetch, credentials: tokenCredentials(provider, token) }));
      expect(ok.headBranch).toBe("trunk");
    }
    const wrong = failure(await listRemote(repo.url, { fetch: gitFetch, credentials: tokenCredentials("github", "wrong-token-canary") }));
    expect(wrong).toMatchObject({ kind: "unauthorized", status: 401 });
    expect(JSON.stringify(wrong)).not.toContain("wrong-token-canary");
  });

  it("unknown repository is not_found; a dead host, a silent host and an error status are unreachable", async () => {
    expect(failure(await listRemote(`${serverUrl}/acme/no-such-repo.git`, { fetch: gitFetch }))).toMatchObject({ kind: "not_found", status: 404 });
    expect(failure(await listRemote(`${serverUrl}/down/acme/x.git`, { fetch: gitFetch }))).toMatchObject({ kind: "unreachable" });
    expect(failure(await listRemote("http://127.0.0.1:1/acme/x.git", { fetch: gitFetch }))).toMatchObject({ kind: "unreachable" });
    expect(failure(await listRemote(`${serverUrl}/slow/acme/x.git`, { fetch: gitFetch, timeoutMs: 300 }))).toMatchObject({
      kind: "unreachable",
      timedOut: true,
    });
  });

  it("an endless answer stops at the size cap; a web page and a redirect are not taken for a repository", async () => {
    const big = failure(await listRemote(`${serverUrl}/endless/acme/x.git`, { fetch: gitFetch, maxBytes: 256 * 1024 }));
    expect(big).toMatchObject({ kind: "invalid_response", tooLarge: true });
    expect(failure(await listRemote(`${serverUrl}/html/acme/x.git`, { fetch: gitFetch }))).toMatchObject({ kind: "invalid_response" });
    expect(failure(await listRemote(`${serverUrl}/moved/acme/x.git`, { fetch: gitFetch }))).toMatchObject({ kind: "not_found", status: 301 });
  });

  it("the outbound guard refuses the loopback host unless private networks are allowed", async () => {
    const repo = await control.createRepo();
    const refused = failure(await listRemote(repo.url, { fetch: createGuardedGitFetch({ allowPrivate: false }) }));
    expect(refused).toMatchObject({ kind: "unreachable", refused: true });
    expect(refused.message).toMatch(/OUTBOUND_ALLOW_PRIVATE/);
  });
});
