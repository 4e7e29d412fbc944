/**
 * Early answers on the Worker: a response given before the request body was read to its
 * end (413 on an oversized JSON body, with or without Content-Length; any answer to a
 * request whose body the route never reads).
 *
 * workerd ends such a request at once: when the response is complete and the body is not,
 * its HTTP server (and every workerd hop in front of the Worker: `wrangler dev`'s proxy,
 * Miniflare's entry) stops reading, waits at most 64 KiB or 1 s for the rest, then closes
 * the connection, and the kernel answers the client's further bytes with a reset. A client
 * still sending (Node's fetch, most upload clients) then loses the answer: `wrangler dev`
 * reset a 64 MiB chunked upload after 10-14 MiB. Reading the body after the response is
 * complete is refused ("Can't read from request stream after response has been sent"),
 * so `waitUntil` cannot drain it either.
 *
 * So the answer is sent first and kept open while the rest of the body is read and
 * discarded: the status, the headers and the body's bytes go out at once (the body is
 * re-framed as chunked, its length no longer declared), and the response ends only when the
 * request body has ended or DRAIN_BYTES / DRAIN_MS have passed, as the Node adapter's
 * lingering close does. Then the connection can carry the next request. Past the bounds the
 * reading stops, the answer ends, and a client still sending may see a reset after it.
 */

/** How many bytes of a request body are still read and discarded after an early answer. */
export const DRAIN_BYTES = 64 * 1024 * 1024;
/** For how long, at most, after an early answer. */
export const DRAIN_MS = 10_000;

export interface DrainLimits {
  bytes: number;
  ms: number;
}

interface WaitUntil {
  waitUntil(promise: Promise<unknown>): void;
}

type FetchHandler<E, C> = (request: Request, env: E, ctx: C) => Response | Promise<Response>;

// Statuses whose response cannot carry a body: such an answer is passed on as it is.
const NULL_BODY = new Set([101, 204, 205, 304]);

/** `handler` with early answers that reach the client (see above). */
export function answerBeforeBody<E, C extends WaitUntil>(
  handler: FetchHandler<E, C>,
  limits: DrainLimits = { bytes: DRAIN_BYTES, ms: DRAIN_MS },
): FetchHandler<E, C> {
  return async (request, env, ctx) => {
    if (!request.body) return handler(request, env, ctx);
    const source = request.body.getReader();
    let ended = false;
    let draining = false;
    // The app reads the body through this stream; cancelling it (a body over the limit) leaves the source open for the drain.
    const body = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          if (draining) return controller.close();
          const { done, value } = await source.read();
          if (done) {
            ended = true;
            controller.close();
          } else controller.enqueue(value);
        },
        cancel() {},
      },
      { highWaterMark: 0 },
    );
    const response = await handler(new Request(request, { body }), env, ctx);
    if (ended || NULL_BODY.has(response.status)) return response;

    draining = true;
    // Started before the response is returned: the body is being read from now on.
    const drained = drain(source, limits);
    ctx.waitUntil(drained);
    const answer = response.body?.getReader();
    let answered = !answer;
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (!answered) {
          const { done, value } = await answer!.read();
          if (!done) return controller.enqueue(value);
          answered = true;
        }
        await drained;
        controller.close();
      },
      async cancel(reason) {
        // The client went away: nobody waits for the rest of its body.
        await Promise.all([answer?.cancel(reason), source.cancel(reason)].map((p) => p?.catch(() => {})));
      },
    });
    const headers = new Headers(response.headers);
    headers.delete("content-length");
    return new Response(stream, { status: response.status, statusText: response.statusText, headers });
  };
}

/** Reads and discards the rest of the body, up to `limits`; resolves when it ended, or is cancelled past them. */
async function drain(source: ReadableStreamDefaultReader<Uint8Array>, limits: DrainLimits): Promise<void> {
  const timer = setTimeout(() => {
    source.cancel().catch(() => {});
  }, limits.ms);
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await source.read();
      if (done) return;
      bytes += value.byteLength;
      if (bytes > limits.bytes) {
        await source.cancel();
        return;
      }
    }
  } catch {
    // The client went away or the body was malformed: nothing more to read.
  } finally {
    clearTimeout(timer);
  }
}
