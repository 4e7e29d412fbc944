/**
 * The folder-upload flow as a client following the spec drives it, for the
 * suites: open a session, upload to its target (the bearer token only when
 * `requiresAuth` is true; an external target gets plain fetch and no token),
 * scan, ensure.
 */
import { and, eq } from "drizzle-orm";
import { expect } from "vitest";
import { projects, uploadSessions } from "../../shared/db/schema";
import type { UploadStorage } from "../../shared/storage/types";
import { ScanResultSchema, UploadTargetSchema } from "../../functions/projects/folder/schema";
import { expectBody, type Harness, type Member } from "./harness";

/** What the folder suites need beyond the Harness: the store behind the sessions and the runtime's sweep. */
export type FolderHarness = Harness & { uploadStore: UploadStorage; sweepUploads(now?: Date): Promise<void> };

export interface Target {
  sessionId: string;
  url: string;
  absoluteUrl: string;
  method: "PUT" | "POST";
  headers: Record<string, string>;
  requiresAuth: boolean;
  expiresAt: string;
  maxBytes: number;
}

export function folderClient(h: Harness) {
  const fh = () => h as FolderHarness;

  const presigned = () => fh().uploadStore.kind === "presigned";

  /**
   * Opens a session, expecting 201. Presigned targets require `sizeBytes`: a caller
   * that opens one before it has the tarball (the hostile suite) gets a stand-in
   * size there, and upload() signs the real one for the session's key.
   */
  const openSession = async (t: Member, hint?: Record<string, unknown>): Promise<Target> => {
    const body = hint ?? (presigned() ? { sizeBytes: 1 } : undefined);
    return expectBody(
      await h.request("/api/projects/folder/session", { token: t.token, ...(body ? { json: body } : { method: "POST" }) }),
      201,
      UploadTargetSchema,
    );
  };

  /** A presigned target signed for this many bytes: the same session's key, as a session opened with that size would get. */
  const signedFor = async (t: Member, target: Target, size: number): Promise<Target> => {
    if (target.requiresAuth || target.headers["Content-Length"] === String(size)) return target;
    const store = fh().uploadStore;
    if (store.kind !== "presigned") throw new Error("expected presigned storage");
    const signed = await store.presign({ key: `${t.orgId}/${target.sessionId}.tar.gz`, sizeBytes: size, now: new Date(), expiresInSeconds: 15 * 60 });
    return { ...target, ...signed };
  };

  /** Rule 8: `absoluteUrl` with `method` and `headers`; the service token only when `requiresAuth`. */
  const sendUpload = (t: Member, target: Target, bytes: Uint8Array, extraHeaders: Record<string, string> = {}): Promise<Response> => {
    const headers = { ...target.headers, ...extraHeaders };
    // The relay is this API: resolve `url` against the API base (the harness is that base).
    if (target.requiresAuth) return h.request(target.url, { method: target.method, token: t.token, headers, body: bytes as Uint8Array<ArrayBuffer> });
    return fetch(target.absoluteUrl, { method: target.method, headers, body: bytes as Uint8Array<ArrayBuffer> });
  };

  const upload = async (t: Member, target: Target, bytes: Uint8Array) => {
    const res = await sendUpload(t, await signedFor(t, target, bytes.length), bytes);
    const text = await res.text();
    if (res.status !== 200) throw new Error(`upload: expected 200, got ${res.status}: ${text.slice(0, 500)}`);
  };

  const scan = (t: Member, sessionId: string) => h.request(`/api/projects/folder/scan/${sessionId}`, { method: "POST", token: t.token });

  const ensure = (t: Member, body: Record<string, unknown>) => h.request("/api/projects/ensure", { token: t.token, json: body });

  /** session → upload → scan, all expected to succeed. */
  const uploadAndScan = async (t: Member, bytes: Uint8Array) => {
    const target = await openSession(t, { name: "fixture", sizeBytes: bytes.length });
    await upload(t, target, bytes);
    const result = await expectBody(await scan(t, target.sessionId), 200, ScanResultSchema);
    return { target, result };
  };

  const sessionRow = async (id: string) => (await h.db.select().from(uploadSessions).where(eq(uploadSessions.id, id)))[0];
  const projectCount = async (orgId: string) =>
    (
      await h.db
        .select({ id: projects.id })
        .from(projects)
        .where(and(eq(projects.orgId, orgId)))
    ).length;

  return {
    presigned,
    openSession,
    sendUpload,
    upload,
    scan,
    ensure,
    uploadAndScan,
    sessionRow,
    projectCount,
    store: () => fh().uploadStore,
    sweep: (now?: Date) => fh().sweepUploads(now),
  };
}

export const MASK = "••••••••";

export const NEXT_APP = {
  "package.json": JSON.stringify({ name: "web", scripts: { build: "next build", start: "next start" }, dependencies: { next: "15.0.0", react: "19.0.0" } }),
  "pnpm-lock.yaml": "lockfileVersion: '9.0'\n",
  "app/page.tsx": "export default function Page() { return null }\n",
};

/** Problem bodies compared byte for byte, without the per-request id. */
export async function problemWithoutId(res: Response, status: number) {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  const { requestId, ...rest } = JSON.parse(text);
  expect(requestId).toMatch(/^req_/);
  return rest;
}
