/**
 * What a remote repository has: its default branch (the `HEAD` symref) and its
 * branches with their head commits, over git smart HTTP on any git server.
 *
 * ls-refs.ts does the protocol (`listServerRefs`: `info/refs`, then
 * protocol v2 `ls-refs` with `symrefs` and a `ref-prefix` where the server
 * offers v2, the v0 advertisement otherwise); it runs in workerd too
 * (test/worker/git-client.test.ts). Its HTTP goes through our own client over
 * the injected, guarded GitFetch, which adds: one timeout for the whole
 * exchange, a cap on the bytes read (counted as they stream, the read stops
 * past the cap), no redirects, and errors in our own words. `listServerRefs`
 * takes one prefix, so the branches (`refs/heads/`) and `HEAD` are two calls
 * made in parallel: on a v2 server four requests in two round trips, on a v0
 * server two identical GETs in one. Listing every ref in one call instead
 * would pull tags and GitHub's `refs/pull/*` (megabytes on busy repositories).
 *
 * The pkt-line reader ends the list at a failed read rather than throwing:
 * the client records every read failure itself, so a truncated or oversized
 * answer is never taken for a short list.
 */
import { type GitHttpClient, type GitHttpRequest, GitProtocolError, listServerRefs } from "./ls-refs";
import { basicAuthorization, type GitCredentials } from "./credentials";
import { type GitFetch, GitFetchRefused } from "./fetch";

export const LS_REMOTE_TIMEOUT_MS = 10_000;
/** Bytes read from the host per listing, all requests together. */
export const LS_REMOTE_MAX_BYTES = 4 * 1024 * 1024;
const USER_AGENT = "git/2.39 (workspace-service)";

export interface RemoteBranch {
  name: string;
  commit: string;
}

export interface RemoteListing {
  ok: true;
  /** The branch `HEAD` points at; null when the host does not say (empty repository, detached `HEAD`). */
  headBranch: string | null;
  /** Sorted by name. */
  branches: RemoteBranch[];
  /** The protocol the server spoke: 2 (`ls-refs`) or 0 (the v0/v1 advertisement). */
  protocol: 0 | 2;
}

export type GitRemoteErrorKind = "not_found" | "unauthorized" | "unreachable" | "invalid_response";

export interface GitRemoteError {
  ok: false;
  /**
   * - `not_found`: the host says there is no such repository (404/410), or it
   *   wants credentials that were not sent (401/403: `inaccessible`, add a
   *   clone token), or it redirects elsewhere (a moved repository).
   * - `unauthorized`: credentials were sent and refused (401/403).
   * - `unreachable`: network error, refused by the outbound guard, timeout, 5xx/429.
   * - `invalid_response`: not git smart HTTP, malformed, or over the size cap.
   */
  kind: GitRemoteErrorKind;
  /** Our own words, safe to show and log: never the host's body, never a credential. */
  message: string;
  /** The HTTP status that decided it, when one did. */
  status?: number;
  /** 401/403 without credentials: the repository may be private. */
  inaccessible?: true;
  /** The outbound guard refused the address (the message names OUTBOUND_ALLOW_PRIVATE when it applies). */
  refused?: true;
  timedOut?: true;
  tooLarge?: true;
}

export type ListRemoteResult = RemoteListing | GitRemoteError;

export interface ListRemoteOptions {
  fetch: GitFetch;
  credentials?: GitCredentials | null;
  timeoutMs?: number;
  maxBytes?: number;
}

class TooLarge extends Error {}
class Aborted extends Error {}

/** What the HTTP plugin saw, for the error the whole listing reports. */
interface Exchange {
  bytes: number;
  /** A failure while reading a body (the pkt-line reader ends the list on it). */
  readFailure: unknown;
  /** The first non-200 status. */
  status: number | null;
  usedV2: boolean;
}

/** A response body as the async iterator ls-refs.ts reads, counting bytes against the shared cap and stopping at the deadline. */
function countedBody(body: ReadableStream<Uint8Array> | null, exchange: Exchange, maxBytes: number, signal: AbortSignal): AsyncIterableIterator<Uint8Array> {
  const reader = body?.getReader() ?? null;
  const onAbort = () => void reader?.cancel().catch(() => {});
  signal.addEventListener("abort", onAbort, { once: true });
  const finish = () => signal.removeEventListener("abort", onAbort);
  const iterator: AsyncIterableIterator<Uint8Array> = {
    [Symbol.asyncIterator]() {
      return iterator;
    },
    async next() {
      if (!reader) return { done: true, value: undefined };
      try {
        const { done, value } = await reader.read();
        if (signal.aborted) throw new Aborted();
        if (done) {
          finish();
          return { done: true, value: undefined };
        }
        exchange.bytes += value.byteLength;
        if (exchange.bytes > maxBytes) throw new TooLarge();
        return { done: false, value };
      } catch (e) {
        exchange.readFailure ??= signal.aborted ? new Aborted() : e;
        finish();
        await reader.cancel().catch(() => {});
        throw e;
      }
    },
    async return() {
      finish();
      await reader?.cancel().catch(() => {});
      return { done: true, value: undefined };
    },
  };
  return iterator;
}

/** ls-refs.ts's HTTP client over the guarded fetch. */
function httpClient(doFetch: GitFetch, exchange: Exchange, maxBytes: number, signal: AbortSignal): GitHttpClient {
  return {
    async request(req: GitHttpRequest) {
      let body: Uint8Array<ArrayBuffer> | undefined;
      if (req.body) {
        const parts = req.body;
        body = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
        let at = 0;
        for (const p of parts) {
          body.set(p, at);
          at += p.byteLength;
        }
      }
      const method = req.method === "POST" ? "POST" : "GET";
      if (method === "POST") exchange.usedV2 = true;
      const res = await doFetch(req.url, { method, headers: { ...req.headers, "user-agent": USER_AGENT }, body, signal });
      if (res.status !== 200) {
        exchange.status ??= res.status;
        // The body of an error answer is not read: nothing of the host's words is kept.
        await res.body?.cancel().catch(() => {});
      }
      const headers: Record<string, string> = {};
      res.headers.forEach((value, name) => {
        headers[name] = value;
      });
      return {
        headers,
        body: countedBody(res.status === 200 ? res.body : null, exchange, maxBytes, signal),
        // An opaque redirect (status 0, from a Worker's manual redirect) is a redirect too.
        statusCode: res.status === 0 ? 302 : res.status,
        statusMessage: res.statusText,
      };
    },
  };
}

const OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const BRANCH_PREFIX = "refs/heads/";

function fail(kind: GitRemoteErrorKind, message: string, extra: Partial<GitRemoteError> = {}): GitRemoteError {
  return { ok: false, kind, message, ...extra };
}

function limitText(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`;
}

function statusError(status: number, withCredentials: boolean): GitRemoteError {
  if (status === 404 || status === 410) return fail("not_found", "The git host has no such repository", { status });
  if (status === 401 || status === 403) {
    return withCredentials
      ? fail("unauthorized", `The git host refused the clone token (HTTP ${status}): check that it is valid and can read this repository`, { status })
      : fail("not_found", `The repository is inaccessible (HTTP ${status}): if it is private, add a clone token`, { status, inaccessible: true });
  }
  if (status >= 300 && status < 400) {
    return fail("not_found", `The git host redirects this repository elsewhere (HTTP ${status}); redirects are not followed: use its current owner and name`, {
      status,
    });
  }
  if (status >= 500 || status === 429 || status === 408) return fail("unreachable", `The git host answered HTTP ${status}`, { status });
  return fail("invalid_response", `The git host answered HTTP ${status}`, { status });
}

/**
 * Lists the branches and the default branch of the repository at `repoUrl`
 * (`https://host/owner/repo.git`, without credentials). Never throws for
 * anything the host does: every failure is a typed result.
 */
export async function listRemote(repoUrl: string, options: ListRemoteOptions): Promise<ListRemoteResult> {
  const parsed = URL.canParse(repoUrl) ? new URL(repoUrl) : null;
  // A programming error, not a host's answer: credentials travel in a header only.
  if (!parsed || parsed.username || parsed.password) throw new TypeError("listRemote: the repository URL must be an http(s) URL without credentials");
  const timeoutMs = options.timeoutMs ?? LS_REMOTE_TIMEOUT_MS;
  const maxBytes = options.maxBytes ?? LS_REMOTE_MAX_BYTES;
  const withCredentials = !!options.credentials;
  const deadline = AbortSignal.timeout(timeoutMs);
  // The first failure ends the other call's requests too.
  const done = new AbortController();
  const signal = AbortSignal.any([deadline, done.signal]);
  const exchange: Exchange = { bytes: 0, readFailure: null, status: null, usedV2: false };
  const http = httpClient(options.fetch, exchange, maxBytes, signal);
  const headers: Record<string, string> = options.credentials ? { authorization: basicAuthorization(options.credentials) } : {};
  const url = repoUrl.replace(/\/+$/, "");

  let heads: Awaited<ReturnType<typeof listServerRefs>>;
  let head: Awaited<ReturnType<typeof listServerRefs>>;
  try {
    [heads, head] = await Promise.all([
      listServerRefs({ http, url, headers: { ...headers }, prefix: BRANCH_PREFIX, symrefs: true }),
      listServerRefs({ http, url, headers: { ...headers }, prefix: "HEAD", symrefs: true }),
    ]);
  } catch (e) {
    const error = errorOf(e, exchange, { timeoutMs, maxBytes, withCredentials, deadline });
    done.abort();
    return error;
  }
  // A read that failed mid-body ends the list early without an error.
  if (exchange.readFailure || exchange.status !== null) return errorOf(exchange.readFailure, exchange, { timeoutMs, maxBytes, withCredentials, deadline });

  const branches: RemoteBranch[] = [];
  const seen = new Set<string>();
  for (const ref of heads) {
    if (!ref.ref.startsWith(BRANCH_PREFIX)) continue;
    const name = ref.ref.slice(BRANCH_PREFIX.length);
    if (!name || seen.has(name) || !OID.test(ref.oid)) return fail("invalid_response", "The git host listed a malformed branch");
    seen.add(name);
    branches.push({ name, commit: ref.oid });
  }
  branches.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const target = head.find((ref) => ref.ref === "HEAD")?.target;
  const headBranch = target?.startsWith(BRANCH_PREFIX) ? target.slice(BRANCH_PREFIX.length) : null;
  return { ok: true, headBranch: headBranch && seen.has(headBranch) ? headBranch : null, branches, protocol: exchange.usedV2 ? 2 : 0 };
}

function errorOf(
  error: unknown,
  exchange: Exchange,
  context: { timeoutMs: number; maxBytes: number; withCredentials: boolean; deadline: AbortSignal },
): GitRemoteError {
  if (error instanceof GitFetchRefused) return fail("unreachable", error.message, { refused: true });
  if (exchange.readFailure instanceof TooLarge || error instanceof TooLarge) {
    return fail("invalid_response", `The git host's answer is larger than ${Math.round(context.maxBytes / 1024)} KiB`, { tooLarge: true });
  }
  if (context.deadline.aborted) return fail("unreachable", `The git host did not answer within ${limitText(context.timeoutMs)}`, { timedOut: true });
  if (exchange.status !== null) return statusError(exchange.status, context.withCredentials);
  // ls-refs.ts's errors: the answer was HTTP 200 but not git smart HTTP.
  if (error instanceof GitProtocolError) {
    return fail("invalid_response", "The git host's answer is not git smart HTTP (is this a git repository URL?)");
  }
  if (exchange.readFailure) return fail("unreachable", "The connection to the git host failed while reading its answer");
  return fail("unreachable", "Could not connect to the git host");
}
