/**
 * A git deployment's source, fetched by the machine's `git` inside the sandbox
 * (each command a build step: its own jail, the build's limits and timeout):
 * init, fetch of the pinned commit at depth 1 (a host that refuses a fetch by
 * SHA: the branch, deeper, which must hold the commit), checkout, and `.git`
 * removed.
 *
 * - The outbound guard: the host is resolved here and every address checked
 *   (no loopback or private addresses unless OUTBOUND_ALLOW_PRIVATE; link-local
 *   and metadata never), then git is pinned to the checked address
 *   (`http.curloptResolve`), so a second DNS answer cannot move the fetch, and
 *   redirects are off (`http.followRedirects=false`): a host cannot send the
 *   fetch, or the credential, elsewhere. Behind a proxy (HTTPS_PROXY passed
 *   through) the proxy resolves the host, and the guard checks only the name's
 *   own answer.
 * - The clone credential (the clone token, or the user's own credential
 *   forwarded by `wsp deploy`: functions/servers/job-credentials.ts) reaches the fetch alone, through a credential helper
 *   that reads it from a pipe on fd 3 (written once by the runner, then closed):
 *   never in an environment (/proc/<pid>/environ), argv, a file or a log line;
 *   `git init` and `checkout` run without it. No system or global git config,
 *   no prompts, http(s) only.
 */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { tokenCredentials } from "../../../shared/git/credentials";
import { cloneUrl, GIT_HOST_SETTINGS, isGitProvider } from "../../../shared/git/hosts";
import { refusalFor, refusalMessage } from "../../../shared/outbound/address-guard";
import type { BuildDeps } from "./pipeline";
import { JobFailure, quote, type Step } from "./step";
import type { JobContext } from "./control";

/** A credential helper answering `get` with what the runner wrote to fd 3 (a pipe read once): the token is in no environment or argv. */
const CREDENTIAL_HELPER = '!f() { test "$1" = get && cat <&3; }; f';

export async function fetchGit(job: JobContext, deps: BuildDeps, src: string, base: Record<string, string>, step: Step, system: (m: string) => void) {
  const { d } = job;
  const provider = d.gitProvider;
  if (!isGitProvider(provider) || !d.gitOwner || !d.gitRepo || !d.commitSha) throw new JobFailure("build", "The deployment has no pinned git source");
  if (!deps.gitHosts[provider]) throw new JobFailure("build", `${provider} has no host configured on this instance (${GIT_HOST_SETTINGS[provider]})`);
  const url = cloneUrl(provider, d.gitOwner, d.gitRepo, deps.gitHosts);
  if (!url) throw new JobFailure("build", `${d.gitOwner}/${d.gitRepo} is not a valid repository name`);
  const sha = d.commitSha.toLowerCase();
  if (!/^[0-9a-f]{40}$/.test(sha)) throw new JobFailure("build", "The deployment's commit is not a full SHA");
  const pin = await guardedResolve(url, deps.allowPrivate);
  // Read once: a forwarded credential is deleted by this read and lives in memory for this clone only.
  const given = await deps.cloneToken(job);
  const credential = !given ? undefined : "token" in given ? tokenCredentials(provider, given.token) : given;
  const gitEnv: Record<string, string> = {
    ...base,
    ...deps.buildEnv,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    GIT_ALLOW_PROTOCOL: "http:https",
    GIT_ASKPASS: "/bin/false",
  };
  // Redirects off (a host must not send the fetch elsewhere), the address the guard checked, the helper (only for the fetch).
  const fetchConfig = [
    `-c http.followRedirects=false`,
    `-c ${quote(`http.curloptResolve=${pin}`)}`,
    "-c credential.helper=",
    `-c ${quote(`credential.helper=${CREDENTIAL_HELPER}`)}`,
  ].join(" ");
  const secret = credential ? `username=${credential.username}\npassword=${credential.password}\n` : undefined;
  system(`Cloning ${url}@${sha}${d.branch ? ` (${d.branch})` : ""}`);
  // One sandboxed step for the whole clone (each step is a sandbox to set up); the .git directory does not outlive it.
  const checkout = `git checkout --quiet --detach ${sha} && rm -rf .git`;
  try {
    await step(
      "clone",
      `git init --quiet . && git config advice.detachedHead false && git ${fetchConfig} fetch --quiet --depth 1 --no-tags ${quote(url)} ${sha} && ${checkout}`,
      src,
      gitEnv,
      {
        shown: `git fetch --depth 1 ${url} ${sha} && git checkout ${sha.slice(0, 12)}`,
        secret,
      },
    );
  } catch (e) {
    if (!(e instanceof JobFailure) || e.message.startsWith("build timed out") || !d.branch) throw e;
    // Some hosts refuse a fetch by SHA: the branch then, deep enough to hold the commit.
    system("The fetch by commit failed: fetching the branch instead");
    const ref = `refs/heads/${d.branch}`;
    await step(
      "clone",
      `git ${fetchConfig} fetch --quiet --depth 50 --no-tags ${quote(url)} ${quote(ref)} && git cat-file -e ${sha}^{commit} && ${checkout}`,
      src,
      gitEnv,
      {
        shown: `git fetch --depth 50 ${url} ${ref} && git checkout ${sha.slice(0, 12)}`,
        secret,
      },
    );
  }
}

/**
 * The git host's address as the outbound guard allows it, as curl's
 * `host:port:address` (git is pinned to it, so a second DNS answer cannot move
 * the fetch to a private address after the check).
 */
export async function guardedResolve(url: string, allowPrivate: boolean): Promise<string> {
  const u = new URL(url);
  const host = u.hostname.replace(/^\[|\]$/g, "");
  const port = u.port || (u.protocol === "https:" ? "443" : "80");
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  } catch (error) {
    throw new JobFailure("build", `The git host ${host} could not be resolved: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  for (const address of addresses) {
    const refusal = refusalFor(address, allowPrivate);
    if (refusal) throw new JobFailure("build", `The git host ${host} is refused. ${refusalMessage(refusal)}`);
  }
  const address = addresses[0]!;
  return `${host}:${port}:${isIP(address) === 6 ? `[${address}]` : address}`;
}
