/**
 * The self-hosted adapter's folder uploads over real HTTP: the relay's 300 MiB
 * limit with and without Content-Length (and nothing partial left on disk), an
 * interrupted upload, presigned uploads when S3_* is configured (the relay route
 * then does not exist), the upload sweeper, and the configuration checks.
 */
import { readdirSync, readFileSync, utimesSync, writeFileSync, mkdirSync } from "node:fs";
import http from "node:http";
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import { eq } from "drizzle-orm";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { startSelfHosted, type RunningServer } from "../../functions/self-hosted/start";
import { sweepUploadsOnce } from "../../functions/self-hosted/uploads/sweeper";
import { uploadSessions } from "../../shared/db/schema";
import { openPglite } from "../../shared/db/pglite";
import { silentLogger } from "../../shared/http/logger";
import { createDiskStorage } from "../../shared/storage/disk";
import { MAX_UPLOAD_BYTES } from "../../shared/storage/limits";
import { tgz } from "../support/tar-fixtures";
import { useCleanups } from "../support/cleanups";

const { cleanups, tempDir } = useCleanups("ws-relay-");

async function start(env: Record<string, string> = {}): Promise<{ server: RunningServer; dir: string; token: string }> {
  const dir = tempDir();
  const server = await startSelfHosted(loadNodeConfig({ PORT: "0", LOG_LEVEL: "silent", DATA_DIR: dir, ...env }), () => {});
  cleanups.push(() => server.close());
  return { server, dir, token: readFileSync(join(dir, "owner-token"), "utf8").trim() };
}

async function openSession(url: string, token: string, hint: unknown = {}) {
  const res = await fetch(`${url}/api/projects/folder/session`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(hint),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { sessionId: string; url: string; absoluteUrl: string; method: string; headers: Record<string, string>; requiresAuth: boolean };
}

/** Files under DATA_DIR/uploads (partial ones included). */
function uploadFiles(dir: string): string[] {
  const root = join(dir, "uploads");
  try {
    return readdirSync(root, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath, e.name).slice(root.length + 1));
  } catch {
    return [];
  }
}

async function until(check: () => boolean, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 25));
  }
}

interface RawResult {
  status?: number;
  body?: string;
  error?: string;
  sent: number;
}

/**
 * POSTs `size` zero bytes over a raw socket-level request (Content-Length or chunked),
 * stopping as soon as the server answers; `abortAfter` cuts the upload off instead.
 */
function rawUpload(absoluteUrl: string, token: string, opts: { size: number; contentLength: boolean; abortAfter?: number }): Promise<RawResult> {
  return new Promise((resolve) => {
    const headers: Record<string, string | number> = { authorization: `Bearer ${token}`, "content-type": "application/gzip" };
    if (opts.contentLength) headers["content-length"] = opts.size;
    const req = http.request(absoluteUrl, { method: "POST", headers });
    const chunk = Buffer.alloc(1024 * 1024);
    let sent = 0;
    let answered = false;
    req.on("response", (res) => {
      answered = true;
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => {
        resolve({ status: res.statusCode, body, sent });
        req.destroy();
      });
    });
    req.on("error", (e) => {
      if (!answered) resolve({ error: e.message, sent });
    });
    const pump = () => {
      while (!answered && sent < opts.size) {
        if (opts.abortAfter !== undefined && sent >= opts.abortAfter) {
          req.destroy();
          resolve({ error: "aborted by the test", sent });
          return;
        }
        const n = Math.min(chunk.length, opts.size - sent);
        sent += n;
        if (!req.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void req.once("drain", pump);
      }
      if (!answered) req.end();
    };
    pump();
  });
}

describe("relay over HTTP: the 300 MiB limit", () => {
  it("refuses 300 MiB + 1 byte with Content-Length before reading the body", async () => {
    const { server, dir, token } = await start();
    const target = await openSession(server.url, token);
    const result = await rawUpload(target.absoluteUrl, token, { size: MAX_UPLOAD_BYTES + 1, contentLength: true });
    expect(result.status, JSON.stringify(result)).toBe(413);
    expect(JSON.parse(result.body!).detail).toMatch(/314572800-byte \(300 MiB\) limit/);
    expect(result.sent).toBeLessThan(MAX_UPLOAD_BYTES);
    expect(uploadFiles(dir)).toEqual([]);
  }, 60_000);

  it("refuses 300 MiB + 1 byte without Content-Length, keeping nothing of it", async () => {
    const { server, dir, token } = await start();
    const target = await openSession(server.url, token);
    // An earlier good upload of the session stays as it was.
    const good = await tgz({ "index.html": "<p>first</p>" });
    const first = await fetch(target.absoluteUrl, {
      method: "POST",
      headers: { ...target.headers, authorization: `Bearer ${token}` },
      body: good as Uint8Array<ArrayBuffer>,
    });
    expect(first.status).toBe(200);

    const result = await rawUpload(target.absoluteUrl, token, { size: MAX_UPLOAD_BYTES + 1, contentLength: false });
    expect(result.status, JSON.stringify(result)).toBe(413);
    await until(() => uploadFiles(dir).every((f) => !f.endsWith(".part")));
    expect(uploadFiles(dir)).toEqual([expect.stringMatching(new RegExp(`/${target.sessionId}\\.tar\\.gz$`))]);
    expect(readFileSync(join(dir, "uploads", uploadFiles(dir)[0]!)).equals(Buffer.from(good))).toBe(true);
    const scan = await fetch(`${server.url}/api/projects/folder/scan/${target.sessionId}`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
    expect(scan.status).toBe(200);
  }, 60_000);

  it("accepts exactly 300 MiB, streamed without Content-Length", async () => {
    const { server, dir, token } = await start();
    const target = await openSession(server.url, token);
    const result = await rawUpload(target.absoluteUrl, token, { size: MAX_UPLOAD_BYTES, contentLength: false });
    expect(result.status, JSON.stringify(result)).toBe(200);
    expect(JSON.parse(result.body!).sizeBytes).toBe(MAX_UPLOAD_BYTES);
    expect(uploadFiles(dir)).toHaveLength(1);
    // Zeros are not a gzip: the scan says so.
    const scan = await fetch(`${server.url}/api/projects/folder/scan/${target.sessionId}`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
    expect(scan.status).toBe(400);
    expect((await scan.json()).detail).toMatch(/not gzip/);
  }, 60_000);

  it("an interrupted upload leaves no file", async () => {
    const { server, dir, token } = await start();
    const target = await openSession(server.url, token);
    const result = await rawUpload(target.absoluteUrl, token, { size: 50 * 1024 * 1024, contentLength: false, abortAfter: 8 * 1024 * 1024 });
    expect(result.error).toBeDefined();
    await until(() => uploadFiles(dir).length === 0);
    const scan = await fetch(`${server.url}/api/projects/folder/scan/${target.sessionId}`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
    expect((await scan.json()).detail).toMatch(/Nothing has been uploaded/);
  }, 60_000);
});

describe("self-hosted with S3_* configured", () => {
  const s3 = () => ({
    S3_ENDPOINT: inject("s3Endpoint"),
    S3_BUCKET: inject("s3Bucket"),
    S3_ACCESS_KEY_ID: inject("s3AccessKeyId"),
    S3_SECRET_ACCESS_KEY: inject("s3SecretAccessKey"),
    S3_PREFIX: "self-hosted/",
  });

  it("hands out presigned targets; the relay route does not exist", async () => {
    const { server, dir, token } = await start(s3());
    const bytes = await tgz({ "requirements.txt": "fastapi==0.115\nuvicorn\n", "main.py": "app = None\n" });
    const target = await openSession(server.url, token, { sizeBytes: bytes.length });
    expect(target).toMatchObject({ method: "PUT", requiresAuth: false });
    expect(new URL(target.absoluteUrl).pathname).toMatch(/\/self-hosted\/org_[0-9a-z]+\/ups_[0-9a-z]+\.tar\.gz$/);

    const relay = await fetch(`${server.url}/api/projects/folder/upload/${target.sessionId}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/gzip" },
      body: bytes as Uint8Array<ArrayBuffer>,
    });
    expect(relay.status).toBe(404);
    expect((await relay.json()).detail).toBe(`No route for POST /api/projects/folder/upload/${target.sessionId}`);

    const put = await fetch(target.absoluteUrl, { method: target.method, headers: target.headers, body: bytes as Uint8Array<ArrayBuffer> });
    expect(put.status).toBe(200);
    const scan = await fetch(`${server.url}/api/projects/folder/scan/${target.sessionId}`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
    expect(await scan.json()).toMatchObject({ stack: "python", framework: "fastapi", startCommand: "uvicorn main:app --host 0.0.0.0 --port $PORT" });
    expect(uploadFiles(dir)).toEqual([]);
  }, 60_000);

  it("refuses an incomplete S3 configuration", () => {
    expect(() => loadNodeConfig({ S3_ENDPOINT: "http://127.0.0.1:9000", S3_BUCKET: "b" })).toThrow(/S3_ACCESS_KEY_ID: required when S3_ENDPOINT is set/);
    expect(() => loadNodeConfig({ PUBLIC_URL: "not a url" })).toThrow(/PUBLIC_URL/);
    expect(loadNodeConfig({ PUBLIC_URL: "https://ws.example.com" }).publicUrl).toBe("https://ws.example.com");
  });

  it("PUBLIC_URL is the base of relay targets", async () => {
    const { server, token } = await start({ PUBLIC_URL: "https://workspace.example.com/" });
    const target = await openSession(server.url, token);
    expect(target.absoluteUrl).toBe(`https://workspace.example.com/api/projects/folder/upload/${target.sessionId}`);
  });
});

describe("the upload sweeper on disk", () => {
  it("removes expired sessions, orphaned files and stale partial files; keeps the rest", async () => {
    const database = await openPglite({ loadDataDir: new Blob([readFileSync(inject("pgliteDump"))]), migrate: false });
    cleanups.push(() => database.close());
    const disk = createDiskStorage({ dir: tempDir() });
    const { db } = database;
    const { createOrganization, createUser } = await import("../../functions/identity/store");
    const user = await createUser(db, { email: "sweep@example.test", name: "Sweep" });
    const org = await createOrganization(db, "sweep", user.id);
    const now = new Date();
    const hourAgo = new Date(now.getTime() - 2 * 60 * 60 * 1000);
    const session = async (id: string, expiresAt: Date) => {
      await db.insert(uploadSessions).values({ id, orgId: org.id, target: "relay", objectKey: `${org.id}/${id}.tar.gz`, expiresAt });
      await disk.receive(`${org.id}/${id}.tar.gz`, new Blob(["data"]).stream(), 100);
    };
    await session("ups_live", new Date(now.getTime() + 60_000));
    await session("ups_expired", new Date(now.getTime() - 1000));
    const orgDir = join(disk.dir, org.id);
    mkdirSync(orgDir, { recursive: true });
    const write = (name: string, mtime: Date) => {
      writeFileSync(join(orgDir, name), "x");
      utimesSync(join(orgDir, name), mtime, mtime);
    };
    write("ups_orphan.tar.gz", hourAgo);
    write("ups_fresh.tar.gz", now);
    write("ups_crashed.tar.gz.00000000-0000-4000-8000-000000000000.part", hourAgo);
    write("ups_writing.tar.gz.00000000-0000-4000-8000-000000000001.part", now);

    await sweepUploadsOnce(db, disk, now, silentLogger);
    expect(readdirSync(orgDir).sort()).toEqual(["ups_fresh.tar.gz", "ups_live.tar.gz", "ups_writing.tar.gz.00000000-0000-4000-8000-000000000001.part"]);
    expect((await db.select().from(uploadSessions).where(eq(uploadSessions.orgId, org.id))).map((s) => s.id)).toEqual(["ups_live"]);
  });
});
