/**
 * The parts of the AWS SDK that shared/storage/s3.ts uses, as named imports: the client, the five
 * commands it presigns and the presigner. s3.ts loads this module lazily; importing the SDK's
 * whole namespace there instead would keep every command, paginator and waiter of the S3 client
 * in the Worker's bundle (an esbuild bundle cannot drop exports of a namespace used as a value).
 */
export { CopyObjectCommand, DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
export { getSignedUrl } from "@aws-sdk/s3-request-presigner";
