/**
 * The parts of the AWS SDK that shared/storage/s3.ts uses: the SDK's own SigV4 signer and its
 * SHA-256 (node:crypto on Node, WebCrypto on the Worker, through the package's browser field).
 * Every request the storage makes is a presigned URL sent with fetch, so the S3 client itself
 * (its per-operation schemas, endpoint rules, middleware stack and XML protocol, ~75 KiB of the
 * Worker's gzipped code) is not needed: the URL is the S3 REST path and the signer signs it as
 * `@aws-sdk/s3-request-presigner` does. s3.ts loads this module lazily (start-up time).
 */
export { Sha256 } from "@smithy/core/checksum";
export { SignatureV4 } from "@smithy/signature-v4";
