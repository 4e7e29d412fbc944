/**
 * The Node adapter's gunzip for the scan: zlib with 256 KiB output chunks
 * (see gunzip.ts for why not DecompressionStream on Node). Backpressure holds
 * from the source through zlib to the tar reader, so memory stays bounded for
 * any input, a gzip bomb included.
 */
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream";
import type { ReadableStream as NodeWebStream } from "node:stream/web";
import { createGunzip } from "node:zlib";
import { countInput, gzipError, type Gunzip } from "./gunzip";

const CHUNK = 256 * 1024;

const isZlibError = (e: unknown) => typeof (e as { code?: unknown })?.code === "string" && (e as { code: string }).code.startsWith("Z_");

export const nodeGunzip: Gunzip = async function* (input, counters) {
  const source = Readable.fromWeb(input as NodeWebStream<Uint8Array>);
  const count = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      countInput(counters, chunk);
      done(null, chunk);
    },
  });
  const gunzip = createGunzip({ chunkSize: CHUNK });
  // Errors reach the loop below through `gunzip`; stopping early (a refused archive) destroys the chain.
  pipeline(source, count, gunzip, () => {});
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>) {
      counters.out += chunk.length;
      yield new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length);
    }
  } catch (e) {
    throw isZlibError(e) ? gzipError(counters) : e;
  } finally {
    source.destroy();
    gunzip.destroy();
  }
};
