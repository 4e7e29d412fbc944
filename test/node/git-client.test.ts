/**
 * The git client on Node against a real git host (git http-backend behind a
 * loopback server this file starts), through the Node adapter's guarded
 * transport; plus the host settings and the per-provider credential forms.
 */
import { execFile } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basicAuthorization, tokenCredentials } from "../../shared/git/credentials";
import { cloneUrl, DEFAULT_GIT_HOSTS, gitHostsFromEnv, normalizeOwner, normalizeRepo, parseGitBaseUrl } from "../../shared/git/hosts";
import { type GitRemoteError, listRemote, type RemoteListing } from "../../shared/git/ls-remote";
import { createNodeGitFetch } from "../../shared/git/node-fetch";
import { type GitTestServer, startGitServer, TEMPLATE_BRANCHES } from "../support/git-server";

const run = promisify(execFile);
const CANARY = "ghp_canaryTokenThatMustNeverLeak0123";

let server: GitTestServer;
const gitFetch = createNodeGitFetch({ allowPrivate: true });

beforeAll(async () => {
  server = await startGitServer();
});
afterAll(async () => {
  await server?.close();
});

function listing(result: unknown): RemoteListing {
  expect(result).toMatchObject({ ok: true });
  return result as RemoteListing;
}
function failure(result: unknown): GitRemoteError {
  expect(result).toMatchObject({ ok: false });
  return result as GitRemoteError;
}

describe("listRemote against git http-backend", () => {
  it("public repository over v2: default branch trunk from the HEAD symref, every branch at `git rev-parse`", async () => {
    const repo = await server.createRepo();
    server.resetRequestCount();
    const result = listing(await listRemote(repo.url, { fetch: gitFetch }));
    expect(result.protocol).toBe(2);
    expect(result.headBranch).toBe("trunk");
    expect(result.branches.map((b) => b.name)).toEqual([...TEMPLATE_BRANCHES].sort());
    for (const branch of result.branches) expect(branch.commit).toBe(await server.revParse(repo.owner, repo.repo, `refs/heads/${branch.name}`));
    // Two listServerRefs calls (branches, HEAD), each discovery + ls-refs; tags never listed.
    expect(server.requestCount()).toBe(4);
  });

  it("a v0-only server (no Git-Protocol passed on) gives the same answer from the advertisement", async () => {
    const repo = await server.createRepo();
    server.resetRequestCount();
    const v2 = listing(await listRemote(repo.url, { fetch: gitFetch }));
    const v0 = listing(await listRemote(repo.url.replace(server.url, `${server.url}/v0`), { fetch: gitFetch }));
    expect(v0.protocol).toBe(0);
    expect({ ...v0, protocol: 2 }).toEqual(v2);
    expect(server.requestCount()).toBe(4 + 2);
  });

  it("a commit pushed after the first listing shows up in the next", async () => {
    const repo = await server.createRepo();
    const before = listing(await listRemote(repo.url, { fetch: gitFetch }));
    const sha = await server.addCommit(repo.owner, repo.repo, "trunk", "deploy me");
    const after = listing(await listRemote(repo.url, { fetch: gitFetch }));
    expect(after.branches.find((b) => b.name === "trunk")?.commit).toBe(sha);
    expect(sha).not.toBe(before.branches.find((b) => b.name === "trunk")?.commit);
  });

  it("private repository: inaccessible without credentials, listed with the token in each provider's form, unauthorized with a wrong token", async () => {
    const repo = await server.createRepo({ private: true });
    const without = failure(await listRemote(repo.url, { fetch: gitFetch }));
    expect(without).toMatchObject({ kind: "not_found", inaccessible: true, status: 401 });
    expect(without.message).toMatch(/clone token/);
    for (const provider of ["github", "gitlab", "bitbucket", "gitea"] as const) {
      const ok = listing(await listRemote(repo.url, { fetch: gitFetch, credentials: tokenCredentials(provider, server.token) }));
      expect(ok.headBranch).toBe("trunk");
      expect(ok.branches.find((b) => b.name === "main")?.commit).toBe(repo.branches.main);
    }
    const wrong = failure(await listRemote(repo.url, { fetch: gitFetch, credentials: tokenCredentials("gitlab", CANARY) }));
    expect(wrong).toMatchObject({ kind: "unauthorized", status: 401 });
  });

  it("unknown repository: not_found", async () => {
    expect(failure(await listRemote(`${server.url}/acme/no-such-repo.git`, { fetch: gitFetch }))).toMatchObject({ kind: "not_found", status: 404 });
  });

  it("host stopped: unreachable; started again: listed", async () => {
    const own = await startGitServer();
    try {
      const repo = await own.createRepo();
      await own.stop();
      const down = failure(await listRemote(repo.url, { fetch: gitFetch }));
      expect(down.kind).toBe("unreachable");
      await own.start();
      expect(listing(await listRemote(repo.url, { fetch: gitFetch })).headBranch).toBe("trunk");
    } finally {
      await own.close();
    }
  });

  it("a host that never answers: unreachable after the timeout", async () => {
    const started = Date.now();
    const slow = failure(await listRemote(`${server.url}/slow/acme/x.git`, { fetch: gitFetch, timeoutMs: 300 }));
    expect(slow).toMatchObject({ kind: "unreachable", timedOut: true });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("a redirect is not followed; a web page is not a repository", async () => {
    server.resetRequestCount();
    expect(failure(await listRemote(`${server.url}/moved/acme/x.git`, { fetch: gitFetch }))).toMatchObject({ kind: "not_found", status: 301 });
    // At most the two discovery GETs; the Location is never requested.
    await new Promise((r) => setTimeout(r, 50));
    expect(server.requestCount()).toBeLessThanOrEqual(2);
    expect(failure(await listRemote(`${server.url}/html/acme/x.git`, { fetch: gitFetch }))).toMatchObject({ kind: "invalid_response" });
  });
});

describe("listRemote against a hand-made server streaming refs without end", () => {
  let endless: http.Server;
  let url: string;
  let bytesSent = 0;
  beforeAll(async () => {
    const pkt = (line: string) => `${(line.length + 4).toString(16).padStart(4, "0")}${line}`;
    endless = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "application/x-git-upload-pack-advertisement" });
      res.write(`${pkt("# service=git-upload-pack\n")}0000${pkt(`${"b".repeat(40)} HEAD\0symref=HEAD:refs/heads/b0\n`)}`);
      let n = 0;
      let open = true;
      res.on("close", () => {
        open = false;
      });
      const pump = () => {
        while (open) {
          let chunk = "";
          for (let i = 0; i < 256; i++) chunk += pkt(`${"b".repeat(40)} refs/heads/b${n++}\n`);
          bytesSent += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
      };
      pump();
    });
    await new Promise<void>((resolve) => endless.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(endless.address() as AddressInfo).port}/acme/endless.git`;
  });
  afterAll(() => new Promise<void>((resolve) => endless.close(() => resolve())));

  it("stops reading past the cap and reports it, instead of a partial list", async () => {
    const maxBytes = 512 * 1024;
    const big = failure(await listRemote(url, { fetch: gitFetch, maxBytes }));
    expect(big).toMatchObject({ kind: "invalid_response", tooLarge: true });
    expect(big.message).toMatch(/512 KiB/);
    // The connection is dropped soon after the cap: the server did not get to send much more.
    await new Promise((r) => setTimeout(r, 100));
    const sent = bytesSent;
    await new Promise((r) => setTimeout(r, 200));
    expect(bytesSent).toBe(sent);
  });

  it("the default cap is 4 MiB", async () => {
    const big = failure(await listRemote(url, { fetch: gitFetch }));
    expect(big).toMatchObject({ kind: "invalid_response", tooLarge: true });
    expect(big.message).toMatch(/4096 KiB/);
  });
});

describe("the outbound guard", () => {
  it("refuses the loopback host unless private networks are allowed", async () => {
    const repo = await server.createRepo();
    server.resetRequestCount();
    const refused = failure(await listRemote(repo.url, { fetch: createNodeGitFetch() }));
    expect(refused).toMatchObject({ kind: "unreachable", refused: true });
    expect(refused.message).toMatch(/OUTBOUND_ALLOW_PRIVATE/);
    expect(server.requestCount()).toBe(0);
  });

  it("checks the addresses a host name resolves to (a public-looking name on loopback is refused)", async () => {
    const port = new URL(server.url).port;
    const resolve = async () => [{ address: "127.0.0.1", family: 4 }];
    const refused = failure(await listRemote(`http://git.example.com:${port}/acme/x.git`, { fetch: createNodeGitFetch({ resolve }) }));
    expect(refused).toMatchObject({ kind: "unreachable", refused: true });
    const metadata = async () => [{ address: "169.254.169.254", family: 4 }];
    const always = failure(
      await listRemote(`http://git.example.com:${port}/acme/x.git`, { fetch: createNodeGitFetch({ allowPrivate: true, resolve: metadata }) }),
    );
    expect(always).toMatchObject({ kind: "unreachable", refused: true });
    expect(always.message).toMatch(/always refused/);
  });
});

describe("tokens never leak", () => {
  it("no failure result carries the token", async () => {
    const repo = await server.createRepo({ private: true });
    const credentials = tokenCredentials("github", CANARY);
    const results = await Promise.all([
      listRemote(repo.url, { fetch: gitFetch, credentials }),
      listRemote(`${server.url}/acme/no-such-repo.git`, { fetch: gitFetch, credentials }),
      listRemote(`${server.url}/down/acme/x.git`, { fetch: gitFetch, credentials }),
      listRemote(`${server.url}/slow/acme/x.git`, { fetch: gitFetch, credentials, timeoutMs: 200 }),
      listRemote(`${server.url}/html/acme/x.git`, { fetch: gitFetch, credentials }),
      listRemote(repo.url, { fetch: createNodeGitFetch(), credentials }),
    ]);
    for (const result of results) {
      expect(result.ok).toBe(false);
      expect(JSON.stringify(result)).not.toContain(CANARY);
      expect(JSON.stringify(result)).not.toContain(btoa(`x-access-token:${CANARY}`));
    }
  });

  it("a URL with credentials in it is refused before anything is sent", async () => {
    await expect(listRemote(`http://user:${CANARY}@127.0.0.1:1/a/b.git`, { fetch: gitFetch })).rejects.toThrow(/without credentials/);
  });
});

describe("git hosts and credentials", () => {
  it("defaults to the public hosts; gitea has none", () => {
    expect(gitHostsFromEnv({})).toEqual({ github: "https://github.com", gitlab: "https://gitlab.com", bitbucket: "https://bitbucket.org", gitea: null });
    expect(cloneUrl("github", "acme", "site", DEFAULT_GIT_HOSTS)).toBe("https://github.com/acme/site.git");
    expect(cloneUrl("gitea", "acme", "site", DEFAULT_GIT_HOSTS)).toBeNull();
  });

  it("one setting per provider overrides its base URL; trailing slashes dropped, paths kept", () => {
    const hosts = gitHostsFromEnv({
      GIT_GITHUB_URL: "https://ghe.corp.example/",
      GIT_GITLAB_URL: "https://code.example.org/gitlab//",
      GIT_GITEA_URL: "http://forgejo.lan:3000",
    });
    expect(hosts).toEqual({
      github: "https://ghe.corp.example",
      gitlab: "https://code.example.org/gitlab",
      bitbucket: "https://bitbucket.org",
      gitea: "http://forgejo.lan:3000",
    });
    expect(cloneUrl("gitlab", "group/sub", "app.git", hosts)).toBe("https://code.example.org/gitlab/group/sub/app.git");
    expect(cloneUrl("gitea", "me", "app", hosts)).toBe("http://forgejo.lan:3000/me/app.git");
  });

  it("refuses a malformed setting with its name: not http(s), credentials, query", () => {
    expect(() => gitHostsFromEnv({ GIT_GITEA_URL: "ftp://x.example" })).toThrow(/GIT_GITEA_URL/);
    expect(() => gitHostsFromEnv({ GIT_GITHUB_URL: "https://user:secret@ghe.example" })).toThrow(/GIT_GITHUB_URL must not carry credentials/);
    expect(() => gitHostsFromEnv({ GIT_BITBUCKET_URL: "https://bb.example/?a=1" })).toThrow(/GIT_BITBUCKET_URL/);
    expect(() => gitHostsFromEnv({ GIT_GITLAB_URL: "not a url" })).toThrow(/GIT_GITLAB_URL/);
    expect(parseGitBaseUrl("https://bb.example#x")).toMatchObject({ ok: false });
  });

  it("owner and repository names: one segment (GitLab groups nest), no dot-dot, no URL tricks", () => {
    expect(normalizeRepo("site.git")).toBe("site");
    expect(normalizeRepo("my.site")).toBe("my.site");
    for (const bad of ["", "..", "a/b", "a?b", "a#b", "a b", "-x", ".hidden", "x.", "a..b", "x".repeat(101), "a%2fb", "a@b"])
      expect(normalizeRepo(bad)).toBeNull();
    expect(normalizeOwner("group/sub", "gitlab")).toBe("group/sub");
    expect(normalizeOwner("group/sub", "github")).toBeNull();
    expect(normalizeOwner("group//sub", "gitlab")).toBeNull();
    expect(normalizeOwner("../etc", "gitlab")).toBeNull();
    expect(cloneUrl("github", "acme", "../x")).toBeNull();
  });

  it("sends each provider's documented basic-auth form", () => {
    const decode = (header: string) => Buffer.from(header.replace(/^Basic /, ""), "base64").toString("utf8");
    expect(decode(basicAuthorization(tokenCredentials("github", "t0k")))).toBe("x-access-token:t0k");
    expect(decode(basicAuthorization(tokenCredentials("gitlab", "t0k")))).toBe("oauth2:t0k");
    expect(decode(basicAuthorization(tokenCredentials("bitbucket", "t0k")))).toBe("x-token-auth:t0k");
    expect(decode(basicAuthorization(tokenCredentials("gitea", "t0k")))).toBe("t0k:x-oauth-basic");
    expect(decode(basicAuthorization({ username: "ü", password: "p" }))).toBe("ü:p");
  });
});

it("agrees with `git ls-remote` on the same repository", async () => {
  const repo = await server.createRepo();
  await server.addCommit(repo.owner, repo.repo, "hotfix/1");
  const { stdout } = await run("git", ["ls-remote", "--symref", repo.url], { env: { ...process.env, GIT_TERMINAL_PROMPT: "0" } });
  const fromGit = stdout
    .trim()
    .split("\n")
    .map((line) => line.split("\t"))
    .filter(([, ref]) => ref?.startsWith("refs/heads/"))
    .map(([commit, ref]) => ({ name: ref!.slice("refs/heads/".length), commit: commit! }))
    .sort((a, b) => (a.name < b.name ? -1 : 1));
  const result = listing(await listRemote(repo.url, { fetch: gitFetch }));
  expect(result.branches).toEqual(fromGit);
  expect(stdout).toContain("ref: refs/heads/trunk\tHEAD");
  expect(result.headBranch).toBe("trunk");
});
