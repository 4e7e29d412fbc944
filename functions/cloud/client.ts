/**
 * Calls to the linked cloud's API: the link's base URL, its personal access
 * token and cloud organization on every request. Answers are read under a size
 * cap; failures become one of two errors the callers tell apart: the cloud could
 * not be reached (or answered nonsense), or it answered with a problem.
 */
import { readBodyText } from "../../shared/http/json-body";
import { cloudTransport } from "./transport";

/** What a request to the cloud needs (the decrypted link). */
export interface CloudLinkCredentials {
  apiUrl: string;
  token: string;
  cloudOrgId: string;
}

/** The cloud could not be reached, timed out, or answered something that is not its API. */
export class CloudUnreachable extends Error {}

/** The cloud answered with an error status; `problem` is its problem+json body when it sent one. */
export class CloudRefused extends Error {
  constructor(
    readonly status: number,
    readonly problem: { detail?: string; field?: string } | undefined,
  ) {
    super(problem?.detail ?? `the cloud answered ${status}`);
  }
}

/** Largest JSON answer read from the cloud (a page of 100 projects is well under 1 MiB). */
export const MAX_CLOUD_ANSWER_BYTES = 16 * 1024 * 1024;
/** How long the cloud may take to answer a call (headers and body); streams forwarded by the proxy have no such limit. */
export const CLOUD_TIMEOUT_MS = 30_000;

export interface CloudCall {
  method?: string;
  json?: unknown;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

export function cloudUrl(link: Pick<CloudLinkCredentials, "apiUrl">, path: string): string {
  return new URL(path, link.apiUrl.endsWith("/") ? link.apiUrl : `${link.apiUrl}/`).toString();
}

/** A raw call: the Response as it came (the proxy streams it); network failures are CloudUnreachable. */
export async function cloudFetch(link: CloudLinkCredentials, path: string, init: RequestInit & { timeoutMs?: number }): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("authorization", `Bearer ${link.token}`);
  headers.set("x-organization-id", link.cloudOrgId);
  const signals = [init.signal, init.timeoutMs === undefined ? undefined : AbortSignal.timeout(init.timeoutMs)].filter((s): s is AbortSignal => Boolean(s));
  try {
    return await cloudTransport()(cloudUrl(link, path), {
      ...init,
      headers,
      redirect: "manual",
      signal: signals.length ? AbortSignal.any(signals) : undefined,
    });
  } catch (e) {
    throw new CloudUnreachable(reasonOf(e));
  }
}

function reasonOf(e: unknown): string {
  // The outbound guard's own words (a private or metadata address refused, naming the setting).
  if (e instanceof Error && e.name === "GitFetchRefused") return `the cloud's address is refused: ${e.message}`;
  if (e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError")) return "the cloud did not answer in time";
  const cause = e instanceof Error && e.cause instanceof Error ? e.cause : undefined;
  const code = cause && "code" in cause ? String((cause as { code: unknown }).code) : undefined;
  return code ? `the cloud could not be reached (${code})` : "the cloud could not be reached";
}

/** A JSON call: the parsed answer of a 2xx, CloudRefused for an error status, CloudUnreachable otherwise. */
export async function cloudJson<T = unknown>(link: CloudLinkCredentials, path: string, call: CloudCall = {}): Promise<T> {
  const timeoutMs = call.timeoutMs ?? CLOUD_TIMEOUT_MS;
  const res = await cloudFetch(link, path, {
    method: call.method ?? (call.json === undefined ? "GET" : "POST"),
    headers: { accept: "application/json", ...(call.json === undefined ? {} : { "content-type": "application/json" }), ...call.headers },
    body: call.json === undefined ? undefined : JSON.stringify(call.json),
    timeoutMs,
  });
  let text: string;
  try {
    text = await readBodyText(res, MAX_CLOUD_ANSWER_BYTES);
  } catch (e) {
    throw new CloudUnreachable(e instanceof Error && /larger/.test(e.message) ? "the cloud's answer was too large" : reasonOf(e));
  }
  let body: unknown;
  try {
    body = text === "" ? undefined : JSON.parse(text);
  } catch {
    throw new CloudUnreachable(`the cloud answered ${res.status} with something that is not JSON`);
  }
  if (res.status >= 200 && res.status < 300) return body as T;
  const problem = body && typeof body === "object" ? (body as { detail?: string; field?: string }) : undefined;
  throw new CloudRefused(res.status, problem);
}
