/**
 * The two sides of a transfer, spoken to the same way: through their public API.
 * The cloud with the link's token; this instance in-process with the caller's own
 * token (so every write is checked as if the caller made it). A failed call is a
 * SideRefused (an error status, with the side's problem) or a SideUnreachable.
 */
import type { Context } from "hono";
import type { AppEnv } from "../../shared/http/context";
import { readBodyBytes, readBodyText } from "../../shared/http/json-body";
import { MAX_UPLOAD_BYTES } from "../../shared/storage/limits";
import { cloudTransport } from "./transport";
import { type CloudLinkCredentials, CloudRefused, CloudUnreachable, cloudJson, MAX_CLOUD_ANSWER_BYTES } from "./client";

export type SideName = "cloud" | "self-hosted";

export class SideRefused extends Error {
  constructor(
    readonly side: SideName,
    readonly status: number,
    readonly problem: { detail?: string; field?: string } | undefined,
  ) {
    super(problem?.detail ?? `${side} answered ${status}`);
  }
}

export class SideUnreachable extends Error {}

export interface Side {
  readonly name: SideName;
  /** A JSON call to `api/…`; the parsed answer of a 2xx. */
  call<T = unknown>(method: string, path: string, json?: unknown): Promise<T>;
  /** Uploads a tarball through the side's folder-upload flow (session, upload, scan); the session id for ensure. */
  upload(tarball: Uint8Array<ArrayBuffer>, name: string): Promise<string>;
}

interface UploadTarget {
  sessionId: string;
  url: string;
  absoluteUrl: string;
  method: "PUT" | "POST";
  headers: Record<string, string>;
  requiresAuth: boolean;
}

/** The upload flow on top of `call`, and a way to send the bytes to the target. */
async function uploadThrough(
  side: Omit<Side, "upload">,
  send: (target: UploadTarget, bytes: Uint8Array<ArrayBuffer>) => Promise<Response>,
  tarball: Uint8Array<ArrayBuffer>,
  name: string,
) {
  const target = await side.call<UploadTarget>("POST", "api/projects/folder/session", { name, sizeBytes: tarball.byteLength });
  let res: Response;
  try {
    res = await send(target, tarball);
  } catch (e) {
    throw new SideUnreachable(`the upload to ${side.name} failed: ${e instanceof Error ? e.message : String(e)}`);
  }
  await res.body?.cancel();
  if (!res.ok) throw new SideRefused(side.name, res.status, { detail: `the upload to ${side.name}'s storage answered ${res.status}` });
  await side.call("POST", `api/projects/folder/scan/${encodeURIComponent(target.sessionId)}`);
  return target.sessionId;
}

export function cloudSide(link: CloudLinkCredentials): Side {
  const side = {
    name: "cloud" as const,
    async call<T>(method: string, path: string, json?: unknown): Promise<T> {
      try {
        return await cloudJson<T>(link, path, { method, json });
      } catch (e) {
        if (e instanceof CloudRefused) throw new SideRefused("cloud", e.status, e.problem);
        if (e instanceof CloudUnreachable) throw new SideUnreachable(e.message);
        throw e;
      }
    },
  };
  return {
    ...side,
    // A presigned target carries its own credential: the link's token is never sent to storage.
    upload: (tarball, name) =>
      uploadThrough(
        side,
        (t, bytes) =>
          cloudTransport()(t.absoluteUrl, { method: t.method, headers: t.headers, body: bytes, redirect: "manual", signal: AbortSignal.timeout(300_000) }),
        tarball,
        name,
      ),
  };
}

/** This instance, called in-process with the transfer caller's Authorization and organization. */
export function selfSide(c: Context<AppEnv>): Side {
  // The caller's own credential: a bearer token, or the console's session cookie with the Origin that passed the same-origin check.
  const credentials: Record<string, string> = {};
  for (const name of ["authorization", "cookie", "origin"]) {
    const value = c.req.header(name);
    if (value !== undefined) credentials[name] = value;
  }
  const org = c.get("caller")?.orgId;
  const origin = new URL(c.req.url).origin;
  const request = (path: string, init: RequestInit) => {
    const headers = new Headers(init.headers);
    for (const [name, value] of Object.entries(credentials)) headers.set(name, value);
    if (org) headers.set("x-organization-id", org);
    return c.get("services").dispatch(c, new Request(`${origin}/${path.replace(/^\//, "")}`, { ...init, headers }));
  };
  const side = {
    name: "self-hosted" as const,
    async call<T>(method: string, path: string, json?: unknown): Promise<T> {
      const res = await request(path, {
        method,
        headers: json === undefined ? {} : { "content-type": "application/json" },
        body: json === undefined ? undefined : JSON.stringify(json),
      });
      const text = await readBodyText(res, MAX_CLOUD_ANSWER_BYTES);
      let body: unknown;
      try {
        body = text === "" ? undefined : JSON.parse(text);
      } catch {
        // Not JSON (a body limit's plain answer): the status says enough.
        body = undefined;
      }
      if (!res.ok) throw new SideRefused("self-hosted", res.status, body as { detail?: string; field?: string } | undefined);
      return body as T;
    },
  };
  return {
    ...side,
    upload: (tarball, name) =>
      uploadThrough(
        side,
        (t, bytes) =>
          t.requiresAuth
            ? request(t.url, { method: t.method, headers: t.headers, body: bytes })
            : cloudTransport()(t.absoluteUrl, { method: t.method, headers: t.headers, body: bytes, redirect: "manual" }),
        tarball,
        name,
      ),
  };
}

/** A tarball from a presigned GET (the cloud's export), read under the upload limit. */
export async function downloadTarball(url: string): Promise<Uint8Array<ArrayBuffer>> {
  let res: Response;
  try {
    res = await cloudTransport()(url, { redirect: "manual", signal: AbortSignal.timeout(300_000) });
  } catch (e) {
    throw new SideUnreachable(`the cloud's tarball could not be downloaded: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new SideRefused("cloud", res.status, { detail: `the cloud's tarball download answered ${res.status}` });
  }
  return readBodyBytes(res, MAX_UPLOAD_BYTES);
}
