/**
 * The upload store behind folder-upload sessions. Two kinds:
 * - `presigned`: S3-compatible object storage; the client PUTs straight to a
 *   presigned URL (`requiresAuth: false`). The cloud, and a self-hosted instance
 *   configured with S3_*.
 * - `relay`: local disk under DATA_DIR on the self-hosted adapter; the client
 *   POSTs to the API's own relay route (`requiresAuth: true`).
 * Both read a tarball back as a Web stream for the scan and delete it when stale,
 * and copy it server-side to a deployment's durable artifact key.
 */
import { OBJECT_KEY } from "./limits";

/**
 * Where a deployment's durable copy of its uploaded tarball lives: under
 * `artifacts/`, outside every session's `<orgId>/` prefix, so neither the expired-session
 * sweep (it removes session keys only) nor the disk orphan sweep (it lists
 * `<orgId>/<file>` only) ever removes it.
 */
export const ARTIFACT_ROOT = "artifacts";
export const artifactKeyFor = (orgId: string, deploymentId: string) => `${ARTIFACT_ROOT}/${orgId}/${deploymentId}.tar.gz`;
export const ARTIFACT_KEY = /^artifacts\/[a-z]+_[0-9a-z]+\/[a-z]+_[0-9a-z]+\.tar\.gz$/;
/** Keys the stores accept: a session's object key or a deployment's artifact key (our own ids only). */
export const isStoreKey = (key: string) => OBJECT_KEY.test(key) || ARTIFACT_KEY.test(key);
export interface UploadTarget {
  url: string;
  absoluteUrl: string;
  method: "PUT" | "POST";
  headers: Record<string, string>;
  requiresAuth: boolean;
}

export interface StoredUpload {
  size: number;
  body: ReadableStream<Uint8Array>;
}

interface CommonStorage {
  /** The tarball of `key`, or null when nothing was uploaded. The caller must consume or cancel `body`. */
  open(key: string): Promise<StoredUpload | null>;
  /** Removes the tarball of `key`; removing a missing one is not an error. */
  remove(key: string): Promise<void>;
  /**
   * Copies `fromKey` to `toKey` inside the store (no bytes through the service on
   * S3; an atomic file copy on disk: `toKey` appears whole or not at all). False
   * when `fromKey` does not exist.
   */
  copy(fromKey: string, toKey: string): Promise<boolean>;
  /** The stored size of `key` in bytes, or null when nothing is stored there (a deployment's artifact is measured once copied). */
  size(key: string): Promise<number | null>;
}

export interface PresignedStorage extends CommonStorage {
  readonly kind: "presigned";
  /** A PUT URL for `key` signed at `now`, valid `expiresInSeconds`, for exactly `sizeBytes` bytes (an unsigned length would take any size). */
  presign(input: { key: string; sizeBytes: number; now: Date; expiresInSeconds: number }): Promise<UploadTarget>;
  /**
   * A GET URL for the object at `key` signed at `now`, valid `expiresInSeconds`, that
   * anyone holding it can download without a token (the export's artifact link).
   * Null when nothing is stored at `key` (checked first, which also gives its size).
   */
  presignGet(input: { key: string; now: Date; expiresInSeconds: number }): Promise<PresignedDownload | null>;
}

export interface PresignedDownload {
  url: string;
  expiresAt: Date;
  sizeBytes: number;
}

export interface RelayStorage extends CommonStorage {
  readonly kind: "relay";
  /** Base of absolute relay URLs (PUBLIC_URL); absent: the origin the session request came to. */
  readonly publicUrl?: string;
  /**
   * Streams `body` to `key` in constant memory. More than `maxBytes` fails with
   * UploadTooLargeError; on any failure nothing is left behind and an earlier
   * upload of `key` stays as it was.
   */
  receive(key: string, body: ReadableStream<Uint8Array>, maxBytes: number): Promise<{ size: number }>;
}

export type UploadStorage = PresignedStorage | RelayStorage;

export class UploadTooLargeError extends Error {}
