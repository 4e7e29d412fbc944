/**
 * Presigned uploads to S3-compatible object storage (S3, R2, MinIO, …) with the
 * AWS SDK v3 as the signer. The service's own reads and deletes are presigned
 * too and sent with fetch: the SDK's error parsing needs DOMParser, which workerd
 * lacks, and fetch streams the body natively on both runtimes. The client options
 * are the ones local S3 servers need too: path-style addressing and checksums
 * only when an operation requires them (TOOLCHAIN.md). The SDK is loaded on first
 * use, so a server without S3 configured never loads it (start-up time).
 */
import type { S3Client } from "@aws-sdk/client-s3";
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

// Only the names the storage uses (./s3-sdk): the Worker's bundle keeps nothing else of the SDK.
const loadSdk = () => import("./s3-sdk");

export function createS3Storage(settings: S3Settings): PresignedStorage {
  let loaded: Promise<{ sdk: Awaited<ReturnType<typeof loadSdk>>; client: S3Client }> | undefined;
  const load = () =>
    (loaded ??= loadSdk().then((sdk) => ({
      sdk,
      client: new sdk.S3Client({
        endpoint: settings.endpoint,
        region: settings.region,
        forcePathStyle: true,
        credentials: { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey },
        requestChecksumCalculation: "WHEN_REQUIRED",
        responseChecksumValidation: "WHEN_REQUIRED",
      }),
    })));
  const prefix = settings.prefix ?? "uploads/";
  const Bucket = settings.bucket;
  const objectKey = (key: string) => prefix + checkedKey(key);

  /** The object's size from a HEAD (no body read); null when it does not exist. */
  async function headSize(key: string): Promise<number | null> {
    const { sdk, client } = await load();
    const head = await sdk.getSignedUrl(client, new sdk.HeadObjectCommand({ Bucket, Key: objectKey(key) }), { expiresIn: INTERNAL_TTL_SECONDS });
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
      const { sdk, client } = await load();
      const command = new sdk.PutObjectCommand({ Bucket, Key: objectKey(key), ContentType: GZIP_TYPE, ContentLength: sizeBytes });
      // Both are signed explicitly (the presigner leaves content-type out by default): the storage refuses another type or size.
      const url = await sdk.getSignedUrl(client, command, {
        expiresIn: expiresInSeconds,
        signingDate: now,
        signableHeaders: new Set(["content-type", "content-length"]),
      });
      const headers: Record<string, string> = { "Content-Type": GZIP_TYPE, "Content-Length": String(sizeBytes) };
      return { url, absoluteUrl: url, method: "PUT", headers, requiresAuth: false };
    },
    async presignGet({ key, now, expiresInSeconds }): Promise<PresignedDownload | null> {
      // A HEAD first: a missing object gets no link, and the link comes with the size.
      const sizeBytes = await headSize(key);
      if (sizeBytes === null) return null;
      const { sdk, client } = await load();
      const url = await sdk.getSignedUrl(client, new sdk.GetObjectCommand({ Bucket, Key: objectKey(key) }), { expiresIn: expiresInSeconds, signingDate: now });
      return { url, expiresAt: new Date(now.getTime() + expiresInSeconds * 1000), sizeBytes };
    },
    size: headSize,
    async open(key): Promise<StoredUpload | null> {
      const { sdk, client } = await load();
      const url = await sdk.getSignedUrl(client, new sdk.GetObjectCommand({ Bucket, Key: objectKey(key) }), { expiresIn: INTERNAL_TTL_SECONDS });
      const res = await fetch(url);
      if (res.status === 404) {
        await res.body?.cancel();
        return null;
      }
      if (!res.ok || !res.body) throw await failure(res, "read");
      return { size: Number(res.headers.get("content-length") ?? 0), body: res.body as ReadableStream<Uint8Array> };
    },
    async remove(key) {
      const { sdk, client } = await load();
      const url = await sdk.getSignedUrl(client, new sdk.DeleteObjectCommand({ Bucket, Key: objectKey(key) }), { expiresIn: INTERNAL_TTL_SECONDS });
      const res = await fetch(url, { method: "DELETE" });
      // S3 answers 204 whether or not the object existed; some compatible stores answer 404.
      if (!res.ok && res.status !== 404) throw await failure(res, "delete");
      await res.body?.cancel();
    },
    async copy(fromKey, toKey) {
      const { sdk, client } = await load();
      // CopyObject: the bucket copies the object itself. The copy source is signed as a header (not hoisted into the query).
      const source = `${Bucket}/${objectKey(fromKey)}`;
      const command = new sdk.CopyObjectCommand({ Bucket, Key: objectKey(toKey), CopySource: source });
      const url = await sdk.getSignedUrl(client, command, {
        expiresIn: INTERNAL_TTL_SECONDS,
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
