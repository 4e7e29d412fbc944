/**
 * Presigned uploads to S3-compatible object storage (S3, R2, MinIO, …) with the
 * AWS SDK's SigV4 signer. The service's own reads, stats, deletes and copies are
 * presigned too and sent with fetch: the SDK's error parsing needs DOMParser, which
 * workerd lacks, and fetch streams the body natively on both runtimes. So the S3
 * client is not needed at all: a URL is the bucket's REST path, path-style (what
 * local S3 servers need too, TOOLCHAIN.md), signed as the S3 client and
 * `@aws-sdk/s3-request-presigner` sign it (UNSIGNED-PAYLOAD, no checksums, `x-id`):
 * the same URLs, byte for byte, without the client's ~94 KiB of the Worker's gzipped
 * code. The signer is loaded on first use, so a server without S3 configured never
 * loads it (start-up time).
 */
import { GZIP_TYPE } from "./limits";
import { isStoreKey, type PresignedDownload, type PresignedStorage, type StoredUpload } from "./types";

/**
 * S3_REGION when unset, on both runtimes: the region SigV4 signs for. `us-east-1` is
 * AWS's default region and MinIO's, and R2 takes it as an alias of its `auto`; a
 * bucket on AWS in another region needs its own region set.
 */
export const DEFAULT_S3_REGION = "us-east-1";

export interface S3Settings {
  /** e.g. `https://<account>.r2.cloudflarestorage.com`, `https://s3.eu-west-1.amazonaws.com`, `http://127.0.0.1:9000`. */
  endpoint: string;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Prepended to every object key; default `uploads/`. */
  prefix?: string;
}

function checkedKey(key: string): string {
  if (!isStoreKey(key)) throw new Error(`refusing object key ${JSON.stringify(key)}`);
  return key;
}

/** The service's own requests are signed for this long. */
const INTERNAL_TTL_SECONDS = 60;

async function failure(res: Response, what: string): Promise<Error> {
  const text = await res.text().catch(() => "");
  const code = /<Code>([^<]{1,100})<\/Code>/.exec(text)?.[1];
  return new Error(`object storage ${what} failed: HTTP ${res.status}${code ? ` ${code}` : ""}`);
}

/** RFC 3986 escaping, as S3 and SigV4 expect it (encodeURIComponent leaves !'()* as they are). */
const uriEscape = (text: string) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

// Only the signer and its hash (./s3-sdk): the Worker's bundle keeps nothing else of the SDK.
const loadSdk = () => import("./s3-sdk");

interface Signing {
  method: "GET" | "HEAD" | "PUT" | "DELETE";
  /** The S3 operation's name, sent as `x-id` as the S3 client sends it (HeadObject has none). */
  operation?: "GetObject" | "PutObject" | "DeleteObject" | "CopyObject";
  key: string;
  expiresIn: number;
  signingDate?: Date;
  /** Sent with the request and signed (the storage refuses the request without the same values). */
  headers?: Record<string, string>;
  /** Signed as headers, not moved into the query (the x-amz-* headers are moved by default). */
  unhoistableHeaders?: Set<string>;
}

export function createS3Storage(settings: S3Settings): PresignedStorage {
  const endpoint = new URL(settings.endpoint);
  const basePath = endpoint.pathname.replace(/\/+$/, "");
  let loaded: Promise<InstanceType<Awaited<ReturnType<typeof loadSdk>>["SignatureV4"]>> | undefined;
  const signer = () =>
    (loaded ??= loadSdk().then(
      (sdk) =>
        new sdk.SignatureV4({
          service: "s3",
          region: settings.region,
          credentials: { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey },
          sha256: sdk.Sha256,
          // The path is escaped once, below (S3 signs it as sent; the client's default for S3 too).
          uriEscapePath: false,
        }),
    ));
  const prefix = settings.prefix ?? "uploads/";
  const Bucket = settings.bucket;
  const objectKey = (key: string) => prefix + checkedKey(key);
  /** The object's path-style path, each segment escaped (the key's slashes stay). */
  const objectPath = (key: string) => `${basePath}/${uriEscape(Bucket)}/${objectKey(key).split("/").map(uriEscape).join("/")}`;

  /** A presigned URL for one request on one object. */
  async function presignUrl({ method, operation, key, expiresIn, signingDate, headers = {}, unhoistableHeaders }: Signing): Promise<string> {
    const port = endpoint.port ? Number(endpoint.port) : undefined;
    const signed = await (await signer()).presign(
      {
        method,
        protocol: endpoint.protocol,
        hostname: endpoint.hostname,
        port,
        path: objectPath(key),
        query: operation ? { "x-id": operation } : {},
        headers: { ...headers, host: endpoint.host, "X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD" },
      },
      {
        expiresIn,
        signingDate,
        signableHeaders: new Set(Object.keys(headers).map((name) => name.toLowerCase())),
        unhoistableHeaders,
      },
    );
    // In the order the SDK's URL formatter writes them: the same URL, byte for byte, as the S3 client's presigner.
    const query = Object.entries(signed.query ?? {})
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .flatMap(([name, value]) => (Array.isArray(value) ? value : [value]).map((v) => `${uriEscape(name)}=${uriEscape(v ?? "")}`))
      .join("&");
    return `${endpoint.protocol}//${endpoint.host}${signed.path}?${query}`;
  }

  /** The object's size from a HEAD (no body read); null when it does not exist. */
  async function headSize(key: string): Promise<number | null> {
    const head = await presignUrl({ method: "HEAD", key, expiresIn: INTERNAL_TTL_SECONDS });
    const res = await fetch(head, { method: "HEAD" });
    await res.body?.cancel();
    if (res.status === 404) return null;
    if (!res.ok) throw new Error(`object storage stat failed: HTTP ${res.status}`);
    const sizeBytes = Number(res.headers.get("content-length"));
    if (!Number.isSafeInteger(sizeBytes) || sizeBytes < 0) throw new Error("object storage stat failed: no content length");
    return sizeBytes;
  }

  return {
    kind: "presigned",
    async presign({ key, sizeBytes, now, expiresInSeconds }) {
      if (!Number.isSafeInteger(sizeBytes) || sizeBytes < 1) throw new Error(`refusing to presign an upload of ${sizeBytes} bytes`);
      const headers: Record<string, string> = { "Content-Type": GZIP_TYPE, "Content-Length": String(sizeBytes) };
      // Both are signed: the storage refuses another type or size.
      const url = await presignUrl({ method: "PUT", operation: "PutObject", key, expiresIn: expiresInSeconds, signingDate: now, headers });
      return { url, absoluteUrl: url, method: "PUT", headers, requiresAuth: false };
    },
    async presignGet({ key, now, expiresInSeconds }): Promise<PresignedDownload | null> {
      // A HEAD first: a missing object gets no link, and the link comes with the size.
      const sizeBytes = await headSize(key);
      if (sizeBytes === null) return null;
      const url = await presignUrl({ method: "GET", operation: "GetObject", key, expiresIn: expiresInSeconds, signingDate: now });
      return { url, expiresAt: new Date(now.getTime() + expiresInSeconds * 1000), sizeBytes };
    },
    size: headSize,
    async open(key): Promise<StoredUpload | null> {
      const url = await presignUrl({ method: "GET", operation: "GetObject", key, expiresIn: INTERNAL_TTL_SECONDS });
      const res = await fetch(url);
      if (res.status === 404) {
        await res.body?.cancel();
        return null;
      }
      if (!res.ok || !res.body) throw await failure(res, "read");
      return { size: Number(res.headers.get("content-length") ?? 0), body: res.body as ReadableStream<Uint8Array> };
    },
    async remove(key) {
      const url = await presignUrl({ method: "DELETE", operation: "DeleteObject", key, expiresIn: INTERNAL_TTL_SECONDS });
      const res = await fetch(url, { method: "DELETE" });
      // S3 answers 204 whether or not the object existed; some compatible stores answer 404.
      if (!res.ok && res.status !== 404) throw await failure(res, "delete");
      await res.body?.cancel();
    },
    async copy(fromKey, toKey) {
      // CopyObject: the bucket copies the object itself. The copy source is signed as a header (not hoisted into the query).
      const source = `${Bucket}/${objectKey(fromKey)}`;
      const url = await presignUrl({
        method: "PUT",
        operation: "CopyObject",
        key: toKey,
        expiresIn: INTERNAL_TTL_SECONDS,
        headers: { "x-amz-copy-source": source },
        unhoistableHeaders: new Set(["x-amz-copy-source"]),
      });
      const res = await fetch(url, { method: "PUT", headers: { "x-amz-copy-source": source } });
      const text = await res.text().catch(() => "");
      if (res.status === 404 && /<Code>NoSuchKey<\/Code>/.test(text)) return false;
      // S3 may answer 200 and report a failed copy in the body.
      if (!res.ok || /<Error>/.test(text)) {
        const code = /<Code>([^<]{1,100})<\/Code>/.exec(text)?.[1];
        throw new Error(`object storage copy failed: HTTP ${res.status}${code ? ` ${code}` : ""}`);
      }
      return true;
    },
  };
}
