/**
 * Reference discovery over git smart HTTP: the one git operation the API itself does
 * (ls-remote.ts), on Node and in the Worker. `GET info/refs` with `Git-Protocol: version=2`;
 * a v2 server then gets `POST git-upload-pack` with `command=ls-refs` (`symrefs`, one
 * `ref-prefix`), a server without v2 answered with the v0 advertisement, filtered here.
 *
 * It speaks exactly what isomorphic-git's `listServerRefs` did, which it replaces in the
 * API: that package is one module whose imports (pako, sha.js and their polyfills) cost the
 * Worker's bundle ~110 KB minified for these two requests. The runner, which clones, still
 * uses isomorphic-git on Node.
 *
 * As there, the pkt-line reader ends the list at the first malformed or failed read rather
 * than throwing: ls-remote.ts's HTTP client records every read failure itself, so a truncated
 * or oversized answer is never taken for a short list.
 */

/** A reference as the server lists it; `target` for a symbolic ref (HEAD) when `symrefs` was asked. */
export interface ServerRef {
  ref: string;
  oid: string;
  target?: string;
}

export interface GitHttpRequest {
  url: string;
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: Uint8Array[];
}

export interface GitHttpResponse {
  statusCode: number;
  statusMessage: string;
  /** Lower-case names. */
  headers: Record<string, string>;
  body: AsyncIterable<Uint8Array>;
}

export interface GitHttpClient {
  request(req: GitHttpRequest): Promise<GitHttpResponse>;
}

export type GitProtocolErrorCode = "HttpError" | "SmartHttpError" | "ParseError" | "EmptyServerResponseError";

/** What the host answered is not a reference listing; `code` names why (the names isomorphic-git used). */
export class GitProtocolError extends Error {
  constructor(
    readonly code: GitProtocolErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "GitProtocolError";
  }
}

const SERVICE = "git-upload-pack";
// The capability value may not contain spaces (gitprotocol-v2).
const AGENT = "workspace-service";
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The end of the lines: the body ended, or a read failed or was malformed. */
const END = Symbol("end");
type PktLine = Uint8Array | null | typeof END;

/** A data pkt-line: four hex digits of length (themselves included), then the payload. */
function pktLine(text: string): Uint8Array {
  const payload = encoder.encode(text);
  return concat(encoder.encode((payload.byteLength + 4).toString(16).padStart(4, "0")), payload);
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a, 0);
  out.set(b, a.byteLength);
  return out;
}

/** Reads pkt-lines: a payload, null for a flush or delimiter packet, END at the end or on any failure. */
function pktLineReader(body: AsyncIterable<Uint8Array>): () => Promise<PktLine> {
  const chunks = body[Symbol.asyncIterator]();
  let buffered: Uint8Array = new Uint8Array(0);
  let done = false;
  const fill = async (n: number) => {
    while (buffered.byteLength < n && !done) {
      const next = await chunks.next();
      if (next.done) done = true;
      else if (next.value.byteLength > 0) buffered = buffered.byteLength === 0 ? next.value : concat(buffered, next.value);
    }
    return buffered.byteLength >= n;
  };
  const take = (n: number) => {
    const out = buffered.subarray(0, n);
    buffered = buffered.subarray(n);
    return out;
  };
  // A malformed answer is not read any further (the rest of the body is released).
  const stop = async (): Promise<typeof END> => {
    done = true;
    await chunks.return?.()?.catch(() => {});
    return END;
  };
  return async () => {
    try {
      if (!(await fill(4))) return END;
      const hex = decoder.decode(take(4));
      if (!/^[0-9a-fA-F]{4}$/.test(hex)) return await stop();
      const length = Number.parseInt(hex, 16);
      // 0000 flush, 0001 delimiter.
      if (length === 0 || length === 1) return null;
      if (length < 4 || !(await fill(length - 4))) return await stop();
      return take(length - 4);
    } catch {
      return END;
    }
  };
}

const text = (line: Uint8Array) => decoder.decode(line).replace(/\n$/, "");

function splitInTwo(line: string, separator: string): [string, string] {
  const parts = line.trim().split(separator);
  if (parts.length !== 2) throw new GitProtocolError("ParseError", "The git host's reference advertisement is malformed");
  return parts as [string, string];
}

type Advertisement = { protocol: 2 } | { protocol: 1; refs: Map<string, string>; symrefs: Map<string, string> };

async function drain(read: () => Promise<PktLine>): Promise<void> {
  while ((await read()) !== END) {
    // A v2 server's capabilities: ls-refs is part of every v2 server.
  }
}

/** The `info/refs` answer: a v2 capability list, or the v0/v1 references with their symbolic refs. */
async function parseAdvertisement(body: AsyncIterable<Uint8Array>): Promise<Advertisement> {
  const read = pktLineReader(body);
  let first = await read();
  while (first === null) first = await read();
  if (first === END) throw new GitProtocolError("EmptyServerResponseError", "The git host's answer is empty");
  // Some servers (Bitbucket Server) answer v2 without the `# service=` line.
  if (text(first).includes("version 2")) {
    await drain(read);
    return { protocol: 2 };
  }
  if (text(first) !== `# service=${SERVICE}`) throw new GitProtocolError("ParseError", "The git host's answer does not start with the service line");
  const refs = new Map<string, string>();
  const symrefs = new Map<string, string>();
  let second = await read();
  while (second === null) second = await read();
  // A new repository with no references (and no capabilities).
  if (second === END) return { protocol: 1, refs, symrefs };
  if (text(second).includes("version 2")) {
    await drain(read);
    return { protocol: 2 };
  }
  const [firstRef, capabilities] = splitInTwo(decoder.decode(second), "\0");
  // `capabilities^{}` stands in for the first reference of a repository without any (git >= 2.41).
  if (firstRef !== "0000000000000000000000000000000000000000 capabilities^{}") {
    const [oid, name] = splitInTwo(firstRef, " ");
    refs.set(name, oid);
    for (let line = await read(); line !== END; line = await read()) {
      if (line === null) continue;
      const [oid, name] = splitInTwo(decoder.decode(line), " ");
      refs.set(name, oid);
    }
  }
  for (const capability of capabilities.split(" ")) {
    const symref = /^symref=([^:]+):(.*)$/.exec(capability);
    if (symref) symrefs.set(symref[1]!, symref[2]!);
  }
  return { protocol: 1, refs, symrefs };
}

async function collect(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  let all: Uint8Array = new Uint8Array(0);
  for await (const chunk of body) all = concat(all, chunk);
  return all;
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

export interface ListServerRefsOptions {
  http: GitHttpClient;
  /** The repository URL, without a trailing slash. */
  url: string;
  headers?: Record<string, string>;
  /** Only references starting with this (`refs/heads/`, `HEAD`). */
  prefix: string;
  /** Name the target of symbolic references (`HEAD` → `refs/heads/main`). */
  symrefs?: boolean;
}

/** The references under `prefix`, in the server's order. */
export async function listServerRefs(options: ListServerRefsOptions): Promise<ServerRef[]> {
  const headers = { ...options.headers, "Git-Protocol": "version=2" };
  const discovered = await options.http.request({ method: "GET", url: `${options.url}/info/refs?service=${SERVICE}`, headers });
  if (discovered.statusCode !== 200) throw new GitProtocolError("HttpError", `HTTP ${discovered.statusCode}`);
  let advertisement: Advertisement;
  if (discovered.headers["content-type"] === `application/x-${SERVICE}-advertisement`) {
    advertisement = await parseAdvertisement(discovered.body);
  } else {
    // Not a smart HTTP answer by its type (a dumb server, or an HTML page): parsed anyway, as git does.
    try {
      advertisement = await parseAdvertisement(once(await collect(discovered.body)));
    } catch {
      throw new GitProtocolError("SmartHttpError", "The git host's answer is not git smart HTTP");
    }
  }

  if (advertisement.protocol === 1) {
    const refs: ServerRef[] = [];
    for (const [ref, oid] of advertisement.refs) {
      // Peeled tags (`^{}`) are not references of their own.
      if (!ref.startsWith(options.prefix) || ref.endsWith("^{}")) continue;
      const target = options.symrefs ? advertisement.symrefs.get(ref) : undefined;
      refs.push(target === undefined ? { ref, oid } : { ref, oid, target });
    }
    return refs;
  }

  const body = [pktLine("command=ls-refs\n"), pktLine(`agent=${AGENT}\n`), encoder.encode("0001")];
  if (options.symrefs) body.push(pktLine("symrefs"));
  body.push(pktLine(`ref-prefix ${options.prefix}`), encoder.encode("0000"));
  const listed = await options.http.request({
    method: "POST",
    url: `${options.url}/${SERVICE}`,
    headers: { ...headers, "content-type": `application/x-${SERVICE}-request`, accept: `application/x-${SERVICE}-result` },
    body,
  });
  if (listed.statusCode !== 200) throw new GitProtocolError("HttpError", `HTTP ${listed.statusCode}`);
  const read = pktLineReader(listed.body);
  const refs: ServerRef[] = [];
  for (let line = await read(); line !== END; line = await read()) {
    if (line === null) continue;
    const [oid = "", ref = "", ...attributes] = text(line).split(" ");
    const listedRef: ServerRef = { ref, oid };
    for (const attribute of attributes) {
      if (attribute.startsWith("symref-target:")) listedRef.target = attribute.slice("symref-target:".length);
    }
    refs.push(listedRef);
  }
  return refs;
}
